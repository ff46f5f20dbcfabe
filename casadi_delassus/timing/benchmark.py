"""Every requested algorithm and Pinocchio's counterpart on one scenario, repetitions
interleaved round by round so that a change of machine load hits all alike."""
from __future__ import annotations

import time
from pathlib import Path

from .. import api
from ..codegen.build import DEFAULT_CFLAGS
from ..errors import DelassusError
from ..model import load_robot
from ..registry import delassus_algorithms, get_algorithm
from .c_harness import SOFT_COMPLIANCE, CHarness, random_samples
from .pinocchio_harnesses import PIN_FUNCTIONS, pinocchio_harness, pinocchio_label, pinocchio_mode
from .stats import DEFAULT_CALLS, DEFAULT_REPS, DEFAULT_SAMPLES

def benchmark(robot, constraints=None, algorithms=None, calls=DEFAULT_CALLS, reps=DEFAULT_REPS,
              samples=DEFAULT_SAMPLES, seed=0, cflags=DEFAULT_CFLAGS, cc=None, out_dir=api.DEFAULT_OUT,
              force=False, pinocchio="auto", progress=None, name=None):
    """Generate (cached; ``name`` as for api.generate) each algorithm and time it in C, and Pinocchio's counterpart of each
    (``pinocchio_mode``: computeDelassusMatrix, constraintDynamics, aba) on the same
    ``samples`` random inputs; repetitions are interleaved (round r times every contender
    once).  ``pinocchio``: 'auto', 'cpp', 'python' or 'none'.  Returns a dict (robot,
    scenario, timings: {label: Timing}, manifests, pin_labels: {label: Pinocchio label},
    notes)."""
    say = progress or (lambda s: None)
    robot = load_robot(robot)
    if constraints is None:
        constraints = api.default_constraints(robot)
    cs, scenario = api.constraint_set(robot, constraints)
    where = f"{robot.name}/{scenario}"
    algorithms = list(algorithms or delassus_algorithms())
    dynamics = any("vdot" in get_algorithm(a).outputs for a in algorithms if a != "auto")
    sets = random_samples(robot, cs, samples, seed, dynamics=dynamics)
    harnesses, manifests, notes, pin_labels = {}, {}, [], {}
    for a in algorithms:
        say(f"[{where}] {a}: generating and compiling (cached when unchanged) ...")
        t0 = time.perf_counter()
        try:
            f = api.generate(robot, constraints, a, out_dir=out_dir, cflags=cflags, cc=cc, force=force, name=name)
        except Exception as exc:   # another algorithm may still be measured
            notes.append(f"{a}: not measured, generation failed: {exc}")
            say(f"[{where}] {a}: FAILED: {exc}")
            continue
        m = f.manifest
        label = f"auto→{m['auto']['chosen']}" if a == "auto" and "auto" in m else a
        manifests[label] = m
        say(f"[{where}] {label}: {m['op_count']['instructions']:,} instructions, {' '.join(m['cflags'])}, "
            f"ready in {time.perf_counter() - t0:.1f} s")
        harnesses[label] = CHarness(f, sets, calls=calls, cc=cc, seed=seed, label=label)
        if pinocchio_mode(m):
            pin_labels[label] = pinocchio_label(pinocchio_mode(m))
    pin_method = None
    for mode in dict.fromkeys(pinocchio_mode(m) for m in manifests.values()) if pinocchio != "none" else ():
        if mode is None:
            continue
        try:
            h = pinocchio_harness(robot, cs, sets, calls, pinocchio, build_dir=Path(out_dir) / "_timing",
                                  progress=say, mode=mode)
            harnesses[h.label] = h
        except DelassusError as exc:
            notes.append(f"Pinocchio {PIN_FUNCTIONS[mode]} not measured: {exc}")
            say(f"[{where}] Pinocchio {PIN_FUNCTIONS[mode]} not measured: {exc}")
    timings = {label: None for label in harnesses}
    try:
        for r in range(reps):
            for label, h in harnesses.items():
                t = h.run(1)
                timings[label] = t if timings[label] is None else timings[label].extend(t)
            say(f"[{where}] repetition {r + 1}/{reps} ({calls:,} calls each): " +
                ", ".join(f"{k} {t.ns[-1] / 1e3:.2f} µs" for k, t in timings.items()))
    finally:
        for h in harnesses.values():
            h.close()
    for label, t in timings.items():
        if label.startswith("pinocchio"):
            pin_method = t.method
            if t.overhead_ns is not None:
                notes.append(f"{label} timed from Python; binding overhead {t.overhead_ns:.0f} ns "
                             "per call (one-joint model) subtracted")
    if dynamics:
        notes.append("dynamics: random v, τ; k = Pinocchio's zero contact acceleration (pinocchio_k); "
                     f"soft solvers with compliance R = {SOFT_COMPLIANCE:g}; constraintDynamics with mu = 0")
    return {"robot": robot.name, "scenario": scenario, "specs": cs.specs, "nv": robot.nv, "m": cs.m,
            "calls": calls, "reps": reps, "samples": samples, "timings": timings, "manifests": manifests,
            "pin_labels": {k: v for k, v in pin_labels.items() if v in timings},
            "pinocchio_method": pin_method, "notes": notes}
