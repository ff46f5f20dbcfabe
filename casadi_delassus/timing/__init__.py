"""Runtime of generated C, measured in C, against Pinocchio on the same inputs.

- ``time_c``: renders ``timing/templates/timing.c.j2`` for one generated function, compiles
  it (it dlopen()s the separately compiled ``<algo>.so``, so nothing is inlined into the
  loop), writes N prepared input sets to a binary file and returns per-call nanoseconds of
  R repetitions, each of ``calls`` calls cycling over the inputs (CLOCK_MONOTONIC).
- ``time_pinocchio``: ``pinocchio::computeDelassusMatrix`` (or ``constraintDynamics`` / ``aba``
  for the dynamics functions, PIN_FUNCTIONS) for the same robot, constraints and
  configurations, in C++ built against the ``pin`` wheel's headers and libraries
  (``timing/templates/pinocchio_timing.cpp.j2``; needs ``cmeel-eigen`` and
  ``cmeel-urdfdom-headers``, the ``bench`` extra), or, when that cannot be built, from
  Python with the binding overhead measured on a one-joint model and reported.
- ``benchmark``: every requested algorithm and Pinocchio on one scenario, repetitions
  interleaved round by round so that a change of machine load hits all alike;
  ``result_rows`` / ``write_results`` make the terminal, Markdown, CSV and PNG outputs.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import numpy as np

from .. import __version__, api, report
from ..verify import pinocchio_oracle as oracle
from ..codegen.build import DEFAULT_CFLAGS, find_compiler
from ..errors import CompilerError, DelassusError
from ..model import load_robot

_ENV = jinja2.Environment(loader=jinja2.PackageLoader("casadi_delassus", "timing/templates"),
                          keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
DEFAULT_CALLS = 10_000
DEFAULT_REPS = 5
DEFAULT_SAMPLES = 64
HARNESS_CFLAGS = ("-O2",)
# The pin wheel's Eigen/Boost settings (its pinocchioTargets.cmake); never -march=native:
# a different Eigen alignment than the wheel's libraries crashes.
# The defines are read from the wheel's pinocchioTargets.cmake when it is there (these are
# Pinocchio 4.1's, the fallback).
PIN_CXXFLAGS = ("-std=c++17", "-O3", "-DNDEBUG")
PIN_DEFINES = ("BOOST_MPL_LIMIT_LIST_SIZE=30", "BOOST_MPL_LIMIT_VECTOR_SIZE=30", "BOOST_MPL_CFG_NO_PREPROCESSED_HEADERS",
               "BOOST_FUSION_INVOKE_MAX_ARITY=12", "PINOCCHIO_ENABLE_TEMPLATE_INSTANTIATION", "PINOCCHIO_WITH_URDFDOM",
               "PINOCCHIO_URDFDOM_HEADERS_MAJOR_VERSION=3", "PINOCCHIO_URDFDOM_HEADERS_MINOR_VERSION=0",
               "PINOCCHIO_URDFDOM_HEADERS_PATCH_VERSION=0")
PIN_LIBS = ("-lpinocchio_parsers", "-lpinocchio_default", "-lurdfdom_model", "-lboost_filesystem",
            "-lboost_serialization")
PIN_CPP = "C++ (built against the pin wheel)"
PIN_PYTHON = "Python (binding overhead subtracted)"
# what Pinocchio computes for a generated function (``pinocchio_mode``): harness mode -> function
PIN_FUNCTIONS = {"delassus": "computeDelassusMatrix", "dynamics": "constraintDynamics", "aba": "aba"}
# compliance given to the soft solvers when they are timed beside the hard problem, so that
# their answer is comparable with constraintDynamics' (PV paper Fig. 3: accurate up to ~1e8)
SOFT_COMPLIANCE = 1e-8


@dataclass
class Timing:
    """Per-call nanoseconds of each repetition of ``calls`` calls over ``samples`` inputs."""
    label: str
    method: str
    ns: list = field(default_factory=list)
    calls: int = 0
    samples: int = 0
    output: np.ndarray | None = None    # first output for input sample 0 (flattened, column-major)
    overhead_ns: float | None = None    # subtracted binding overhead (Python timing only)

    @property
    def median(self):
        return statistics.median(self.ns)

    @property
    def min(self):
        return min(self.ns)

    @property
    def max(self):
        return max(self.ns)

    @property
    def iqr(self):
        q1, _, q3 = np.percentile(self.ns, [25, 50, 75])
        return float(q1), float(q3)

    def extend(self, other):
        self.ns += other.ns
        self.calls, self.samples = other.calls, other.samples
        if self.output is None:
            self.output = other.output
        if other.overhead_ns is not None:
            self.overhead_ns = other.overhead_ns
        return self


# -- inputs -------------------------------------------------------------------------------
def random_samples(robot, constraints, samples=DEFAULT_SAMPLES, seed=0, dynamics=False):
    """``samples`` input sets {name: array}: a random valid q and, for runtime-input
    constraints, a random K (the values `check` uses).  ``dynamics`` adds random v and τ, the
    k that poses Pinocchio's problem (``pinocchio_k``) and R = SOFT_COMPLIANCE.  Other vector
    inputs are added per function by ``pack_inputs``."""
    rng = np.random.default_rng(seed)
    sets = [{"q": robot.random_q(rng), **constraints.random_inputs(rng)} for _ in range(samples)]
    if dynamics:
        for x in sets:
            x["v"], x["tau"] = rng.normal(size=robot.nv), rng.normal(size=robot.nv)
            x["R"] = np.full(constraints.m, SOFT_COMPLIANCE)
        for x, k in zip(sets, pinocchio_k(robot, constraints, [(x["q"], x["v"]) for x in sets])):
            x["k"] = k
    return sets


def pinocchio_k(robot, constraints, states):
    """For each (q, v) of ``states``, the desired constraint accelerations k that make our hard
    dynamics problem Pinocchio's constraintDynamics one (pinocchio_oracle.zero_acceleration_k),
    on one Pinocchio model.  Zeros where Pinocchio has no such constraint or is not installed."""
    zeros = [np.zeros(constraints.m) for _ in states]
    if pinocchio_problem(robot, constraints):
        return zeros
    try:
        import pinocchio  # noqa: F401
    except ImportError:
        return zeros
    model = _pin_model(robot)
    data, cms = model.createData(), oracle.frame_constraint_models(model, constraints.specs)
    return [oracle.zero_acceleration_k(model, data, cms, q, v) for q, v in states]


def _pin_model(robot):
    """Pinocchio's parse of the robot's URDF, checked against our q layout's size."""
    model = oracle.model_for(robot)
    if model.nq != robot.nq:
        raise DelassusError(f"Pinocchio's model has nq = {model.nq}, ours {robot.nq}")
    return model


