"""Configurations per µs, side by side in one run (``casadi-delassus bench ROBOT --batch N``,
bench/batch.py): our single call in a C loop, our batched call (``<fn>_batch``,
codegen/vectorise.py) on one core and on all cores (C harness, batch_harness.py), the same from
Python (``f(Q)``), Pinocchio's computeDelassusMatrix in a C++ loop (timing.py) and MuJoCo
computing the same J M⁻¹ Jᵀ in a C loop (mujoco_harness.py), plus SX instructions per ns
against the machine's peaks, measured in the same run (peak.py).  Repetitions are
interleaved (round r runs every contender once; a batch contender makes one untimed call and
BATCH_CALLS timed ones on the whole batch, the C harness and f(Q) alike); one-core contenders run on the last core
this process may use, all-core ones on every allowed core (the process's CPU affinity:
``taskset``).

Single precision (issue 26): the same function generated in float, ``f32(Q)`` from Python
with a float32 Q on one core and on all cores, beside the double ``f(Q)`` from Python (the same
door, the same batch runtime), with the ratio and the error bound its manifest stores.

Also what a Python single call costs above the C time: ``f(q)`` (a new array per call) and
``f(q, out=D)``, median of 10 rounds of 10,000 calls cycling over the same configurations as
the C harness.
"""
from __future__ import annotations

import contextlib
import os
import re
import statistics
import time

import numpy as np

from .. import api
from ..runtime.batch import aligned_empty
from . import peak
from .batch_harness import BatchHarness
from ..errors import DelassusError
from ..verify.check import relative_error
from .c_harness import CHarness, random_samples
from .pinocchio_harnesses import PinocchioCppHarness
from .results import machine
from .stats import Timing

SINGLE = "single call (C loop)"
BATCH_ONE = "batch, 1 core (C)"
# the same call with NULL outputs: the price of moving results out of the lanes, by difference
NO_OUTPUTS = "batch, 1 core, outputs not written (C)"
BATCH_CALLS = 10
PY_ONE, PY_ONE_FP32 = "batch, 1 core (Python f(Q))", "batch FP32, 1 core (Python f(Q))"
HEADERS = ["contender", "configs/µs (median)", "min–max", "× single call", "× single call (best vs best)",
           "SX instr/ns per core", "of scalar peak", "flops of AVX2 FMA peak"]


class PythonBatch:
    """``f(Q, threads=…, out=D)`` timed in this process, D the array a first ``f(Q)`` returned
    (what a loop reusing its memory does; f(Q)'s arrays are aligned for the streamed stores,
    as the C harness's are); ns per configuration."""

    def __init__(self, f, Q, threads, label, out=None):
        self.f, self.Q, self.threads, self.label = f, Q, threads, label
        self.out = self.f(Q, threads=threads) if out is None else out

    def run(self, reps=1):
        """One untimed call (as the C harness's warm-up), then ``reps`` timed calls."""
        self.f(self.Q, threads=self.threads, out=self.out)
        ns = []
        for _ in range(reps):
            t0 = time.perf_counter_ns()
            self.f(self.Q, threads=self.threads, out=self.out)
            ns.append((time.perf_counter_ns() - t0) / len(self.Q))
        return Timing(self.label, f"Python f(Q), {self.threads} thread(s), N = {len(self.Q)}", ns, 1, len(self.Q),
                      self.out[0].reshape(-1, order="F"))

    def close(self):
        pass


def python_call_ns(f, qs, calls=100_000, out=False):
    """Median ns per ``f(q)`` (``f(q, out=D)`` with ``out``) over 10 rounds of ``calls``/10
    calls, cycling over the configurations ``qs``."""
    D = np.empty(f.output_specs[0]["shape"]) if out else None
    n, per = len(qs), calls // 10
    rounds = []
    for _ in range(10):
        t0 = time.perf_counter_ns()
        if out:
            for i in range(per):
                f(qs[i % n], out=D)
        else:
            for i in range(per):
                f(qs[i % n])
        rounds.append((time.perf_counter_ns() - t0) / per)
    return statistics.median(rounds)


