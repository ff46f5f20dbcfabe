"""Staged evaluation of a traced function: the re-evaluation split of the matrix-free paper
(../shared/papers/001_a194bdf892a0cc2c.txt, Sec. VI-B "Efficient operator re-evaluation" and
the last columns of its Table I), generic over any traced SX Function.

The inputs of f are split into ordered stages, e.g. [q] | [lam] for delassus_apply or
[q] | [R] | [lam] for the damped inverses.  Stage s evaluates every node of f whose inputs
lie in stages ≤ s; it *stores* exactly the nodes that do not depend on later-stage inputs but
are operands of nodes that do (or are outputs of f), as one flat work vector ``w_<stage>``.
Stage s + 1 takes its own inputs and ``w_<stage s>``; the last stage returns f's outputs.
A node of stage s that a stage after s + 1 reads is passed through the stages between, so
each stage reads only its predecessor's vector.  Re-evaluating for a new vector then costs
the last stage only, for a new damping the last two.

The split (symbolic/staging.py, pure SX) is CasADi's ``extract_parametric`` with ``extract_trivial`` (a bare input or an
earlier stored value that a later stage reads is stored too), applied stage by stage: it cuts
the graph exactly at the boundary nodes above (tests/codegen/test_staging.py checks this against
an independent walk over the Function's instructions) in milliseconds on graphs of 10⁴–10⁵
nodes.  Constants are never stored (they are recreated where used), so the stages' op counts
add up to the monolithic count plus the few constants two stages share.
"""
from __future__ import annotations

import time
from pathlib import Path

import casadi as ca
import numpy as np

from ..registry import get_algorithm
from ..errors import DelassusError
from ..runtime import artifact
from ..symbolic.staging import Stage, split, stacked, work_name
from .build import DEFAULT_CFLAGS, content_hash, find_compiler, make_manifest, write_compiled
from .trace import trace


def algorithm_stages(algorithm, input_names):
    """The registry's stages of ``algorithm``: "factor" (q and runtime K inputs), then its
    declared stages (default: one "apply" stage with every vector input)."""
    algo = get_algorithm(algorithm)
    if not algo.inputs:
        raise DelassusError(f"algorithm {algorithm!r} takes no vector input after q: nothing to stage "
                            f"(staging re-evaluates for new vectors/damping, e.g. delassus_apply, damped_inverse_apply)")
    later = [(name, list(group)) for name, group in (algo.stages or (("apply", algo.inputs),))]
    return [("factor", [n for n in input_names if n not in algo.inputs]), *later]


def evaluate(stages, values):
    """Run the stages numerically on ``values`` ({input name: array}); returns
    ({stage: its outputs as numpy arrays}), the last stage's are f's outputs."""
    results, work = {}, {}
    for st in stages:
        args = {n: values[n] for n in st.inputs}
        if st.work_in:
            args[st.work_in] = work[st.work_in]
        res = {k: np.asarray(v) for k, v in st.function(**args).items()}
        if st.work_out:
            work[st.work_out] = res[st.work_out]
        results[st.name] = res
    return results


def stage_io(stage, inputs, outputs, sizes):
    """Manifest inputs/outputs of a stage from those of the monolithic function."""
    by_name = {i["name"]: i for i in inputs}
    ins = [by_name[n] for n in stage.inputs]
    if stage.work_in:
        ins.append({"name": stage.work_in, "shape": [sizes[stage.work_in]],
                    "meaning": f"stored intermediates of the previous stage (its {stage.work_in} output, passed unchanged)"})
    if not stage.work_out:
        return ins, outputs
    return ins, [{"name": stage.work_out, "shape": [sizes[stage.work_out]], "row_names": None,
                  "meaning": f"stored intermediates of stage {stage.name!r}: the input {stage.work_out} of the next stage"}]


def build_stages(robot, constraints, algorithm, out_dir, scenario, cflags=DEFAULT_CFLAGS, cc=None, cse=True,
                 force=False, model=None):
    """Generate and compile one function per registry stage of ``algorithm``
    (``<algo>_factor``, [``<algo>_damping``,] ``<algo>_apply``), each with its manifest;
    returns their manifest paths in stage order."""
    cc = find_compiler(cc)
    model = model or artifact.model_name(robot)
    fname = artifact.function_name(model, scenario, algorithm)
    key = content_hash(robot, constraints, algorithm, cflags, cse, cc, False, fname) + "-stages"
    paths = [Path(out_dir) / f"{artifact.stem(algorithm, stage=name)}.json" for name, _ in algorithm_stages(algorithm, [])]
    artifact.clean_stale(out_dir)
    if not force and all(artifact.cached(p, key) for p in paths):
        return paths
    t0 = time.perf_counter()
    f, inputs, outputs = trace(robot, constraints, algorithm, name=fname, cse=cse)
    stages = split(f, algorithm_stages(algorithm, list(f.name_in())))
    t_trace = time.perf_counter() - t0
    sizes = {st.work_out: int(st.function.size1_out(0)) for st in stages if st.work_out}
    for k, (st, path) in enumerate(zip(stages, paths)):
        ins, outs = stage_io(st, inputs, outputs, sizes)
        manifest = make_manifest(st.function, robot, constraints, scenario, ins, outs, cflags, cc, cse, key,
                                 function=st.function.name(), model_name=model, algorithm=algorithm, osim=False,
                                 stage={"name": st.name, "index": k, "of": [s.name for s in stages],
                                        "inputs": st.inputs, "work_in": st.work_in, "work_out": st.work_out,
                                        "work_sizes": sizes})
        write_compiled(st.function, manifest, path.parent, path.stem, t_trace)
    return paths


