"""Pinocchio's counterpart of a generated function (``pinocchio::computeDelassusMatrix``,
``constraintDynamics``, ``aba`` or their analytical derivatives: PIN_FUNCTIONS) on the same
robot, constraints and inputs:
timed in C++ built against the ``pin`` wheel's headers and libraries
(``timing/templates/pinocchio_timing.cpp.j2``; needs ``cmeel-eigen`` and
``cmeel-urdfdom-headers``, the ``bench`` extra), or, when that cannot be built, from Python
with the binding overhead measured on a one-joint model and subtracted."""
from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from .. import api
from ..version import __version__
from ..errors import CompilerError, DelassusError
from ..verify import pinocchio_oracle as oracle
from .render import ENV
from .stats import DEFAULT_CALLS, DEFAULT_REPS, Timing, default_warmup, parse_timings, run_harness

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
PIN_FUNCTIONS = {"delassus": "computeDelassusMatrix", "dynamics": "constraintDynamics", "aba": "aba",
                 "aba_derivatives": "computeABADerivatives", "rnea_derivatives": "computeRNEADerivatives",
                 "dynamics_derivatives": "constraintDynamics + computeConstraintDynamicsDerivatives"}
# the modes that solve Pinocchio's contact problem (constraint models, k = its zero contact acceleration)
CONTACT_MODES = ("delassus", "dynamics", "dynamics_derivatives")
# the contact step's route, C++ only: aba, g, computeDelassusMatrix, its ADMM / PGS solver, v_next by aba with the
# impulses as external forces (templates/pinocchio_timing.cpp.j2)
CONTACT_SOLVERS = {"contact_admm": "aba + computeDelassusMatrix + ADMMConstraintSolver + aba(fext)",
                   "contact_pgs": "aba + computeDelassusMatrix + PGSConstraintSolver + aba(fext)"}
# ADMM's rho update rules in the harness's code order (Pinocchio's ADMMUpdateRule; OSQP its default)
ADMM_RULES = ("OSQP", "SPECTRAL", "LINEAR", "CONSTANT")


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
    """The PIN_FUNCTIONS key Pinocchio times against this generated function, or None: a
    Jacobian (outputs ``dvdot_dq``, ``dtau_dq``) against Pinocchio's analytical derivatives."""
    outs = {o["name"] for o in manifest["outputs"]}
    ins = {i["name"] for i in manifest["inputs"]}
    if "delassus" in outs:
        return "delassus"
    if "dtau_dq" in outs:
        return "rnea_derivatives"
    if "dvdot_dq" in outs:
        return "dynamics_derivatives" if "k" in ins else "aba_derivatives"
    if "vdot" in outs:
        return "dynamics" if "k" in ins else "aba"
    return None


def pinocchio_label(mode):
    return "pinocchio" if mode == "delassus" else f"pinocchio {PIN_FUNCTIONS.get(mode) or CONTACT_SOLVERS[mode]}"


def _states(robot, xs):
    """q, v, τ per sample from input sets (dicts) or bare configurations (v = τ = 0)."""
    out = []
    for x in xs:
        x = x if isinstance(x, dict) else {"q": x}
        out.append([np.asarray(x.get(n, np.zeros(size)), dtype=np.float64).reshape(-1)
                    for n, size in (("q", robot.nq), ("v", robot.nv), ("tau", robot.nv))])
    return out


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
    src = ENV.get_template("pinocchio_timing.cpp.j2").render(version=__version__, pin_version=pin_version())
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
    if mode not in CONTACT_MODES:
        return None
    bad = [c.spec for c in constraints.constraints if oracle.frame_spec(c.spec) is None]
    if bad:
        return f"Pinocchio has no equivalent of {', '.join(bad)} (only LINK:6d and LINK:3d[@x,y,z])"
    return None


def _harness_spec(spec):
    """(kind, link, offset) of a constraint for the C++ harness: frame_spec's, plus ``3d-world``
    (LOCAL_WORLD_ALIGNED there)."""
    world = ":3d-world" in spec
    kind, link, offset = oracle.frame_spec(spec.replace(":3d-world", ":3d"))
    return ("3d-world" if world else kind), link, offset


