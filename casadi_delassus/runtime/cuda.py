"""The CUDA target, the runtime side: ``f(Q, **inputs)`` for a function generated with
``target="cuda"`` (codegen/cuda.py writes the .cu, its manifest and, where nvcc is installed,
the device library this loads).

Arrays are batch first (N x the input's shape), as the C target's batches.  On the GPU (CuPy
installed, a CUDA device present) an input that speaks ``__cuda_array_interface__`` or DLPack
(CuPy, PyTorch, JAX) is used where it lies, without a host copy, and the outputs come back as
the same kind of array on the same device, computed on the current stream (PyTorch's current
stream for torch tensors, CuPy's otherwise); NumPy input is copied in and the outputs out.
``CudaFunction(manifest, host_library=so)`` runs the host build of the same .cu (C++ through
the shim, codegen/cuda.host_library) on NumPy arrays: how the target is tested without a GPU.
(The dynamic loader keeps a library by its path: give each host build a path of its own.)
"""
from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from ..errors import ArtifactError, DelassusError, InputError
from . import artifact

DTYPES = {"double": np.float64, "single": np.float32}
INSTALL = "pip install 'casadi_delassus[gpu]' (CuPy) on a machine with an NVIDIA GPU"


def device_cupy():
    """CuPy where it is installed and sees a CUDA device, else a one-line DelassusError."""
    try:
        import cupy
    except ImportError:
        raise DelassusError(f"a CUDA function needs CuPy and a CUDA device: {INSTALL}") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception:           # CuPy raises its CUDARuntimeError (no driver, no device)
        count = 0
    if count == 0:
        raise DelassusError("a CUDA function needs a CUDA device, and CuPy sees none here")
    return cupy


def has_device():
    """Whether CuPy is installed and sees a CUDA device here."""
    try:
        device_cupy()
        return True
    except DelassusError:
        return False


def _kind(a):
    module = type(a).__module__.split(".")[0]
    return "numpy" if isinstance(a, np.ndarray) else module if module in ("cupy", "torch", "jax", "jaxlib") else "other"


class CudaFunction:
    """``f(Q, **inputs)``: the first output for N configurations (``f.outputs`` gives all by name)."""

    def __init__(self, manifest, host_library=None):
        if isinstance(manifest, dict):
            self.manifest_path, self.manifest = None, manifest
        else:
            self.manifest_path = Path(manifest)
            self.manifest = artifact.verify(self.manifest_path, ("cu",))
        m = self.manifest
        self.inputs, self.output_specs = m["inputs"], m["outputs"]
        self.dtype = DTYPES[m["precision"]["type"]]
        self.host = host_library is not None
        self._so = Path(host_library) if self.host else None
        self._fn = None

    @property
    def precision(self):
        """The manifest's precision record, as a C target's CompiledFunction.precision."""
        return self.manifest["precision"]

    @property
    def input_names(self):
        return [i["name"] for i in self.inputs]

    def _entry(self):
        if self._fn is not None:
            return self._fn
        if not self.host:
            if "so" not in self.manifest.get("files", {}):
                raise DelassusError(f"{self.manifest['function']}: no device library was built (nvcc was not found "
                                    f"when it was generated): generate it again where nvcc is installed")
            artifact.verify(self.manifest_path, ("cu", "so"))
            self._so = self.manifest_path.with_suffix(".so")
        try:
            lib = ctypes.CDLL(str(self._so))
        except OSError as exc:
            raise DelassusError(f"cannot load {self._so.name}: {exc}") from None
        try:
            fn = getattr(lib, self.manifest["entry"])
        except AttributeError:
            raise ArtifactError(f"{self._so.name} has no {self.manifest['entry']} (a library of another function?): "
                                f"build it again") from None
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_longlong] + [ctypes.c_void_p] * (len(self.inputs) + len(self.output_specs) + 1)
        self._lib, self._fn = lib, fn
        return fn

    def _batch(self, values):
        """(N, whether the call was for one configuration): every input is N x its shape."""
        ns = set()
        single = None
        for spec, v in zip(self.inputs, values):
            shape = tuple(v.shape)
            one = shape == tuple(spec["shape"])
            if not one and shape[1:] != tuple(spec["shape"]):
                raise InputError(f"input {spec['name']} has shape {shape}; expected N x {spec['shape']}")
            single = one if single is None else single
            ns.add(1 if one else shape[0])
        if len(ns) != 1:
            raise InputError(f"inputs disagree on the batch size: {sorted(ns)}")
        return ns.pop(), single

    def _values(self, Q, inputs):
        extra = set(inputs) - set(self.input_names[1:])
        missing = [n for n in self.input_names[1:] if n not in inputs]
        if extra or missing:
            raise InputError(f"this function takes {self.input_names} (q first); "
                             + (f"unexpected {sorted(extra)}" if extra else f"missing {missing}"))
        return [Q] + [inputs[n] for n in self.input_names[1:]]

    def outputs(self, Q, **inputs):
        values = self._values(Q, inputs)
        if self.host:
            return self._host_call([np.ascontiguousarray(v, dtype=self.dtype) for v in values])
        return self._device_call(values)

    def __call__(self, Q, **inputs):
        return self.outputs(Q, **inputs)[self.output_specs[0]["name"]]

    def _run(self, n, ins, outs, stream):
        rc = self._entry()(n, *ins, *outs, stream)
        if rc != 0:
            raise DelassusError(f"{self.manifest['function']} failed on the device (CUDA error {rc})")

    def _host_call(self, values):
        n, one = self._batch(values)
        outs = {o["name"]: np.empty((n, *o["shape"]), self.dtype) for o in self.output_specs}
        self._run(n, [v.ctypes.data for v in values], [o.ctypes.data for o in outs.values()], None)
        return {k: o[0] for k, o in outs.items()} if one else outs

    def _device_call(self, values):
        cp = device_cupy()
        kind = _kind(values[0])
        stream = cp.cuda.get_current_stream()
        if kind == "torch":
            import torch
            stream = cp.cuda.ExternalStream(torch.cuda.current_stream(values[0].device).cuda_stream)
        arrays = [cp.asarray(v) if kind == "numpy" or hasattr(v, "__cuda_array_interface__") else cp.from_dlpack(v)
                  for v in values]
        with stream:
            arrays = [cp.ascontiguousarray(a, dtype=self.dtype) for a in arrays]   # a copy only where needed
            n, one = self._batch(arrays)
            outs = {o["name"]: cp.empty((n, *o["shape"]), self.dtype) for o in self.output_specs}
            self._run(n, [a.data.ptr for a in arrays], [o.data.ptr for o in outs.values()], stream.ptr)
            if kind == "numpy":
                outs = {k: o.get() for k, o in outs.items()}
        if kind == "torch":
            import torch
            outs = {k: torch.from_dlpack(o) for k, o in outs.items()}
        elif kind in ("jax", "jaxlib"):
            import jax.dlpack
            outs = {k: jax.dlpack.from_dlpack(o) for k, o in outs.items()}
        return {k: o[0] for k, o in outs.items()} if one else outs

    def __repr__(self):
        m = self.manifest
        return f"<{m['algorithm']} for {m['robot']}/{m['scenario']}: CUDA, {m['precision']['type']}, {m['layout']}>"