# -- splitting by outputs (big functions: each stage compiles on its own) ---------------------------
SHARED = "shared"


def split_outputs(f, groups):
    """One casadi.Function per group of f's outputs, after a first stage ``shared`` that computes
    what two or more groups read: [Stage(shared): f's inputs -> w_shared, Stage(g): f's inputs,
    w_shared -> the outputs of group g].  ``groups``: [(name, [output names])], partitioning f's
    outputs.  Walks f's instructions once: a node belongs to the groups whose outputs read it;
    nodes of two or more groups form the first stage, which stores those that a group's own
    nodes (or outputs) read; constants are recreated where used.  So gcc sees a few functions
    of bounded size instead of one, and the stages' counts add up to f's plus shared constants."""
    names = list(f.name_out())
    where = {o: g for g, (_, outs) in enumerate(groups) for o in outs}
    if sorted(where) != sorted(names):
        raise DelassusError(f"output groups must partition the outputs of {f.name()} ({names}), got {groups}")
    n_instr = f.n_instructions()
    ids = [f.instruction_id(k) for k in range(n_instr)]
    slot_def, operands, out_def = {}, [None] * n_instr, []
    for k in range(n_instr):
        op, ins = ids[k], f.instruction_input(k)
        if op == ca.OP_OUTPUT:
            out_def.append((f.instruction_output(k), slot_def[ins[0]]))
            continue
        operands[k] = [] if op in (ca.OP_INPUT, ca.OP_CONST) else [slot_def[s] for s in ins]
        slot_def[f.instruction_output(k)[0]] = k
    need = [0] * n_instr
    for (o, _), d in out_def:
        need[d] |= 1 << where[names[o]]
    for k in reversed(range(n_instr)):
        for d in operands[k] or ():
            need[d] |= need[k]
    computed = [k for k in range(n_instr) if ids[k] not in (ca.OP_INPUT, ca.OP_CONST, ca.OP_OUTPUT)]
    shared = {k for k in computed if bin(need[k]).count("1") > 1}
    readers = {d for k in computed if k not in shared for d in operands[k]} | {d for _, d in out_def}
    stored = sorted(k for k in shared if k in readers)
    sym = [ca.SX.sym(n, f.sparsity_in(i)) for i, n in enumerate(f.name_in())]

    def build(keep, given):
        """Expressions of the instructions in ``keep`` (and the inputs, constants) over ``given``."""
        expr = dict(given)
        for k in range(n_instr):
            op = ids[k]
            if k in expr or op == ca.OP_OUTPUT:
                continue
            if op == ca.OP_INPUT:
                i, nz = f.instruction_input(k)
                expr[k] = sym[i].nz[nz]
            elif op == ca.OP_CONST:
                expr[k] = ca.SX(f.instruction_constant(k))
            elif k in keep:
                a = [expr[d] for d in operands[k]]
                expr[k] = ca.SX.unary(op, a[0]) if len(a) == 1 else ca.SX.binary(op, a[0], a[1])
        return expr
    first = build(shared, {})
    w = ca.SX.sym(work_name(SHARED), len(stored))
    stages = [Stage(SHARED, ca.Function(f"{f.name()}_{SHARED}", sym, [stacked([first[k] for k in stored])],
                                        list(f.name_in()), [work_name(SHARED)]), list(f.name_in()), None, work_name(SHARED))]
    for g, (gname, outs) in enumerate(groups):
        own = {k for k in computed if need[k] == 1 << g}
        expr = build(own, {k: w[x] for x, k in enumerate(stored)})
        mats = {o: ca.SX(f.sparsity_out(o)) for o in outs}
        for (o, nz), d in out_def:
            if names[o] in mats:
                mats[names[o]].nz[nz] = expr[d]
        stages.append(Stage(gname, ca.Function(f"{f.name()}_{gname}", [*sym, w], [mats[o] for o in outs],
                                               [*f.name_in(), work_name(SHARED)], outs),
                            list(f.name_in()), work_name(SHARED), None))
    return stages