class PinocchioCppHarness:
    """``xs``: input sets (dicts with q, v, tau) or configurations.  ``contact``: for the
    CONTACT_SOLVERS modes, the problem (dt, tol, μ per contact, G, g): the route builds its own G and g
    and the check output says how far they are from these; ``admm``: (ρ update rule of ADMM_RULES, Anderson
    capacity) of contact_admm."""

    def __init__(self, robot, constraints, xs, calls=DEFAULT_CALLS, warmup=None, build_dir=None, progress=None,
                 mode="delassus", contact=None, admm=("OSQP", 0)):
        problem = pinocchio_problem(robot, constraints, mode)
        if problem:
            raise DelassusError(problem)
        if (contact is None) != (mode not in CONTACT_SOLVERS):
            raise DelassusError(f"Pinocchio C++ harness: mode {mode!r} " +
                                ("needs the contact problem" if contact is None else "takes no contact problem"))
        self.exe = build_pinocchio_harness(build_dir, progress)
        self.robot, self.samples, self.calls, self.mode = robot, len(xs), int(calls), mode
        self.label = pinocchio_label(mode)
        self.warmup = default_warmup(self.calls, self.samples) if warmup is None else int(warmup)
        self._tmp = tempfile.TemporaryDirectory(prefix="cd-pin-timing-")
        d = Path(self._tmp.name)
        self.specs, self.qfile, self.pfile = d / "constraints.txt", d / "q.bin", d / "problem.bin"
        self.specs.write_text("".join(f"{k} {link} {p[0]!r} {p[1]!r} {p[2]!r}\n"
                                      for k, link, p in map(_harness_spec, constraints.specs)))
        np.concatenate([a for st in _states(robot, xs) for a in st]).tofile(self.qfile)
        if contact is not None:
            dt, tol, mu, G, g = contact
            rule, anderson = admm
            if rule not in ADMM_RULES or int(anderson) != anderson or anderson < 0:
                raise DelassusError(f"ADMM settings: rule one of {', '.join(ADMM_RULES)} and an Anderson capacity "
                                    f">= 0, got {admm!r}")
            np.concatenate([[dt, tol], np.ravel(mu), np.ravel(G, order="F"), np.ravel(g),
                            [ADMM_RULES.index(rule), anderson]]).astype(np.float64).tofile(self.pfile)

    def run(self, reps=DEFAULT_REPS):
        extra = [self.pfile] if self.mode in CONTACT_SOLVERS else []
        out = run_harness([self.exe, self.mode, self.robot.source, int(self.robot.floating_base), self.specs, self.qfile,
                           self.samples, self.calls, reps, self.warmup, *extra], "Pinocchio C++ timing")
        info = next((l.split()[1:] for l in out.splitlines() if l.startswith("info")), None)
        if info and int(info[0]) != self.robot.nq:
            raise DelassusError(f"Pinocchio's model has nq = {info[0]}, ours {self.robot.nq}")
        ns, first = parse_timings(out)
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
        self.cm, self.cd = self._constraints(self.model, constraints.specs if mode in CONTACT_MODES else [])
        self.xs = _states(robot, xs)
        self.calls, self.label = int(calls), pinocchio_label(mode)
        self.warmup = default_warmup(self.calls, len(xs)) if warmup is None else int(warmup)
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
        if self.mode == "aba_derivatives":
            return pin.computeABADerivatives(model, data, *x)[0]
        if self.mode == "rnea_derivatives":
            return pin.computeRNEADerivatives(model, data, *x)[0]
        if self.mode == "dynamics_derivatives":
            pin.constraintDynamics(model, data, *x, cm, cd)
            return pin.computeConstraintDynamicsDerivatives(model, data, cm, cd)[0]
        return pin.aba(model, data, *x, pin.Convention.WORLD)

    def _loop(self, model, data, cm, cd, xs, calls):
        n = len(xs)
        t0 = time.perf_counter_ns()
        for c in range(calls):
            self._call(model, data, cm, cd, xs[c % n])
        return (time.perf_counter_ns() - t0) / calls

    def run(self, reps=DEFAULT_REPS):
        if self.mode in ("dynamics", "dynamics_derivatives"):     # constraintDynamics needs its data initialised
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
