"""The split of a traced SX Function into re-evaluation stages (the matrix-free paper
../shared/papers/001_a194bdf892a0cc2c.txt, Sec. VI-B "Efficient operator re-evaluation"): stage s evaluates
every node whose inputs lie in stages <= s and stores, as one flat vector ``w_<stage>``, exactly the nodes a
later stage reads.  Pure SX: the mathematics (contact/step.py's staged M^-1 J^T lambda) and the compile side
(codegen/staging.py: the registry's stages, built and compiled) both use it; codegen/staging.py's docstring has
the method and its checks."""
from __future__ import annotations

from dataclasses import dataclass

import casadi as ca

from ..errors import DelassusError


@dataclass
class Stage:
    name: str
    function: ca.Function       # (own inputs..., w_<previous stage>) -> w_<name>, or f's outputs
    inputs: list                # names of its own inputs, in f's order
    work_in: str | None         # name of the stored vector it reads (None for the first stage)
    work_out: str | None        # name of the vector it stores (None for the last stage)


def work_name(stage):
    return f"w_{stage}"


def _check_partition(f, stages):
    names = list(f.name_in())
    given = [n for _, group in stages for n in group]
    unknown = [n for n in given if n not in names]
    if unknown:
        raise DelassusError(f"stages name unknown inputs {unknown}; {f.name()} takes {names}")
    if sorted(given) != sorted(names):
        missing = [n for n in names if n not in given]
        twice = sorted({n for n in given if given.count(n) > 1})
        raise DelassusError(f"stages must split the inputs of {f.name()} ({names}) into disjoint groups: "
                            + (f"missing {missing}" if missing else f"{twice} given twice"))
    if any(not group for _, group in stages) or len(stages) < 2:
        raise DelassusError(f"stages of {f.name()} need at least two non-empty groups, got {stages}")


def stacked(scalars):
    return ca.vertcat(*scalars) if scalars else ca.SX(0, 1)


def split(f, stages):
    """One casadi.Function per stage.  ``stages``: [(name, [input names of f])], in evaluation
    order, partitioning f's inputs.  Returns [Stage]."""
    _check_partition(f, stages)
    sym = dict(zip(f.name_in(), f.sx_in()))
    rest = f.call(list(sym.values()))
    out, work_in, w = [], None, None          # the previous stage's stored vector: name, symbols
    for k, (name, group) in enumerate(stages):
        own = [n for n in f.name_in() if n in group]
        args = [sym[n] for n in own] + ([w] if work_in else [])
        arg_names = own + ([work_in] if work_in else [])
        fname = f"{f.name()}_{name}"
        if k == len(stages) - 1:
            out.append(Stage(name, ca.Function(fname, args, rest, arg_names, list(f.name_out())), own, work_in, None))
            break
        rest, w_syms, w_exprs = ca.extract_parametric(rest, args, {"extract_trivial": True, "prefix": f"{name}_"})
        fn = ca.Function(fname, args, [stacked(w_exprs)], arg_names, [work_name(name)])
        out.append(Stage(name, fn, own, work_in, work_name(name)))
        work_in, w = work_name(name), stacked(w_syms)
    return out
