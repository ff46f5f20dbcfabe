"""Load compiled functions back: ctypes with preallocated buffers (default), or
``casadi.external``.  Both are driven by the JSON manifest written beside the .so."""
from __future__ import annotations

import ctypes
import json
from pathlib import Path

import numpy as np

from ..errors import DelassusError, InputError
from . import batch

_real_p = ctypes.POINTER(ctypes.c_double)


class CompiledFunction:
    """``f(q, **inputs) -> numpy array`` (the first output); ``f.outputs(...)`` gives all.
    ``inputs`` are named as in the manifest: vectors (v, tau, k, R, …) and runtime K_<link>.
    ``op_count`` and ``manifest`` describe the generated code."""

    def __init__(self, manifest_path, backend="ctypes"):
        self.manifest_path = Path(manifest_path)
        self.manifest = json.loads(self.manifest_path.read_text())
        self.so_path = self.manifest_path.with_suffix(".so")
        if not self.so_path.is_file():
            raise DelassusError(f"compiled library missing: {self.so_path}")
        self.backend = backend
        m = self.manifest
        self.inputs, self.output_specs = m["inputs"], m["outputs"]
        self._in = [np.zeros(int(np.prod(i["shape"]))) for i in self.inputs]
        self._out = [np.zeros(int(np.prod(o["shape"]))) for o in self.output_specs]
        if backend == "ctypes":
            lib = ctypes.CDLL(str(self.so_path))
            self._fn = getattr(lib, m["function"])
            self._fn.restype = ctypes.c_int
            self._arg = (_real_p * max(m["sz_arg"], 1))(*[a.ctypes.data_as(_real_p) for a in self._in])
            self._res = (_real_p * max(m["sz_res"], 1))(*[a.ctypes.data_as(_real_p) for a in self._out])
            self._iw = (ctypes.c_longlong * max(m["sz_iw"], 1))()
            self._w = (ctypes.c_double * max(m["sz_w"], 1))()
            self._lib = lib
        elif backend == "casadi":
            import casadi as ca
            self._fn = ca.external(m["function"], str(self.so_path))
        else:
            raise DelassusError(f"unknown backend {backend!r}: use 'ctypes' or 'casadi'")

    @property
    def op_count(self):
        return self.manifest["op_count"]

    @property
    def input_names(self):
        return [i["name"] for i in self.inputs]

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
            a = np.asarray(inputs[spec["name"]], dtype=float)
            if len(spec["shape"]) == 1:     # vectors: any shape with the right number of entries
                a = a.reshape(-1)
            if spec["name"] == "q" and a.size != self.manifest["nq"]:
                raise InputError(f"q has {a.size} entries, robot {self.manifest['robot']!r} needs nq = {self.manifest['nq']}")
            if a.shape != tuple(spec["shape"]):
                raise InputError(f"input {spec['name']} has shape {a.shape}, expected {tuple(spec['shape'])}")
            values.append(a.reshape(-1, order="F"))
        return values

    def outputs(self, *first, threads=None, out=None, **inputs):
        """All outputs by name: ``f.outputs(q, **inputs)`` with the named inputs after q (vectors,
        K_…); a stage function takes its first input positionally too, or all by name.
        A batch (q of shape N x nq) gives N x (output shape) each (codegen/batch.py: ``threads``
        default all cores, ``out`` {name: array} to reuse memory)."""
        if batch.is_batched(self, first, inputs, threads, out):
            return batch.evaluate(self, first, inputs, threads, out)
        values = self._fill(first, inputs)
        if self.backend == "casadi":
            res = self._fn(*values)
            res = res if isinstance(res, (list, tuple)) else [res]
            return {o["name"]: np.array(r, dtype=float).reshape(o["shape"], order="F")
                    for o, r in zip(self.output_specs, res)}
        for buf, v in zip(self._in, values):
            buf[:] = v
        if self._fn(self._arg, self._res, self._iw, self._w, 0) != 0:
            raise DelassusError(f"{self.manifest['function']} returned an error")
        return {o["name"]: buf.reshape(o["shape"], order="F").copy() for o, buf in zip(self.output_specs, self._out)}

    def __call__(self, *first, threads=None, out=None, **inputs):
        if batch.is_batched(self, first, inputs, threads, out):
            return batch.evaluate(self, first, inputs, threads, out, only_first=True)[self.output_specs[0]["name"]]
        return next(iter(self.outputs(*first, **inputs).values()))

    def map_blocks(self, Q, output=None, threads=1, **inputs):
        """This function on every block of rows of a dask array of configurations (codegen/distributed.py)."""
        from .distributed import map_blocks
        return map_blocks(self, Q, output, threads, **inputs)

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

    def __init__(self, manifest_paths, backend="ctypes"):
        self.stages = [CompiledFunction(p, backend) for p in manifest_paths]
        if not self.stages or any("stage" not in f.manifest for f in self.stages):
            raise DelassusError(f"not the manifests of a staged function: {[str(p) for p in manifest_paths]}")
        self.names = [f.manifest["stage"]["name"] for f in self.stages]
        self.manifest = self.stages[-1].manifest
        self._work = {}

    @property
    def op_count(self):
        return {n: f.op_count for n, f in zip(self.names, self.stages)}

    def run(self, stage, **inputs):
        if stage not in self.names:
            raise DelassusError(f"unknown stage {stage!r}; this function has stages {self.names}")
        k = self.names.index(stage)
        f, spec = self.stages[k], self.stages[k].manifest["stage"]
        if spec["work_in"]:
            if spec["work_in"] not in self._work:
                raise DelassusError(f"run stage {self.names[k - 1]!r} before {stage!r}")
            inputs = {**inputs, spec["work_in"]: self._work[spec["work_in"]]}
        out = f.outputs(**inputs)
        for later in self.stages[k:]:           # what later stages stored is stale now
            self._work.pop(later.manifest["stage"]["work_out"], None)
        if spec["work_out"]:
            self._work[spec["work_out"]] = out[spec["work_out"]]
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
    """Load code generated earlier: the manifest (.json), the .so, or their folder plus
    an algorithm name as ``folder/algorithm``."""
    p = Path(path)
    if p.suffix in (".so", ".c", ".h"):
        p = p.with_suffix(".json")
    if p.is_dir():
        found = sorted(p.glob("*.json"))
        if len(found) != 1:
            raise DelassusError(f"{p} holds {len(found)} generated functions; name one of "
                                f"{[f.name for f in found]}")
        p = found[0]
    if not p.is_file():
        raise DelassusError(f"no generated function at {path} (expected a manifest .json)")
    return CompiledFunction(p, backend)
