"""Errors the user can act on.  Each names the offending thing; the CLI prints the message
on one line and exits with status 2, and no caller ever sees a CasADi traceback."""
import difflib


class DelassusError(ValueError):
    """Base class: bad input a user can fix."""


class ModelError(DelassusError):
    """Missing, malformed or physically invalid robot model."""


class ConstraintError(DelassusError):
    """Bad constraint specification."""


class InputError(DelassusError):
    """Wrong shape or value passed to a generated function."""


class BatchInputError(InputError):
    """The single call's InputError (``reason``) for instance ``instance`` of a batch."""

    def __init__(self, instance, reason):
        super().__init__(f"instance {instance} of the batch: {reason}")
        self.instance, self.reason = instance, reason

    def __reduce__(self):
        return type(self), (self.instance, self.reason)


class CompilerError(DelassusError):
    """No working C compiler, or the generated code failed to compile."""


class OutputError(DelassusError):
    """The output folder cannot be written (read-only, full, not a folder)."""


class ArtifactError(DelassusError):
    """Generated files that are not what their manifest records (damaged, edited, missing)."""


class DerivativeWarning(UserWarning):
    """A compiled function made into a casadi.Function that CasADi cannot differentiate as
    far as an exact-Hessian solver asks (its .so lacks CasADi's derivative functions)."""


def unknown_name(kind, name, known):
    """Error for an unknown name, with the close matches a user probably meant."""
    close = difflib.get_close_matches(name, list(known), n=4, cutoff=0.5)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return f"unknown {kind} {name!r}{hint}"
