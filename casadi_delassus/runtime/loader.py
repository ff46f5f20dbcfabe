"""Load compiled functions back: ctypes (default) or ``casadi.external``, driven by the JSON
manifest written beside the .so.

A manifest is data, not code.  Before anything is mapped, the manifest's own hash and the
recorded sizes and sha256 of its .c, .h and .so are checked (runtime/artifact.py), and the
library is mapped and checked by runtime/library.py (open_sealed: the one way every compiled
kind is mapped).  The function called is the one the
manifest's model, scenario and algorithm name (artifact.expected_function).

The runtime (this package) loads and calls generated code; it never imports the compile side
(codegen/), so ``f(q)``, ``f(Q)`` and ``f.outputs`` need nothing of the tracing and building.

Threads: ctypes releases the GIL during the call, so each thread gets its own input, output
and work buffers (allocated on its first call); calls from several threads run in parallel.
"""
from __future__ import annotations

import ctypes
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ArtifactError, DelassusError, DerivativeWarning, InputError
from . import artifact, batch, door
from .inputs import as_input, out_array, real_dtype
from .library import check_library, open_library, open_sealed

if TYPE_CHECKING:
    from ..constraints import ConstraintSet
    from ..model import Robot

_real_p = ctypes.POINTER(ctypes.c_double)

class _Buffers(threading.local):
    """Each thread's ``views``: (inputs, outputs, arg, res, iw, w), its input and output arrays,
    the pointer arrays into them and CasADi's work arrays.  threading.local runs __init__
    again, with the same arguments, in each new thread; one tuple because each attribute
    read of a threading.local costs a lookup in the thread's own dict."""

    def __init__(self, input_sizes, output_sizes, work, dtype=np.float64):
        inputs = [np.zeros(n, dtype) for n in input_sizes]
        outputs = [np.zeros(n, dtype) for n in output_sizes]
        self.views = (inputs, outputs,
                      (_real_p * max(work["sz_arg"], 1))(*[a.ctypes.data_as(_real_p) for a in inputs]),
                      (_real_p * max(work["sz_res"], 1))(*[a.ctypes.data_as(_real_p) for a in outputs]),
                      (ctypes.c_longlong * max(work["sz_iw"], 1))(), np.zeros(max(work["sz_w"], 1), dtype).ctypes)


