"""C of the contact step's derivatives (contact/step_derivatives.py has their mathematics): ``<name>_parts``,
``<name>_fwd`` and ``<name>_adj`` emitted by CasADi into one library, the optimisation level picked from the largest
function's instruction count, compiled once per hash of what determines it (build_cached, kind
"step_derivatives").  runtime/step_derivatives.py loads and calls it; ``step_derivatives`` (stepping/derivatives.py)
is the entry."""
from __future__ import annotations

from ..contact.step_derivatives import traced_functions
from ..opcount import count_ops
from ..runtime import artifact
from ..runtime.compiler import find_compiler
from ..version import __version__
from .build import auto_context, build_cached, resolve_cflags
from .contact_step import DEFAULT_OUT, build_key
from .emit import casadi_source

DEFAULT_CFLAGS = ("auto",)      # codegen/build.py resolve_cflags, by the largest function's size


def function_name(robot, scenario, model=None):
    """The prefix of the library's functions, ``<name>_parts`` and the others (runtime/step_derivatives.py calls
    them by it)."""
    return artifact.function_name(artifact.model_name(robot, model), scenario, "contact") + "_deriv"


def build(robot, cs, scenario, out_dir=DEFAULT_OUT, cflags=DEFAULT_CFLAGS, cc=None, model=None):
    """Compile the three functions into one library (cached by a hash of what determines them);
    returns its manifest's path (sealed: runtime/step_derivatives.py loads it).
    gcc's time and memory grow faster than linearly with the largest function in the file
    (codegen/build.py), so "auto" picks the level from that function's instruction count; the
    manifest (.json) records the counts, the C size, the flags and the compile time."""
    cc = find_compiler(cc)
    model = artifact.model_name(robot, model)
    name = function_name(robot, scenario, model)
    auto = any(f.startswith("auto") for f in cflags)
    key = build_key(robot, cs, cflags, cc, host=auto_context() if auto else None)

    def make():
        functions = traced_functions(robot, cs, name)
        sizes = {f.name().rsplit("_", 1)[1]: count_ops(f)["instructions"] for f in functions}
        flags = resolve_cflags(cflags, max(sizes.values()), cc, kind="derivative") if auto else cflags
        source = casadi_source(functions[0], functions[1:])
        return source, flags, {"function": name, "instructions": sizes, "c_bytes": len(source.encode()), "cc": cc,
                               "cflags": list(flags), "version": __version__}
    stem = f"contact_deriv_{key[:16]}"
    return build_cached(artifact.folder(out_dir, model, scenario), stem, make, cc, key, "step_derivatives", timed=True)