def pinocchio_mode(manifest):
    """The PIN_FUNCTIONS key Pinocchio times against this generated function, or None."""
    outs = {o["name"] for o in manifest["outputs"]}
    ins = {i["name"] for i in manifest["inputs"]}
    if "delassus" in outs:
        return "delassus"
    if "vdot" in outs:
        return "dynamics" if "k" in ins else "aba"
    return None


def pinocchio_label(mode):
    return "pinocchio" if mode == "delassus" else f"pinocchio {PIN_FUNCTIONS[mode]}"


def _states(robot, xs):
    """q, v, τ per sample from input sets (dicts) or bare configurations (v = τ = 0)."""
    out = []
    for x in xs:
        x = x if isinstance(x, dict) else {"q": x}
        out.append([np.asarray(x.get(n, np.zeros(size)), dtype=np.float64).reshape(-1)
                    for n, size in (("q", robot.nq), ("v", robot.nv), ("tau", robot.nv))])
    return out


def pack_inputs(manifest, sets, seed=0):
    """One float64 array: each set's inputs in manifest order, column-major.  Inputs a set
    lacks (vector inputs v, tau, k, R, lam) are drawn from a seeded generator."""
    rng = np.random.default_rng(seed + 1)
    rows = []
    for x in sets:
        for spec in manifest["inputs"]:
            shape = tuple(spec["shape"])
            if spec["name"] in x:
                a = np.asarray(x[spec["name"]], dtype=float).reshape(shape)
            elif spec["name"] == "R":
                a = rng.uniform(0.1, 1.0, shape)
            else:
                a = rng.normal(size=shape)
            rows.append(a.reshape(-1, order="F"))
    return np.concatenate(rows).astype(np.float64)


def _manifest(f):
    if isinstance(f, (str, Path)):
        p = Path(f)
        p = p.with_suffix(".json") if p.suffix in (".so", ".c", ".h") else p
        return json.loads(p.read_text()), p
    return f.manifest, Path(f.manifest_path)


