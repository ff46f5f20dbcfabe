"""Operation counts of an SX Function, the metric of ../shared/DESIGN.md:
``instructions`` is every instruction except OP_INPUT / OP_OUTPUT (constants count), as the
papers' implementation prints it; ``flops`` and ``ops`` break the arithmetic down by type."""
from __future__ import annotations

from collections import Counter

import casadi as ca

_NAMES = {getattr(ca, n): n[3:].lower() for n in dir(ca) if n.startswith("OP_")}
_GROUP = {"add": "add", "sub": "add", "mul": "mul", "sq": "mul", "twice": "mul",
          "div": "div", "inv": "div", "neg": "neg", "sqrt": "sqrt"}
_NOT_FLOPS = {"const", "input", "output", "parameter", "assign"}


def count_ops(f: ca.Function) -> dict:
    raw = Counter(_NAMES.get(f.instruction_id(k), str(f.instruction_id(k))) for k in range(f.n_instructions()))
    ops = Counter()
    for name, n in raw.items():
        if name not in ("input", "output"):
            ops[_GROUP.get(name, name)] += n
    flops = sum(n for name, n in ops.items() if name not in _NOT_FLOPS)
    return {"instructions": sum(ops.values()), "flops": flops,
            "ops": {k: ops.get(k, 0) for k in ("add", "mul", "div", "sqrt", "neg", "const")} |
                   {k: v for k, v in sorted(ops.items()) if k not in ("add", "mul", "div", "sqrt", "neg", "const")}}
