"""Operation counts of an SX Function, the metric of ../shared/DESIGN.md:
``instructions`` is every instruction except OP_INPUT / OP_OUTPUT (constants count), as the
papers' implementation prints it; ``flops`` and ``ops`` break the arithmetic down by type."""
from __future__ import annotations

from collections import Counter

import casadi as ca

from .progress import step

_NAMES = {getattr(ca, n): n[3:].lower() for n in dir(ca) if n.startswith("OP_")}
_GROUP = {"add": "add", "sub": "add", "mul": "mul", "sq": "mul", "twice": "mul",
          "div": "div", "inv": "div", "neg": "neg", "sqrt": "sqrt"}
_NOT_FLOPS = {"const", "input", "output", "parameter", "assign"}


def count_ops(f: ca.Function) -> dict:
    with step(f"counting the operations of {f.name()} ({f.n_instructions():,} instructions)"):
        raw = Counter(_NAMES.get(f.instruction_id(k), str(f.instruction_id(k))) for k in range(f.n_instructions()))
    ops = Counter()
    for name, n in raw.items():
        if name not in ("input", "output"):
            ops[_GROUP.get(name, name)] += n
    flops = sum(n for name, n in ops.items() if name not in _NOT_FLOPS)
    return {"instructions": sum(ops.values()), "flops": flops,
            "ops": {k: ops.get(k, 0) for k in ("add", "mul", "div", "sqrt", "neg", "const")} |
                   {k: v for k, v in sorted(ops.items()) if k not in ("add", "mul", "div", "sqrt", "neg", "const")}}


def pass_counts(passes, inputs, cse=True):
    """[(pass, instructions it adds)] for the passes recorded by symbolic/passes.py: each counted
    as the Function of ``inputs`` whose outputs are everything recorded so far, minus the count
    before it (a shared sub-expression is charged to the first pass that needs it); exact
    constants are not work."""
    out, seen, prev = [], [], 0
    for name, values in passes:
        seen += _scalars(values)
        exprs = [ca.vertcat(*seen)] if seen else [ca.SX(0, 1)]
        n = count_ops(ca.Function("passes", inputs, ca.cse(exprs) if cse else exprs))["instructions"]
        out.append((name, n - prev))
        prev = n
    return out


def _scalars(x):
    """The non-constant SX scalars in x (SX, or lists, tuples and dicts of them; numbers skipped)."""
    if isinstance(x, dict):
        return [e for v in x.values() for e in _scalars(v)]
    if isinstance(x, (list, tuple)):
        return [e for v in x for e in _scalars(v)]
    if isinstance(x, ca.SX):
        return [x.nz[k] for k in range(x.nnz()) if not x.nz[k].is_constant()]
    return []