def _robot_and_constraints(f, manifest):
    robot, cs = getattr(f, "robot", None), getattr(f, "constraints", None)
    if robot is None:
        try:
            robot = load_robot(manifest["robot"])
        except DelassusError:
            robot = load_robot(manifest["source"])
        cs, _ = api.constraint_set(robot, [c["spec"] for c in manifest["constraints"]])
    return robot, cs


def _run(cmd, what, timeout=None):
    try:
        proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DelassusError(f"{what}: {exc}") from None
    if proc.returncode != 0:
        raise DelassusError(f"{what} failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    return proc.stdout


def _parse(stdout):
    ns = [float(l.split()[1]) for l in stdout.splitlines() if l.startswith("ns ")]
    out = next((np.array([float(v) for v in l.split()[1:]]) for l in stdout.splitlines() if l.startswith("out")), None)
    if not ns or any(not np.isfinite(t) or t <= 0 for t in ns):
        raise DelassusError(f"timing harness printed no valid timings: {stdout[:300]!r}")
    return ns, out


def _default_warmup(calls, samples):
    return max(min(calls, 2000), samples)


# -- generated C --------------------------------------------------------------------------
def render_c_harness(manifest):
    """The C source of the timing program for one manifest."""
    offset, inputs = 0, []
    for spec in manifest["inputs"]:
        size = int(np.prod(spec["shape"]))
        inputs.append(dict(spec, size=size, offset=offset))
        offset += size
    outputs = [dict(o, size=int(np.prod(o["shape"]))) for o in manifest["outputs"]]
    return _ENV.get_template("timing.c.j2").render(
        dict(manifest, inputs=inputs, outputs=outputs, sample_size=offset, version=__version__))


class CHarness:
    """The compiled timing program of one generated function and its input file; call
    ``run(reps)`` as often as wanted (each run is one process: warm-up, then ``reps``)."""

    def __init__(self, f, sets=None, samples=DEFAULT_SAMPLES, seed=0, calls=DEFAULT_CALLS, warmup=None,
                 cc=None, work_dir=None, label=None):
        self.manifest, manifest_path = _manifest(f)
        self.so_path = manifest_path.with_suffix(".so").resolve()
        if not self.so_path.is_file():
            raise DelassusError(f"compiled library missing: {self.so_path}")
        if sets is None:
            robot, cs = _robot_and_constraints(f, self.manifest)
            sets = random_samples(robot, cs, samples, seed)
        self.samples, self.calls = len(sets), int(calls)
        self.warmup = _default_warmup(self.calls, self.samples) if warmup is None else int(warmup)
        self.label = label or self.manifest["algorithm"]
        self._tmp = None
        if work_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="cd-timing-")
            work_dir = self._tmp.name
        self.dir = Path(work_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        stem = self.manifest["function"]
        self.data = self.dir / f"{stem}.inputs.bin"
        pack_inputs(self.manifest, sets, seed).tofile(self.data)
        src, self.exe = self.dir / f"{stem}.timing.c", self.dir / f"{stem}.timing"
        src.write_text(render_c_harness(self.manifest))
        cc = find_compiler(cc)
        cmd = [cc, *HARNESS_CFLAGS, "-o", self.exe, src, "-ldl"]
        try:
            proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
        except OSError as exc:
            raise CompilerError(f"cannot run C compiler {cc}: {exc}") from None
        if proc.returncode != 0:
            raise CompilerError(f"compiling the timing harness failed: {proc.stderr.strip()[:400]}")

    def run(self, reps=DEFAULT_REPS):
        out = _run([self.exe, self.so_path, self.data, self.samples, self.calls, reps, self.warmup],
                   f"timing {self.manifest['function']}")
        ns, first = _parse(out)
        return Timing(self.label, f"C (dlopen {self.so_path.name})", ns, self.calls, self.samples, first)

    def close(self):
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def time_c(f, sets=None, samples=DEFAULT_SAMPLES, calls=DEFAULT_CALLS, reps=DEFAULT_REPS, warmup=None, seed=0,
           cc=None, work_dir=None):
    """Time a generated function (a CompiledFunction, or the path of its manifest/.so) in C.
    ``sets``: input sets [{name: array}] (default: ``samples`` random ones).  Returns a
    Timing with one per-call ns value per repetition."""
    h = CHarness(f, sets, samples, seed, calls, warmup, cc, work_dir)
    try:
        return h.run(reps)
    finally:
        h.close()


# -- Pinocchio ----------------------------------------------------------------------------
def pin_prefix():
    """The pin wheel's cmeel.prefix folder (headers, libraries), or None."""
    try:
        p = Path(importlib.metadata.distribution("pin").locate_file("cmeel.prefix"))
    except importlib.metadata.PackageNotFoundError:
        return None
    return p if p.is_dir() else None


def pin_version():
    try:
        return importlib.metadata.version("pin")
    except importlib.metadata.PackageNotFoundError:
        return None


def pin_defines(prefix):
    """Compile definitions of the wheel's pinocchio_headers and pinocchio_parsers targets
    (without the collision ones: the harness uses no collision code)."""
    targets = Path(prefix) / "lib" / "cmake" / "pinocchio" / "pinocchioTargets.cmake"
    try:
        text = targets.read_text()
    except OSError:
        return PIN_DEFINES
    found = []
    for block in re.findall(r"set_target_properties\(pinocchio::(pinocchio_headers|pinocchio_parsers|pinocchio_default)"
                            r" PROPERTIES(.*?)\n\)", text, re.S):
        m = re.search(r'INTERFACE_COMPILE_DEFINITIONS "([^"]*)"', block[1])
        for d in (m[1].split(";") if m else []):
            if d and "$" not in d and "COLLISION" not in d and "HPP_FCL" not in d and d not in found:
                found.append(d)
    return tuple(found) or PIN_DEFINES


def pinocchio_cpp_problem():
    """None if the C++ Pinocchio harness can be built here, else why not."""
    prefix = pin_prefix()
    if prefix is None:
        return "the pin wheel is not installed (pip install pin)"
    missing = [name for name, rel in (("pinocchio", "include/pinocchio/algorithm/delassus.hpp"),
                                      ("cmeel-eigen", "include/eigen3/Eigen/Core"),
                                      ("cmeel-urdfdom-headers", "include/urdfdom_headers/urdf_model/model.h"))
               if not (prefix / rel).is_file()]
    if missing:
        return (f"headers of {', '.join(missing)} missing under {prefix}: "
                f"pip install cmeel-eigen cmeel-urdfdom-headers (the 'bench' extra)")
    if not (shutil.which(os.environ.get("CXX", "g++")) or shutil.which("c++")):
        return "no C++ compiler (g++)"
    return None


def build_pinocchio_harness(build_dir=None, progress=None, only_cached=False):
    """Compile (once; cached by a hash of source, flags and pin version) the C++ Pinocchio
    timing program; returns its path.  Takes about a minute the first time.
    ``only_cached``: return None rather than build."""
    problem = pinocchio_cpp_problem()
    if problem:
        raise CompilerError(f"cannot build the C++ Pinocchio harness: {problem}")
    prefix = pin_prefix()
    cxx = shutil.which(os.environ.get("CXX", "g++")) or shutil.which("c++")
    src = _ENV.get_template("pinocchio_timing.cpp.j2").render(version=__version__, pin_version=pin_version())
    flags = [*PIN_CXXFLAGS, *(f"-D{d}" for d in pin_defines(prefix))]
    key = hashlib.sha256(json.dumps([src, flags, PIN_LIBS, str(prefix), pin_version(), cxx]).encode()).hexdigest()[:12]
    build_dir = Path(build_dir or api.DEFAULT_OUT / "_timing")
    exe = build_dir / f"pinocchio_timing-{key}"
    if exe.is_file() or only_cached:
        return exe if exe.is_file() else None
    build_dir.mkdir(parents=True, exist_ok=True)
    if progress:
        progress(f"building the C++ Pinocchio harness against {prefix} (about a minute, once) ...")
    tmp = Path(tempfile.mkdtemp(prefix=".pinocchio-", dir=build_dir))
    try:
        (tmp / "pinocchio_timing.cpp").write_text(src)
        lib = prefix / "lib"
        cmd = [cxx, *flags, f"-I{prefix / 'include'}", f"-I{prefix / 'include' / 'eigen3'}",
               f"-I{prefix / 'include' / 'urdfdom_headers'}", f"-I{prefix / 'include' / 'urdfdom'}",
               "-o", tmp / "exe", tmp / "pinocchio_timing.cpp", f"-L{lib}", f"-Wl,-rpath,{lib}", *PIN_LIBS]
        t0 = time.perf_counter()
        proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
        if proc.returncode != 0:
            errs = [l for l in proc.stderr.splitlines() if "error" in l]
            raise CompilerError("building the C++ Pinocchio harness failed: " +
                                (errs[0] if errs else proc.stderr.strip()[-400:]))
        (tmp / "pinocchio_timing.cpp").replace(build_dir / f"pinocchio_timing-{key}.cpp")
        os.replace(tmp / "exe", exe)
        if progress:
            progress(f"  built {exe} in {time.perf_counter() - t0:.0f} s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return exe


def pinocchio_problem(robot, constraints, mode="delassus"):
    """None if Pinocchio computes the same quantity (PIN_FUNCTIONS[mode]) for this robot and
    these constraints (a URDF robot with 6d/3d constraints), else why not."""
    src = getattr(robot, "source", None)
    if not src or not str(src).endswith(".urdf") or not Path(src).is_file():
        return f"robot {robot.name!r} is not a URDF file Pinocchio can load"
    if mode == "aba":
        return None
    bad = [c.spec for c in constraints.constraints if oracle.frame_spec(c.spec) is None]
    if bad:
        return f"Pinocchio has no equivalent of {', '.join(bad)} (only LINK:6d and LINK:3d[@x,y,z])"
    return None


class PinocchioCppHarness:
    """``xs``: input sets (dicts with q, v, tau) or configurations."""

    def __init__(self, robot, constraints, xs, calls=DEFAULT_CALLS, warmup=None, build_dir=None, progress=None,
                 mode="delassus"):
        problem = pinocchio_problem(robot, constraints, mode)
        if problem:
            raise DelassusError(problem)
        self.exe = build_pinocchio_harness(build_dir, progress)
        self.robot, self.samples, self.calls, self.mode = robot, len(xs), int(calls), mode
        self.label = pinocchio_label(mode)
        self.warmup = _default_warmup(self.calls, self.samples) if warmup is None else int(warmup)
        self._tmp = tempfile.TemporaryDirectory(prefix="cd-pin-timing-")
        d = Path(self._tmp.name)
        self.specs, self.qfile = d / "constraints.txt", d / "q.bin"
        self.specs.write_text("".join(f"{k} {link} {p[0]!r} {p[1]!r} {p[2]!r}\n"
                                      for k, link, p in map(oracle.frame_spec, constraints.specs)))
        np.concatenate([a for st in _states(robot, xs) for a in st]).tofile(self.qfile)

    def run(self, reps=DEFAULT_REPS):
        out = _run([self.exe, self.mode, self.robot.source, int(self.robot.floating_base), self.specs, self.qfile,
                    self.samples, self.calls, reps, self.warmup], "Pinocchio C++ timing")
        info = next((l.split()[1:] for l in out.splitlines() if l.startswith("info")), None)
        if info and int(info[0]) != self.robot.nq:
            raise DelassusError(f"Pinocchio's model has nq = {info[0]}, ours {self.robot.nq}")
        ns, first = _parse(out)
        return Timing(self.label, PIN_CPP, ns, self.calls, self.samples, first)

    def close(self):
        self._tmp.cleanup()


class PinocchioPythonHarness:
    """``pin.computeDelassusMatrix`` (``constraintDynamics``, ``aba``) timed from Python; the
    binding's own cost is measured on a one-joint model with one 3D constraint and
    subtracted (``overhead_ns``)."""

    def __init__(self, robot, constraints, xs, calls=DEFAULT_CALLS, warmup=None, mode="delassus"):
        problem = pinocchio_problem(robot, constraints, mode)
        if problem:
            raise DelassusError(problem)
        import pinocchio as pin
        self.pin, self.mode = pin, mode
        self.model = _pin_model(robot)
        self.data = self.model.createData()
        self.cm, self.cd = self._constraints(self.model, constraints.specs if mode != "aba" else [])
        self.xs = _states(robot, xs)
        self.calls, self.label = int(calls), pinocchio_label(mode)
        self.warmup = _default_warmup(self.calls, len(xs)) if warmup is None else int(warmup)
        tiny = pin.Model()
        j = tiny.addJoint(0, pin.JointModelRZ(), pin.SE3.Identity(), "j")
        tiny.appendBodyToJoint(j, pin.Inertia.FromSphere(1.0, 0.1), pin.SE3.Identity())
        tiny.addFrame(pin.Frame("tip", j, 0, pin.SE3(np.eye(3), np.array([0.1, 0, 0])), pin.FrameType.OP_FRAME))
        self._tiny = (tiny, tiny.createData(), *self._constraints(tiny, ["tip:3d"]),
                      [[np.zeros(1)] * 3])

    def _constraints(self, model, specs):
        models = oracle.frame_constraint_models(model, specs)
        datas = self.pin.StdVec_RigidConstraintData()
        for c in models:
            datas.append(c.createData())
        return models, datas

    def _call(self, model, data, cm, cd, x):
        pin = self.pin
        if self.mode == "delassus":
            return pin.computeDelassusMatrix(model, data, x[0], cm, cd)
        if self.mode == "dynamics":
            return pin.constraintDynamics(model, data, *x, cm, cd)
        return pin.aba(model, data, *x, pin.Convention.WORLD)

    def _loop(self, model, data, cm, cd, xs, calls):
        n = len(xs)
        t0 = time.perf_counter_ns()
        for c in range(calls):
            self._call(model, data, cm, cd, xs[c % n])
        return (time.perf_counter_ns() - t0) / calls

    def run(self, reps=DEFAULT_REPS):
        if self.mode == "dynamics":     # constraintDynamics needs its data initialised
            self.pin.initConstraintDynamics(self.model, self.data, self.cm, self.cd)
            self.pin.initConstraintDynamics(*self._tiny[:4])
        self._loop(self.model, self.data, self.cm, self.cd, self.xs, self.warmup)
        overhead = statistics.median(self._loop(*self._tiny, self.calls) for _ in range(3))
        ns = [max(self._loop(self.model, self.data, self.cm, self.cd, self.xs, self.calls) - overhead, 1e-3)
              for _ in range(reps)]
        first = np.array(self._call(self.model, self.data, self.cm, self.cd, self.xs[0]))
        return Timing(self.label, PIN_PYTHON, ns, self.calls, len(self.xs), first.reshape(-1, order="F"), overhead)

    def close(self):
        pass


def pinocchio_harness(robot, constraints, xs, calls=DEFAULT_CALLS, method="auto", build_dir=None, progress=None,
                      mode="delassus"):
    """A Pinocchio harness for PIN_FUNCTIONS[mode] on input sets or configurations ``xs``:
    ``method`` 'cpp', 'python' or 'auto' (C++ when it builds, else Python).  Raises
    DelassusError when Pinocchio cannot compute this case."""
    problem = pinocchio_problem(robot, constraints, mode)
    if problem:
        raise DelassusError(problem)
    if method in ("auto", "cpp"):
        try:
            return PinocchioCppHarness(robot, constraints, xs, calls, build_dir=build_dir, progress=progress,
                                       mode=mode)
        except CompilerError as exc:
            if method == "cpp":
                raise
            if progress:
                progress(f"C++ Pinocchio timing unavailable ({exc}); timing from Python instead")
    try:
        import pinocchio  # noqa: F401
    except ImportError:
        raise DelassusError("Pinocchio is not installed (pip install pin)") from None
    return PinocchioPythonHarness(robot, constraints, xs, calls, mode=mode)


def time_pinocchio(robot, constraints, xs, calls=DEFAULT_CALLS, reps=DEFAULT_REPS, method="auto", build_dir=None,
                   progress=None, mode="delassus"):
    """Time ``pinocchio::computeDelassusMatrix`` (PIN_FUNCTIONS[mode]) on input sets or
    configurations ``xs``; see ``pinocchio_harness`` for ``method``.  The Timing's
    ``method`` says which was used."""
    h = pinocchio_harness(robot, constraints, xs, calls, method, build_dir, progress, mode)
    try:
        return h.run(reps)
    finally:
        h.close()


# -- the benchmark ------------------------------------------------------------------------
def relative_error(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.shape != b.shape:
        return float("nan")
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


def benchmark(robot, constraints=None, algorithms=None, calls=DEFAULT_CALLS, reps=DEFAULT_REPS,
              samples=DEFAULT_SAMPLES, seed=0, cflags=DEFAULT_CFLAGS, cc=None, out_dir=api.DEFAULT_OUT,
              force=False, pinocchio="auto", progress=None):
    """Generate (cached) each algorithm and time it in C, and Pinocchio's counterpart of each
    (``pinocchio_mode``: computeDelassusMatrix, constraintDynamics, aba) on the same
    ``samples`` random inputs; repetitions are interleaved (round r times every contender
    once).  ``pinocchio``: 'auto', 'cpp', 'python' or 'none'.  Returns a dict (robot,
    scenario, timings: {label: Timing}, manifests, pin_labels: {label: Pinocchio label},
    notes)."""
    from ..registry import delassus_algorithms
    say = progress or (lambda s: None)
    robot = load_robot(robot)
    if constraints is None:
        constraints = api.default_constraints(robot)
    cs, scenario = api.constraint_set(robot, constraints)
    name = f"{robot.name}/{scenario}"
    algorithms = list(algorithms or delassus_algorithms())
    from ..registry import get_algorithm
    dynamics = any("vdot" in get_algorithm(a).outputs for a in algorithms if a != "auto")
    sets = random_samples(robot, cs, samples, seed, dynamics=dynamics)
    harnesses, manifests, notes, pin_labels = {}, {}, [], {}
    for a in algorithms:
        say(f"[{name}] {a}: generating and compiling (cached when unchanged) ...")
        t0 = time.perf_counter()
        try:
            f = api.generate(robot, constraints, a, out_dir=out_dir, cflags=cflags, cc=cc, force=force)
        except Exception as exc:   # another algorithm may still be measured
            notes.append(f"{a}: not measured, generation failed: {exc}")
            say(f"[{name}] {a}: FAILED: {exc}")
            continue
        m = f.manifest
        label = f"auto→{m['auto']['chosen']}" if a == "auto" and "auto" in m else a
        manifests[label] = m
        say(f"[{name}] {label}: {m['op_count']['instructions']:,} instructions, {' '.join(m['cflags'])}, "
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
            say(f"[{name}] Pinocchio {PIN_FUNCTIONS[mode]} not measured: {exc}")
    timings = {label: None for label in harnesses}
    try:
        for r in range(reps):
            for label, h in harnesses.items():
                t = h.run(1)
                timings[label] = t if timings[label] is None else timings[label].extend(t)
            say(f"[{name}] repetition {r + 1}/{reps} ({calls:,} calls each): " +
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


HEADERS = ["algorithm", "instructions", "µs/call (median)", "min µs", "max µs", "Pinocchio/ours",
           "instr/ns", "cflags", "codegen s", "gcc s", ".so KB", "rel. diff vs Pinocchio"]


def result_rows(res):
    """Rows for HEADERS: each algorithm (ratio against its Pinocchio counterpart), then Pinocchio."""
    t = res["timings"]
    rows = []
    for label, m in res["manifests"].items():
        if label not in t:
            continue
        pin_t = t.get(res.get("pin_labels", {}).get(label, ""))
        x, ins, ts = t[label], m["op_count"]["instructions"], m.get("timings_s", {})
        rows.append([label, ins, round(x.median / 1e3, 3), round(x.min / 1e3, 3), round(x.max / 1e3, 3),
                     round(pin_t.median / x.median, 2) if pin_t else None,
                     round(ins / x.median, 2), " ".join(m["cflags"]),
                     round(ts.get("trace", 0) + ts.get("emit", 0), 2), round(ts.get("compile", 0), 2),
                     int(round(m.get("so_bytes", 0) / 1024)),
                     relative_error(x.output, pin_t.output) if pin_t is not None and x.output is not None
                     and pin_t.output is not None else None])
    for label, pin_t in t.items():
        if label.startswith("pinocchio"):
            kind = "C++" if pin_t.method == PIN_CPP else "Python"
            rows.append([f"{label} ({kind})", None, round(pin_t.median / 1e3, 3), round(pin_t.min / 1e3, 3),
                         round(pin_t.max / 1e3, 3), 1.0, None, "", None, None, None, None])
    return rows


def describe(res):
    """Two lines above a scenario's table."""
    pin = res["pinocchio_method"] or "not measured"
    return (f"{res['robot']} / {res['scenario']} (nv = {res['nv']}, m = {res['m']}: {', '.join(res['specs'])})\n"
            f"median of {res['reps']} repetitions x {res['calls']:,} calls over {res['samples']} random q; "
            f"Pinocchio: {pin}")


def machine():
    cpu = platform.processor() or ""
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                   if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        gcc = subprocess.run([find_compiler(None), "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except Exception:
        gcc = "?"
    return f"{cpu}, {os.cpu_count()} cores; {gcc}; Pinocchio {pin_version()}; Python {sys.version.split()[0]}"


def _slug(s):
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", s)


def write_results(results, out_dir, name="runtime", title="Runtime: generated C vs Pinocchio"):
    """``name``.md and ``name``.csv for a list of ``benchmark`` results, and one PNG bar
    chart per scenario (``name``_<robot>_<scenario>.png, if matplotlib is installed).
    Returns the written paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    md = [f"# {title}", "", f"Machine: {machine()}.", "",
          "`instr/ns` (the \"physical limit\" column) = instructions / measured ns per call: SX "
          "instructions executed per nanosecond. A core retires a few scalar floating-point "
          "operations per ns at most, so values near 4 mean the code runs close to that limit and only "
          "fewer instructions make it faster; values near 1 point at compiler flags (-O0) or memory.",
          "`codegen s` = trace + emit time, `gcc s` = compile time, both from the manifest "
          "(the time of the run that generated the cached code).", ""]
    csv_rows = []
    written = []
    for res in results:
        rows = result_rows(res)
        md += [f"## {res['robot']} / {res['scenario']}", "", *(f"{line}  " for line in describe(res).splitlines()), ""]
        md += ["| " + " | ".join(HEADERS) + " |", "|" + " --- |" * len(HEADERS)]
        md += ["| " + " | ".join("" if v is None else f"{v:,}" if isinstance(v, int) else
                                 f"{v:.2e}" if isinstance(v, float) and 0 < abs(v) < 1e-3 else
                                 f"{v:g}" if isinstance(v, float) else str(v) for v in r) + " |" for r in rows]
        md += [f"- {n}" for n in res["notes"]] + [""]
        csv_rows += [[res["robot"], res["scenario"], res["m"], *r] for r in rows]
        png = plot(res, out_dir / f"{name}_{_slug(res['robot'])}_{_slug(res['scenario'])}.png")
        if png:
            md += [f"![{res['robot']} {res['scenario']}]({png.name})", ""]
            written.append(png)
    (out_dir / f"{name}.md").write_text("\n".join(md))
    (out_dir / f"{name}.csv").write_text(report.to_csv(csv_rows, ["robot", "scenario", "m", *HEADERS]) + "\n")
    return [out_dir / f"{name}.md", out_dir / f"{name}.csv", *written]


def plot(res, path):
    """Bar chart of µs per call (median, min-max whiskers), Pinocchio last; None without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    t = res["timings"]
    labels = [k for k in res["manifests"] if k in t] + [k for k in t if k.startswith("pinocchio")]
    if not labels:
        return None
    med = [t[k].median / 1e3 for k in labels]
    lo = [m - t[k].min / 1e3 for k, m in zip(labels, med)]
    hi = [t[k].max / 1e3 - m for k, m in zip(labels, med)]
    fig, ax = plt.subplots(figsize=(1.4 * len(labels) + 2.5, 3.6))
    colors = ["tab:gray" if k.startswith("pinocchio") else "tab:blue" for k in labels]
    ax.bar([k.replace("pinocchio ", "pinocchio\n") for k in labels], med, yerr=[lo, hi], color=colors, capsize=4)
    for i, (k, m) in enumerate(zip(labels, med)):
        pin = t.get(res.get("pin_labels", {}).get(k, ""))
        text = f"{m:.2f} µs" + (f"\n×{pin.median / t[k].median:.2f}" if pin else "")
        ax.text(i, m + hi[i], text, ha="center", va="bottom", fontsize=8)
    log = max(med) / min(med) > 20
    ax.set_ylabel("µs per call (median, min–max)" + (", log scale" if log else ""))
    ax.set_title(f"{res['robot']} {res['scenario']} (nv {res['nv']}, m {res['m']}); ×: Pinocchio time / ours", fontsize=10)
    top = max(med[i] + hi[i] for i in range(len(med)))
    if log:
        ax.set_yscale("log")
        ax.set_ylim(min(med) / 2, top * 4)
    else:
        ax.set_ylim(0, top * 1.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)
