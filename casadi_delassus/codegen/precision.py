"""The floating-point type of the generated C (issue 26): ``double`` (the default) or
``single`` (``float`` throughout).

In single precision CasADi's code generator declares every value ``float`` (its
``casadi_real`` option); :func:`to_float` casts its floating literals to float (CasADi prints
some inside expressions, ``2.*a1``: a double operand would make the operation double; the cast
rounds the double constant once, as the batch's splat of it does) and renames the libm calls
to their float forms (``sinf``, ``sqrtf``, ...), so no operation runs in double.  The compiler checks it: SINGLE_FLAGS makes any implicit promotion of a float to
double an error.  The error this costs is measured at build against the same function
evaluated in double (verify/precision.py) and stored in the manifest."""
from __future__ import annotations

import re

from ..errors import DelassusError

PRECISIONS = ("double", "single")
C_REAL = {"double": "double", "single": "float"}
# a float promoted to double anywhere in the .c (a double libm call, a double literal in an
# expression) is a compile error, not a silent slowdown
SINGLE_FLAGS = ("-Werror=double-promotion",)
# libm functions CasADi's C may call (codegen/vectorise.py lists the same)
LIBM = ("sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh",
        "exp", "log", "log1p", "expm1", "sqrt", "pow", "fabs", "floor", "ceil", "fmod", "remainder", "fmin", "fmax",
        "copysign", "erf", "hypot")
_CALL = re.compile(r"(?<![\w.])(" + "|".join(LIBM) + r")(?=\()")
_NOT_CODE = ("/*", "*", "#", "//")       # comment and preprocessor lines keep their numbers
_DOUBLE = re.compile(r"\bdouble\b")
# a constant's definition: "#define NAME value" where value is a floating literal (with a sign)
_DEFINE = re.compile(r"^(#define \w+ )([-+]?(?:\d+\.\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?\d+[eE][-+]?\d+)$", re.M)
_LITERAL = re.compile(r"(?<![\w.])((?:\d+\.\d*|\.\d+)(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+)(?![\w.])")


def check(precision):
    """``precision`` if it is one of PRECISIONS, else a one-line DelassusError."""
    if precision not in PRECISIONS:
        raise DelassusError(f"precision {precision!r}: use one of {', '.join(PRECISIONS)}")
    return precision


def to_float(code):
    """``code`` with every floating literal cast to float (2. -> ((casadi_real)2.)) and every
    libm call by its float name (sin( -> sinf()."""
    return "\n".join(line if line.lstrip().startswith(_NOT_CODE) else _CALL.sub(r"\1f", _LITERAL.sub(r"((casadi_real)\1)", line))
                     for line in code.split("\n"))


def hand_written_to_float(code):
    """Hand-written C rendered with CasADi's (the contact step's and rollout's templates, issue 33) in float: every
    ``double`` declared ``casadi_real`` (float in single precision), then to_float; a ``#define NAME literal``
    constant (the ADMM loop's ρ rules, Anderson's weights) cast as a literal in an expression is, since it enters
    expressions."""
    code = "\n".join(line if line.lstrip().startswith(_NOT_CODE) else _DOUBLE.sub("casadi_real", line)
                     for line in code.split("\n"))
    return _DEFINE.sub(lambda m: m[1] + _LITERAL.sub(r"((casadi_real)\1)", m[2]), to_float(code))


def libm_name(name, precision):
    """The C name of the libm function ``name`` in ``precision``."""
    return name + "f" if precision == "single" and name in LIBM else name