class CompiledFunction:
    """``f(q, **inputs) -> numpy array`` (the first output, a new array, or ``out=`` filled);
    ``f.outputs(...)`` gives all.  ``inputs`` are named as in the manifest: vectors (v, tau,
    k, R, lam, …) and runtime K_<link>.  ``op_count`` and ``manifest`` describe the generated
    code.  Safe to call from several threads at once (per-call buffers).  ``f(q)`` itself is
    the door's (runtime/door.py), which calls the C code for inputs it reads as they are and
    hands every other call to ``_evaluate``.

    An instance is of a subclass made on the first load (``door.callable_class``): this class
    and the door's call (the C extension's Door, or door.PythonCall where it cannot be
    built), so that importing the runtime compiles nothing."""
    robot: Robot                    # what api.generate made it for (set there)
    constraints: ConstraintSet
    double_twin: Callable[[], CompiledFunction]      # single precision: its double build (api.generate)

    def __new__(cls, *args, **kwargs):
        concrete, base = door.callable_class(cls)
        return base.__new__(concrete)

    def __init__(self, manifest_path, backend="ctypes"):
        if backend not in ("ctypes", "casadi"):
            raise DelassusError(f"unknown backend {backend!r}: use 'ctypes' or 'casadi'")
        self.manifest_path = Path(manifest_path)
        self.manifest, lib, mapped = open_sealed(self.manifest_path, artifact.FILE_KINDS, "function")
        m = self.manifest
        self.so_path = self.manifest_path.with_suffix(".so")
        self.backend = backend
        try:
            self.inputs, self.output_specs = m["inputs"], m["outputs"]
            self._sizes = ([int(np.prod(i["shape"])) for i in self.inputs], [int(np.prod(o["shape"])) for o in self.output_specs])
            self.dtype = real_dtype(m)
            self._refuse_casadi_in_single(backend)
            self._fn, self._work = check_library(lib, mapped, self.so_path, m)
            self._lib, self._mapped, self._buffers = lib, mapped, _Buffers(*self._sizes, self._work, self.dtype)
            binding = door.binding(self) if backend == "ctypes" else None
            if binding:
                super().__init__(*binding)
                if batch_binding := batch.door_binding(self):
                    self._door_bind_batch(*batch_binding)
            if backend == "casadi":         # evaluated, not differentiated: no word about derivatives
                self._fn = self._external()
        except DelassusError:
            raise
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise ArtifactError(f"manifest {self.manifest_path} lacks or garbles {exc}: regenerate it") from None

    @property
    def op_count(self):
        return self.manifest["op_count"]

    @property
    def precision(self):
        """The manifest's precision record: {"type": "double"}, or for single precision also the
        measured error against double (verify/precision.py)."""
        return self.manifest.get("precision", {"type": "double"})

    def _refuse_casadi_in_single(self, backend):
        """casadi.external calls a .so with CasADi's own double values: not a float one."""
        if backend == "casadi" and self.dtype != np.float64:
            raise DelassusError(f"{self.manifest['function']} computes in single precision: casadi.external "
                                f"calls double code only (use backend='ctypes', or generate it in double)")

    @property
    def casadi_derivative_order(self):
        """How far CasADi can differentiate :meth:`casadi_function`: 0 (no derivative functions
        in the .so), 1 (fwd1_/adj1_/jac_, an older .so: gradients and Jacobians) or 2 (also
        fwd1_adj1_: exact Hessians)."""
        m = self.manifest
        return m.get("casadi_derivative_order", 1) if m.get("casadi_derivatives") else 0

    def casadi_function(self):
        """This compiled function as a ``casadi.Function`` (``casadi.external`` on a verified
        private copy of the .so), to call on CasADi symbols (MX in Opti/nlpsol).  CasADi
        differentiates it with the derivative functions the .so carries (``generate(...,
        casadi_derivatives=True)``: first and second derivatives, in the stored coordinates of
        q); a .so with fewer says so here (a DerivativeWarning), not later inside the solver."""
        self._refuse_casadi_in_single("casadi")
        m, order = self.manifest, self.casadi_derivative_order
        if order < artifact.CASADI_ORDER:
            offers = "no derivatives" if order == 0 else "first derivatives only (no exact Hessian)"
            need = ("CasADi cannot differentiate it" if order == 0 else
                    "set IPOPT's hessian_approximation='limited-memory'")
            warnings.warn(f"{m['function']}: the .so carries {offers}: {need}, or regenerate with "
                          f"generate(..., casadi_derivatives=True)", DerivativeWarning, stacklevel=2)
        return self._external()

    def _external(self):
        """casadi.external on a verified private copy of the .so."""
        import casadi as ca
        m = self.manifest
        return open_library(self.so_path, m["files"]["so"], lambda p: ca.external(m["function"], p))[0]

    @property
    def input_names(self):
        return [i["name"] for i in self.inputs]

    @property
    def door(self):
        """How a single call reaches the C code: 'door.c' (the C extension, runtime/door.py),
        'ctypes' (where it cannot be built) or 'casadi'."""
        return "casadi" if self.backend == "casadi" else "door.c" if self._door_bound else "ctypes"

    def _fill(self, first, inputs):
        """The inputs in manifest order: ``first`` (a tuple of at most one array) is the first
        input (q, or a later stage's own first input), the others come by name."""
        if first:
            inputs = {self.input_names[0]: first[0], **inputs}
        extra = set(inputs) - set(self.input_names)
        if extra:
            raise InputError(f"unexpected inputs {sorted(extra)}; this function takes {self.input_names}")
        values = []
        for spec in self.inputs:
            if spec["name"] not in inputs:
                raise InputError(f"missing input {spec['name']} ({' x '.join(map(str, spec['shape']))})")
            values.append(as_input(spec, inputs[spec["name"]], self.manifest))
        return values

    def _given_outputs(self, out, only_first):
        """{name: array} of ``out`` for a single call (one array for the first output, or a
        dict by name), each checked: a writeable float64 array of the output's shape."""
        if out is None:
            return {}
        specs = {o["name"]: o for o in self.output_specs}
        given = {self.output_specs[0]["name"]: out} if only_first else out
        if not isinstance(given, dict):
            raise InputError(f"out for outputs() is a dict {{name: array}}, got {type(out).__name__}")
        unknown = set(given) - set(specs)
        if unknown:
            raise InputError(f"out names unknown outputs {sorted(unknown)}; this function has {list(specs)}")
        return {name: out_array(name, tuple(specs[name]["shape"]), a, fortran=True, dtype=self.dtype)
                for name, a in given.items()}

    def _evaluate(self, first, inputs, threads, out, only_first):
        """Every call the door does not take: batches, inputs to convert or refuse
        (inputs.as_input), the ctypes and casadi backends."""
        if len(first) > 1:
            raise InputError(f"{len(first)} positional inputs; pass {self.input_names[0]} first and the others "
                             f"by name: {self.input_names}")
        if batch.is_batched(self, first, inputs, threads):
            res = batch.evaluate(self, first, inputs, threads, out, only_first)
            return res[self.output_specs[0]["name"]] if only_first else res
        values = self._fill(first, inputs)
        given = self._given_outputs(out, only_first)
        if self._door_bound:
            return self._door_raw(values, out if only_first else given or None, not only_first)
        if self.backend == "casadi":
            res = self._fn(*[v.reshape(i["shape"], order="F") for v, i in zip(values, self.inputs)])
            res = res if isinstance(res, (list, tuple)) else [res]
            res = {o["name"]: np.array(r, dtype=float).reshape(o["shape"], order="F")
                   for o, r in zip(self.output_specs, res)}
        else:
            ins, outs, arg, res, iw, w = self._buffers.views
            for buf, v in zip(ins, values):
                buf[:] = v
            if self._fn(arg, res, iw, w, 0) != 0:
                raise DelassusError(f"{self.manifest['function']} returned an error")
            res = {o["name"]: buf.reshape(o["shape"], order="F").copy() for o, buf in zip(self.output_specs, outs)}
        for name, a in given.items():
            a[...] = res[name]
            res[name] = a
        return res[self.output_specs[0]["name"]] if only_first else res

    def outputs(self, *first, threads=None, out=None, **inputs):
        """All outputs by name: ``f.outputs(q, **inputs)`` with the named inputs after q (vectors,
        K_…); a stage function takes its first input positionally too, or all by name.
        ``out`` {name: array} writes those outputs into the given arrays.
        A batch (q of shape N x nq) gives N x (output shape) each (runtime/batch.py: ``threads``
        default all cores, ``out`` {name: array} to reuse memory)."""
        if threads is None:
            res = self._door_call(first, inputs, out, True)
            if res is not NotImplemented:
                return res
        return self._evaluate(first, inputs, threads, out, False)

    def map_blocks(self, Q, output=None, threads=1, **inputs):
        """This function on every block of rows of a dask array of configurations (runtime/distributed.py)."""
        from .distributed import blocks
        return blocks(self, Q, output, threads, inputs, load)

    def __repr__(self):
        m = self.manifest
        return (f"<{m['algorithm']} for {m['robot']}/{m['scenario']}: m = {m['m']}, "
                f"{m['op_count']['instructions']} instructions, {self.so_path}>")