def alignment_note(f, Q, rounds=5):
    """How the alignment of ``out`` changes f(Q, out=…, threads=1): ns per configuration into
    memory starting at 64, 16 and 8 bytes past a 64-byte boundary (median of ``rounds``
    interleaved rounds of BATCH_CALLS calls, after one untimed call each)."""
    shape = (len(Q), *f.output_specs[0]["shape"])
    raw = aligned_empty((int(np.prod(shape)) + 8,))
    outs = {f"{8 * k or 64}-byte": raw[k:k + raw.size - 8].reshape(shape) for k in (0, 2, 1)}
    ns = {k: [] for k in outs}
    for _ in range(rounds):
        for k, out in outs.items():
            ns[k] += PythonBatch(f, Q, 1, k, out=out).run(BATCH_CALLS).ns
    return ("f(Q, out=…, threads=1), N = " + f"{len(Q):,}, out aligned to " +
            ", ".join(f"{k}: {statistics.median(v):.0f} ns" for k, v in ns.items()) + " per configuration "
            "(64: whole-vector streamed stores; 16: streamed in halves, an np.empty array's usual alignment; 8: plain stores)")


@contextlib.contextmanager
def pinned(cpus):
    """This process (and the harnesses it starts) on ``cpus``."""
    saved = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, saved)


def measure_peaks(cpu, progress=None):
    if progress:
        progress(f"measuring the machine's peaks on cpu {cpu} ...")
    with pinned({cpu}):
        return peak.measure(reps=5, seconds=0.1)


