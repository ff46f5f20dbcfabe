"""Where the time of a contact step and of a rollout step goes (issue 33 point 4).

The compiled step (contact/step.py) is CasADi code of four functions and a hand-written loop: ``<name>_prep`` (v_free
by ABA, G by the Delassus algorithm, g = J v_free, and w, the q stage of post: one function, cse shares the
kinematics of its parts), the solver's iterations (C; ADMM calls ``<name>_factor`` when ρ changes and
``<name>_solve`` once per iteration), and ``<name>_post`` (M⁻¹Jᵀλ from w).  The rollout (codegen/contact_rollout.py) adds
``<name>_positions`` (the candidates' world positions, for the gaps), ``<name>_integrate`` (q ⊕ dt v) and
``<name>_free`` (v + dt ABA when no contact is active).

``PhaseHarness`` times each of these functions alone in C (templates/phase_timing.c.j2: dlopen, thread CPU time,
every function in turn within each repetition) beside the whole step with and without its iterations;
``part_counts`` gives the SX instructions of prep's parts traced alone and ``recomputed`` what a phase recomputes
of another (the instructions of the two apart less those of the two in one function with cse)."""
from __future__ import annotations

import shlex
import tempfile
from pathlib import Path

import casadi as ca
import numpy as np

from ..version import __version__
from ..codegen.build import find_compiler
from ..codegen.trace import trace
from ..constraints import ConstraintSet
from ..opcount import count_ops
from ..symbolic.frames import local_transforms
from ..sweeps.joint_space import constraint_jacobian
from .render import ENV
from .stats import compile_harness, run_harness

# inputs of one function that are outputs of another under another name (the matrix-free route's stages)
ALIASES = {"w_q": "wd", "w_R": "factors"}


def instructions(f):
    """SX instructions of the casadi.Function ``f`` (opcount.py)."""
    return count_ops(f)["instructions"]


def evaluate(f, values):
    """The outputs {name: flat array} of ``f`` on the inputs it takes from ``values`` (by name or ALIASES)."""
    args = [a.reshape(f.size_in(i), order="F") for i, a in enumerate(inputs_of(f, values))]
    outs = f.call(args)
    return {n: np.asarray(ca.DM(o)).reshape(-1, order="F") for n, o in zip(f.name_out(), outs)}


def inputs_of(f, values):
    """``f``'s inputs from ``values`` as flat column-major float arrays, in its order."""
    out = []
    for n in f.name_in():
        key = ALIASES.get(n, n) if ALIASES.get(n) in values else n
        out.append(np.asarray(values[key], dtype=float).reshape(-1, order="F"))
    return out


class PhaseHarness:
    """Each ``(label, casadi.Function, inputs)`` of ``entries`` timed alone in C from the library ``so`` (the function's
    symbol is its name); ``step`` (dict: symbol, q, v, tau, dt, mu, opts, opts0, nv, m) adds the whole step with and
    without its iterations.  ``run(reps)`` → ({label: [ns per call]}, {label: first output})."""

    def __init__(self, so, entries, step=None, calls=2000, cc=None):
        self.so, self.calls = Path(so).resolve(), int(calls)
        self._tmp = tempfile.TemporaryDirectory(prefix="cd-phases-")
        tmp = Path(self._tmp.name)
        blocks, functions, offset = [], [], 0
        for label, f, args in entries:
            offsets = []
            for a in args:
                offsets.append(offset)
                blocks.append(a)
                offset += a.size
            functions.append(dict(label=label, symbol=f.name(), offsets=offsets, out_size=int(f.numel_out(0))))
        step_offsets = None
        if step:
            step_offsets = {}
            for k in ("q", "v", "tau", "dt", "mu", "opts", "opts0"):
                a = np.atleast_1d(np.asarray(step[k], dtype=float))
                step_offsets[k], offset = offset, offset + a.size
                blocks.append(a)
        self.data, self.exe = tmp / "inputs.bin", tmp / "phase_timing"
        np.concatenate(blocks).astype(np.float64).tofile(self.data)
        src = ENV.get_template("phase_timing.c.j2").render(
            version=__version__, names=" ".join(f["label"] for f in functions), functions=functions, data_size=offset,
            step=step["symbol"] if step else None, step_offsets=step_offsets,
            nv=step["nv"] if step else 0, m=step["m"] if step else 0)
        (tmp / "phase_timing.c").write_text(src)
        cc = find_compiler(cc)
        compile_harness([*shlex.split(cc), "-O2", "-o", self.exe, tmp / "phase_timing.c", "-ldl"], "the phase harness",
                        cc)

    def run(self, reps=1):
        out = run_harness([self.exe, self.so, self.data, self.calls, reps], "phase timing")
        ns, first = {}, {}
        for line in out.splitlines():
            kind, label, *rest = line.split()
            if kind == "ns":
                ns.setdefault(label, []).append(float(rest[0]))
            elif kind == "out":
                first[label] = np.array([float(x) for x in rest])
        return ns, first

    def close(self):
        self._tmp.cleanup()


def part_counts(robot, cs, delassus):
    """SX instructions of prep's parts, each traced alone (cse): the joints' local transforms (the kinematics every
    part starts from), ABA (v_free), the Delassus algorithm (G) and J v_free (g)."""
    q, v, tau = (ca.SX.sym(n, k) for n, k in (("q", robot.nq), ("v", robot.nv), ("tau", robot.nv)))
    T = local_transforms(robot, q)
    kin = ca.Function("kinematics", [q], ca.cse([ca.densify(ca.vertcat(ca.vec(t.X.E), ca.vec(t.X.r))) for t in T]))
    aba = trace(robot, ConstraintSet(robot, [], allow_empty=True), "aba", cse=True)[0]
    G = trace(robot, cs, delassus, cse=True)[0]
    J = constraint_jacobian(robot, cs, T, cs.symbolic_K_bodies(q, {}))
    g = ca.Function("g", [q, v], ca.cse([ca.densify(ca.mtimes(J, v))]))
    return {"local transforms (kinematics)": instructions(kin), "ABA (v_free)": instructions(aba),
            f"{delassus} (G)": instructions(G), "J v (g)": instructions(g)}


def with_cse(f):
    """``f`` with CasADi's cse applied to its outputs (what one function shares within itself)."""
    args = f.sx_in()
    return ca.Function(f.name(), args, ca.cse(f.call(args)), f.name_in(), f.name_out())


def recomputed(first, second):
    """(instructions of ``first`` and ``second`` apart, each with cse; of both in one function with cse; the
    difference: what one recomputes of the other); both take q as their first input, ``second`` nothing else."""
    args = first.sx_in()
    both = ca.Function("both", args, ca.cse([*first.call(args), *second.call([args[0]])]))
    apart = instructions(with_cse(first)) + instructions(with_cse(second))
    fused = instructions(both)
    return apart, fused, apart - fused

