"""Load compiled functions back: ctypes with preallocated buffers (default), or
``casadi.external``.  Both are driven by the JSON manifest written beside the .so."""
from __future__ import annotations

import ctypes
import json
from pathlib import Path

import numpy as np

from ..errors import DelassusError, InputError

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

    def _fill(self, q, inputs):
        q = np.asarray(q, dtype=float).reshape(-1)
        if q.size != self.manifest["nq"]:
            raise InputError(f"q has {q.size} entries, robot {self.manifest['robot']!r} needs nq = {self.manifest['nq']}")
        values = [q]
        for spec in self.inputs[1:]:
            if spec["name"] not in inputs:
                raise InputError(f"missing input {spec['name']} ({' x '.join(map(str, spec['shape']))})")
            a = np.asarray(inputs[spec["name"]], dtype=float)
            if len(spec["shape"]) == 1:     # vectors: any shape with the right number of entries
                a = a.reshape(-1)
            if a.shape != tuple(spec["shape"]):
                raise InputError(f"input {spec['name']} has shape {a.shape}, expected {tuple(spec['shape'])}")
            values.append(a.reshape(-1, order="F"))
        extra = set(inputs) - set(self.input_names)
        if extra:
            raise InputError(f"unexpected inputs {sorted(extra)}; this function takes {self.input_names}")
        return values

    def outputs(self, q, **inputs):
        """All outputs by name; ``inputs`` are the named inputs after q (vectors, K_…)."""
        values = self._fill(q, inputs)
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

    def __call__(self, q, **inputs):
        return next(iter(self.outputs(q, **inputs).values()))

    def __repr__(self):
        m = self.manifest
        return (f"<{m['algorithm']} for {m['robot']}/{m['scenario']}: m = {m['m']}, "
                f"{m['op_count']['instructions']} instructions, {self.so_path}>")


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