def _contenders(f, sets, qs, Q, n_c, threads, mujoco_calls, progress, f32=None):
    """({label: harness} on one core, {label: harness} on all cores, notes); ``Q`` the Python
    contenders' batch; ``f32`` the function in single precision, given Q in float32."""
    # the batch contenders time BATCH_CALLS single calls of the whole batch per repetition after
    # one untimed call, C and Python alike: the C time includes waking its threads, as f(Q)'s
    one = {SINGLE: CHarness(f, sets, label="single"),
           BATCH_ONE: BatchHarness(f, sets, n=n_c, calls=1, threads=1),
           NO_OUTPUTS: BatchHarness(f, sets, n=n_c, calls=1, threads=1, outputs=False, label="no outputs"),
           PY_ONE: PythonBatch(f, Q, 1, "python x1")}
    many = {f"batch, {threads} cores (C)": BatchHarness(f, sets, n=n_c, calls=1, threads=threads),
            f"batch, {threads} cores (Python f(Q))": PythonBatch(f, Q, threads, f"python x{threads}")}
    if f32 is not None:
        Q32 = Q.astype(np.float32)
        one[PY_ONE_FP32] = PythonBatch(f32, Q32, 1, "python fp32 x1")
        many[f"batch FP32, {threads} cores (Python f(Q))"] = PythonBatch(f32, Q32, threads, f"python fp32 x{threads}")
    notes = []
    try:
        one["Pinocchio computeDelassusMatrix (C++ loop)"] = PinocchioCppHarness(f.robot, f.constraints, sets,
                                                                                progress=progress)
    except Exception as exc:   # noqa: BLE001 - reported, the others are still measured
        notes.append(f"Pinocchio not measured: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
    try:
        from .mujoco_harness import MujocoHarness, MujocoModel
        mj = MujocoModel(f.robot, f.constraints)
        one["MuJoCo J M⁻¹ Jᵀ (C loop, 1 thread)"] = MujocoHarness(mj, qs, calls=mujoco_calls)
        many[f"MuJoCo J M⁻¹ Jᵀ (C loop, {threads} threads)"] = MujocoHarness(mj, qs, calls=mujoco_calls * threads,
                                                                              threads=threads)
        worst = max(relative_error(mj.delassus(q), f(q)) for q in qs[:8])
        notes.append(f"MuJoCo's J M⁻¹ Jᵀ vs ours: largest relative difference {worst:.1e} over 8 configurations"
                     + (f" (MuJoCo needed positive-definite inertias: off-diagonals of {mj.changed_inertias} zeroed)"
                        if mj.changed_inertias else ""))
    except Exception as exc:   # noqa: BLE001
        notes.append(f"MuJoCo not measured: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
    return one, many, notes


def run(robot, constraints=None, algorithm="auto", reps=7, n_c=10_000, n_py=10_000, all_cpus=None, progress=None,
        mujoco_calls=3000, python_calls=100_000, generate=None, single=True):
    """Every contender on one robot and constraint set (a Delassus function, ``algorithm``;
    ``generate``: more keywords for api.generate; ``single``: also the function in single
    precision); returns a dict for ``markdown`` (timings {label: Timing}, the manifest, notes)."""
    say = progress or (lambda s: None)
    all_cpus = set(all_cpus or os.sched_getaffinity(0))
    one_cpu, threads = {max(all_cpus)}, len(all_cpus)
    f = api.generate(robot, constraints, algorithm, **(generate or {}))
    m = f.manifest
    if "delassus" not in {o["name"] for o in m["outputs"]}:
        raise DelassusError(f"--batch compares Delassus functions; {algorithm} outputs "
                                f"{', '.join(o['name'] for o in m['outputs'])}")
    label = f"auto→{m['auto']['chosen']}" if "auto" in m else algorithm
    where = f"{m['robot']}/{m['scenario']}"
    say(f"[{where}] {label}: {m['op_count']['instructions']:,} instructions, batch {m['batch']['lanes']} lanes "
        f"({m['batch']['isa']}), sin/cos of the single call: {m['sincos']['route']}")
    sets = random_samples(f.robot, f.constraints, 64, 0)
    qs = [x["q"] for x in sets]
    Q = np.resize(np.array(qs), (n_py, f.robot.nq))
    f32 = api.generate(robot, constraints, algorithm, precision="single", **(generate or {})) if single else None
    one, many, notes = _contenders(f, sets, qs, Q, n_c, threads, mujoco_calls, say, f32)
    timings = {}
    try:
        for r in range(reps):
            for group, cpus in ((one, one_cpu), (many, all_cpus)):
                for key, h in group.items():
                    with pinned(cpus):
                        t = h.run(BATCH_CALLS if key.startswith("batch") else 1)
                    timings[key] = t if key not in timings else timings[key].extend(t)
            say(f"[{where}] repetition {r + 1}/{reps}: " +
                ", ".join(f"{k.split(' (')[0]} {1e3 / t.ns[-1]:.2f}/µs" for k, t in timings.items()))
    finally:
        for h in (*one.values(), *many.values()):
            h.close()
    for key, t in timings.items():
        if key.startswith(("batch", "MuJoCo")) and "Python" not in key and t.output is not None:
            ref = f(qs[0]).reshape(-1, order="F" if key.startswith("MuJoCo") else "C")
            if t.output.size == ref.size and relative_error(t.output, ref) > 1e-6:
                notes.append(f"{key}: its sample 0 differs from the single call by {relative_error(t.output, ref):.1e}")
    if f32 is not None:
        notes.append(single_note(f32, timings))
    say(f"[{where}] Python single calls ({python_calls:,} each) ...")
    with pinned(one_cpu):
        notes.append(alignment_note(f, Q))
        c_ns = CHarness(f, sets).run(3).median
        fresh, given = python_call_ns(f, qs, python_calls), python_call_ns(f, qs, python_calls, out=True)
    notes.append(f"Python single call ({f.door}): f(q) {fresh / 1e3:.2f} µs, f(q, out=D) {given / 1e3:.2f} µs; "
                 f"the C harness {c_ns / 1e3:.2f} µs: {(fresh - c_ns) / 1e3:.2f} and {(given - c_ns) / 1e3:.2f} µs "
                 f"above the C time (median of 10 rounds x {python_calls // 10:,} calls over 64 configurations)")
    return {"scenario": where, "algorithm": label, "manifest": m, "timings": timings, "notes": notes,
            "threads": threads, "one_cpu": max(one_cpu), "n_c": n_c, "n_py": n_py,
            "python": {"f(q)": fresh, "f(q, out=D)": given, "C": c_ns}}


def single_note(f32, timings):
    """FP32 against FP64, both f(Q) from Python on one core, and what FP32 costs in error."""
    p, b = f32.precision, f32.manifest["batch"]
    a, d = timings[PY_ONE_FP32], timings[PY_ONE]
    return (f"Single precision (FP32, {b['lanes']} lanes, {b['isa']}): f(Q) on 1 core {1e3 / a.median:.2f}/µs against "
            f"FP64 {1e3 / d.median:.2f}/µs: {d.median / a.median:.2f}× (best vs best {d.min / a.min:.2f}×); its error "
            f"against double, measured at build over {p['samples']} samples: max {p['max_rel_error']:.1e}, median "
            f"{p['median_rel_error']:.1e} (relative to max |D| per sample)")


def where_the_time_goes(res, peaks):
    """The batch on one core taken apart: the no-output contender prices moving the results
    out of the vector lanes; libmvec's sin + cos per angle (peak.py, same run) prices the
    sin/cos, which the batch computes for every lane and the single call packs 4 angles to a
    vector; what remains is the arithmetic of one vector-kernel call (``lanes``
    configurations) against one single call.  The batch is ``lanes`` times the single call
    only where a whole lane-call costs what one single call does."""
    t, m = res["timings"], res["manifest"]
    lanes, angles = m["batch"]["lanes"], m["sincos"]["angles"]
    single, batch, bare = (t[k].median for k in (SINGLE, BATCH_ONE, NO_OUTPUTS))
    text = (f"Where the batch's time goes (1 core, medians): writing the results out of the {lanes} vector lanes into "
            f"N × rows × cols memory costs {batch - bare:.0f} ns per configuration ({(batch - bare) / batch:.0%} of "
            f"{batch:.0f}); without it the batch runs at {single / bare:.2f}× the single call. One {lanes}-lane call "
            f"without outputs (inputs moved into the lanes and checked, sin/cos, arithmetic) takes {lanes * bare:.0f} ns, "
            f"{lanes * bare / single:.2f}× one single call ({single:.0f} ns)")
    per_angle = peaks.get("libmvec_sin_cos_angles_per_ns", {}).get("ns_median")
    packed = re.fullmatch(r"libmvec, (\d+) lanes", m["sincos"]["route"])
    if per_angle and angles and packed and m["batch"]["sincos"] == "libmvec":
        mvec_lanes = int(packed[1])
        lane_call, one_call = lanes * angles * per_angle, -(-angles // mvec_lanes) * mvec_lanes * per_angle
        text += (f". Of those, sin/cos of the {angles} angles take about {lane_call:.0f} ns in the {lanes}-lane call "
                 f"(every lane's) and {one_call:.0f} ns in the single call ({per_angle:.2f} ns per angle, libmvec, "
                 f"peaks above); the rest, {lanes * bare - lane_call:.0f} against {single - one_call:.0f} ns "
                 f"({(lanes * bare - lane_call) / (single - one_call):.2f}×), is the arithmetic with, in the {lanes}-lane "
                 "call, the inputs' moves and checks and, in the single call, its output stores. "
                 + with_exact_lane_scaling(single, one_call, angles * per_angle, batch - bare, lanes))
    return text


def with_exact_lane_scaling(single, single_sincos, lane_sincos, outputs, lanes):
    """What a ``lanes``-wide batch gives over the single call if its arithmetic scales exactly
    ``lanes``-fold (each configuration's share: the single call's arithmetic over ``lanes``)
    while sin/cos and the output moves cost what this run measured (per configuration, ns):
    the batch beats it only where a vector instruction does more than ``lanes`` scalar ones."""
    arithmetic = (single - single_sincos) / lanes
    bare, full = single / (arithmetic + lane_sincos), single / (arithmetic + lane_sincos + outputs)
    return (f"With that arithmetic exactly {lanes} times as fast per configuration as the single call's, sin/cos at "
            f"libmvec's measured cost per angle and the output moves as measured, the batch would give {full:.2f}× "
            f"the single call ({bare:.2f}× with no outputs written)")


def rows(res, peaks):
    m, t = res["manifest"], res["timings"]
    ins, flops = m["op_count"]["instructions"], m["op_count"]["flops"]
    single = t[SINGLE].median
    scalar_peak = peaks["scalar_add_mul_ops_per_ns"]["best"]
    simd_peak = peaks.get("avx2_fma_flop_per_ns", {}).get("best")
    out = []
    for key, x in t.items():
        per_core = x.median * (res["threads"] if "cores" in key or "threads)" in key else 1)
        ours = not key.startswith(("Pinocchio", "MuJoCo"))
        ipns = ins / per_core if ours else None
        out.append([key, round(1e3 / x.median, 3), f"{1e3 / x.max:.2f}–{1e3 / x.min:.2f}",
                    round(single / x.median, 2), round(t[SINGLE].min / x.min, 2),
                    round(ipns, 2) if ipns else None,
                    f"{100 * ipns / scalar_peak:.0f} %" if ipns else "",
                    f"{100 * flops / per_core / simd_peak:.1f} %" if ours and simd_peak else ""])
    return out


def markdown(results, peaks, command, reps):
    """The report: machine, peaks, one table per scenario, notes."""
    first = results[0]
    md = ["# Batched evaluation: configurations per µs", "",
          f"Machine: {machine()}; {first['threads']} cores allowed.",
          f"`{command}`; median of {reps} interleaved repetitions (in each, every batch contender makes one untimed "
          f"call and {BATCH_CALLS} timed calls on the whole batch); one-core contenders on cpu {first['one_cpu']}.",
          "Peaks measured in the same run (casadi_delassus/timing/peak.py): scalar add+mul "
          f"{peaks['scalar_add_mul_ops_per_ns']['best']:.2f} ops/ns"
          + (f", AVX2 FMA {peaks['avx2_fma_flop_per_ns']['best']:.2f} flop/ns" if "avx2_fma_flop_per_ns" in peaks else "")
          + ". `SX instr/ns per core` = the traced function's instructions × configurations per ns per core "
          "(what the batch does 4 lanes at a time counts 4 times).", ""]
    for res in results:
        m = res["manifest"]
        md += [f"## {res['scenario']} ({res['algorithm']}, {m['op_count']['instructions']:,} instructions, "
               f"batch: {m['batch']['lanes']} lanes, {m['batch']['isa']}, sin/cos {m['batch']['sincos']}; "
               f"single call's sin/cos: {m['sincos']['route']}; C batch n = {res['n_c']}, Python N = {res['n_py']})", "",
               "| " + " | ".join(HEADERS) + " |", "|" + " --- |" * len(HEADERS)]
        md += ["| " + " | ".join("" if v is None else str(v) for v in r) + " |" for r in rows(res, peaks)]
        md += [""] + [f"- {n}" for n in (*res["notes"], where_the_time_goes(res, peaks))] + [""]
    return "\n".join(md)


def as_json(results, peaks):
    return {"peaks": peaks, "results": [{"scenario": r["scenario"], "algorithm": r["algorithm"], "notes": r["notes"],
                                         "python_ns": r["python"], "ns": {k: t.ns for k, t in r["timings"].items()}}
                                        for r in results]}