class StagedFunction:
    """The compiled stages of one function (codegen/staging.py), chained through their stored
    intermediates.  ``f.run(stage, **inputs)`` runs one stage with its own inputs, keeps what
    it stores for the next and returns its outputs (the last stage's are the function's).  So after
    ``f.run("factor", q=q)`` and ``f.run("damping", R=R)``, each ``f.run("apply", lam=a)``
    costs the last stage only.  ``f(q, **inputs)`` runs every stage."""
    robot: Robot                    # what api.generate made it for (set there)
    constraints: ConstraintSet

    def __init__(self, manifest_paths, backend="ctypes"):
        self.stages = [CompiledFunction(p, backend) for p in manifest_paths]
        if not self.stages or any("stage" not in f.manifest for f in self.stages):
            raise DelassusError(f"not the manifests of a staged function: {[str(p) for p in manifest_paths]}")
        self.names = [f.manifest["stage"]["name"] for f in self.stages]
        self.manifest = self.stages[-1].manifest
        self._work = {}
        # per stage: (function, its stored input, what it stores, what running it makes stale, the stage before)
        self._plan = {}
        for k, (name, f) in enumerate(zip(self.names, self.stages)):
            spec = f.manifest["stage"]
            stale = [s.manifest["stage"]["work_out"] for s in self.stages[k:] if s.manifest["stage"]["work_out"]]
            self._plan[name] = (f, spec["work_in"], spec["work_out"], stale, self.names[k - 1] if k else None)

    @property
    def op_count(self):
        return {n: f.op_count for n, f in zip(self.names, self.stages)}

    def run(self, stage, **inputs):
        """One stage's outputs {name: array} (a solver's inner loop: each stage's door takes
        the call, see CompiledFunction)."""
        plan = self._plan.get(stage)
        if plan is None:
            raise DelassusError(f"unknown stage {stage!r}; this function has stages {self.names}")
        f, work_in, work_out, stale, before = plan
        if work_in:
            stored = self._work.get(work_in)
            if stored is None:
                raise DelassusError(f"run stage {before!r} before {stage!r}")
            inputs[work_in] = stored
        out = f._door_call((), inputs, None, True)              # the door, else the Python path
        if out is NotImplemented:
            out = f.outputs(**inputs)
        for name in stale:                      # what later stages stored is stale now
            self._work.pop(name, None)
        if work_out:
            self._work[work_out] = out[work_out]
        return out

    def outputs(self, q, **inputs):
        inputs = {"q": q, **inputs}
        extra = set(inputs) - {n for f in self.stages for n in f.manifest["stage"]["inputs"]}
        if extra:
            raise InputError(f"unexpected inputs {sorted(extra)}; the stages take "
                             f"{[n for f in self.stages for n in f.manifest['stage']['inputs']]}")
        for name, f in zip(self.names, self.stages):
            out = self.run(name, **{n: inputs[n] for n in f.manifest["stage"]["inputs"] if n in inputs})
        return out

    def __call__(self, q, **inputs):
        return next(iter(self.outputs(q, **inputs).values()))


def load(path, backend="ctypes"):
    """Load code generated earlier: ``folder/algorithm`` (the stem, as ``generate`` prints it),
    its manifest (.json), .so, .c or .h, or a folder that holds one generated function."""
    p = Path(path)
    if p.suffix in (".so", ".c", ".h"):
        p = p.with_suffix(".json")
    elif p.suffix != ".json" and not p.is_dir():
        p = p.with_name(p.name + ".json")       # folder/algorithm (a stem has no dot)
    if p.is_dir():
        found = sorted(p.glob("*.json"))
        if len(found) != 1:
            raise DelassusError(f"{p} holds {len(found)} generated functions; name one of "
                                f"{[str(p / f.stem) for f in found]}")
        p = found[0]
    if not p.is_file():
        there = sorted(f.stem for f in p.parent.glob("*.json")) if p.parent.is_dir() else []
        raise DelassusError(f"no generated function at {path} (give folder/algorithm, or its .json, .so, .c or .h)"
                            + (f"; {p.parent} holds {', '.join(there)}" if there else ""))
    return CompiledFunction(p, backend)
