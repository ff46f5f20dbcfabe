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

A manifest is data, whether a sealed file (runtime/artifact.py) or a dict: it is checked for
what the calls read from it (:func:`check_manifest`), and before the first call against the
library itself, whose ``<function>_cuda_layout`` states the bytes of a value and the shape of
every input and output (:func:`layout_table`): a library of another function or precision is
refused, never called with buffers sized from a manifest it does not match.  A single-precision
build's names end in ``_SINGLE`` (:func:`function_name`), as the C target's do.
"""
from __future__ import annotations

import ctypes
import math
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ArtifactError, DelassusError, InputError
from . import artifact
from .inputs import checked_values, real_array
from .library import entries, open_sealed, own_symbol

if TYPE_CHECKING:
    from ..constraints import ConstraintSet
    from ..model import Robot

DTYPES = {"double": np.float64, "single": np.float32}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,200}")
MAX_ENTRIES = 1 << 24       # per input or output and configuration: far beyond any robot's
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


def function_name(c_function, precision):
    """The CUDA form's function name: the C function's, then ``_SINGLE`` in single precision."""
    return c_function + (artifact.SINGLE_FUNCTION if precision == "single" else "")


def names(c_function, precision):
    """The manifest's function and entry points of the CUDA form of ``c_function``."""
    fn = function_name(c_function, precision)
    return {"function": fn, "entry": f"{fn}_cuda", "raw_entry": f"{fn}_cuda_raw"}


def layout_table(inputs, outputs):
    """What ``<function>_cuda_layout`` holds after the bytes of a value: the numbers of inputs
    and outputs, then rows and columns of each (a vector: its length x 1)."""
    dims = [(int(s["shape"][0]), int(s["shape"][1]) if len(s["shape"]) > 1 else 1) for s in (*inputs, *outputs)]
    return [len(inputs), len(outputs), *(d for pair in dims for d in pair)]


def check_manifest(m, where):
    """``m`` if it is a CUDA manifest this module can call: a precision it knows, an
    identifier for a function whose names (:func:`names`) it gives, inputs and outputs named,
    each of 1 or 2 positive dimensions; else a one-line ArtifactError naming ``where``."""
    def bad(why):
        """Refuse the manifest, saying ``why``."""
        raise ArtifactError(f"{where}: {why}")
    if not isinstance(m, dict):
        bad(f"a CUDA manifest is a dict or the path of one, not {type(m).__name__}")
    precision = m.get("precision")
    if not isinstance(precision, dict) or precision.get("type") not in DTYPES:
        bad(f"precision {precision!r}: expected {{'type': 'double' | 'single'}}")
    fn = m.get("function")
    if not (isinstance(fn, str) and _IDENT.fullmatch(fn)):
        bad(f"function {fn!r} is not a C identifier")
    want = {"entry": f"{fn}_cuda", "raw_entry": f"{fn}_cuda_raw"}
    if any(k in m and m[k] != v for k, v in want.items()):
        bad(f"entry {m.get('entry')!r} is not {want['entry']!r}, the entry point of function {fn!r}")
    for what in ("inputs", "outputs"):
        specs = m.get(what)
        if not isinstance(specs, list) or not specs or not all(_good_spec(x) for x in specs):
            bad(f"{what}: expected a list of {{'name': str, 'shape': [1 or 2 positive sizes]}}")
    return m


def _good_spec(spec):
    """Whether an input or output description has a name and a shape the calls can size buffers from."""
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        return False
    shape = spec.get("shape")
    return isinstance(shape, list) and 1 <= len(shape) <= 2 and all(type(d) is int and d > 0 for d in shape) and \
        math.prod(shape) <= MAX_ENTRIES


def _load_host(so):
    """(library, mapped path) of the host build at ``so`` (unsealed: its layout is checked next)."""
    try:
        return ctypes.CDLL(str(so)), str(so)
    except OSError as exc:
        raise ArtifactError(f"cannot load {Path(so).name}: {str(exc).strip().splitlines()[-1]}") from None


class CudaFunction:
    """``f(Q, **inputs)``: the first output for N configurations (``f.outputs`` gives all by name)."""
    robot: Robot                    # what api.generate made it for (set there; its C reference's)
    constraints: ConstraintSet

    def __init__(self, manifest, host_library=None):
        if not isinstance(manifest, (dict, str, os.PathLike)):
            raise ArtifactError(f"a CUDA manifest is a dict or the path of one, not {type(manifest).__name__}")
        if host_library is not None and not isinstance(host_library, (str, os.PathLike)):
            raise ArtifactError(f"host_library: the path of a host build, not {type(host_library).__name__}")
        if isinstance(manifest, (str, os.PathLike)):
            self.manifest_path = where = Path(manifest)
            manifest = artifact.verify(self.manifest_path, ("cu",), "cuda")
        else:
            self.manifest_path, where = None, "CUDA manifest"
        self.manifest = m = check_manifest(manifest, where)
        self.inputs, self.output_specs = m["inputs"], m["outputs"]
        self.dtype = DTYPES[m["precision"]["type"]]
        self.host = host_library is not None
        if not self.host and self.manifest_path is None:
            raise ArtifactError("a CUDA manifest given as a dict runs a host build only (host_library=): "
                                "load a device library by its manifest's path")
        self._so = Path(host_library) if self.host else None
        self._fn = None
        if self.host:           # checked now; a device library on the first call (where CUDA is)
            self._entry()

    @property
    def precision(self):
        """The manifest's precision record, as a C target's CompiledFunction.precision."""
        return self.manifest["precision"]

    @property
    def input_names(self):
        return [i["name"] for i in self.inputs]

    def _entry(self):
        """The entry point, once the library (the host build, or the sealed device library) is
        loaded and its layout checked against the manifest."""
        if self._fn is not None:
            return self._fn
        if self.host:
            lib, mapped = _load_host(self._so)
        else:
            if "so" not in self.manifest.get("files", {}):
                raise DelassusError(f"{self.manifest['function']}: no device library was built (nvcc was not found "
                                    f"when it was generated): generate it again where nvcc is installed")
            self._so = self.manifest_path.with_suffix(".so")
            _, lib, mapped = open_sealed(self.manifest_path, ("cu", "so"), "cuda")
        self._check_layout(lib, mapped)
        n_args = len(self.inputs) + len(self.output_specs) + 1
        self._fn, = entries(lib, mapped, self._so, self.manifest["function"],
                            [("_cuda", [ctypes.c_longlong] + [ctypes.c_void_p] * n_args)])
        self._lib = lib
        return self._fn

    def _check_layout(self, lib, mapped):
        """Refuse a library whose own layout (``<function>_cuda_layout``) is not the manifest's."""
        m = self.manifest
        table = own_symbol(lib, mapped, m["function"] + "_cuda_layout", ctypes.POINTER(ctypes.c_longlong), [],
                           label=f"{self._so} (a library of another function or precision?)")()
        real = table[0]
        if real != np.dtype(self.dtype).itemsize:
            raise ArtifactError(f"{self._so} computes with {real}-byte values, its manifest says "
                                f"{m['precision']['type']} precision: refusing to call it")
        want = layout_table(self.inputs, self.output_specs)
        got = table[1:3] + (table[3:3 + 2 * (table[1] + table[2])] if table[1:3] == want[:2] else [])
        if got != want:
            raise ArtifactError(f"{self._so}: its inputs and outputs (counts, then rows and columns: {got}) are not its "
                                f"manifest's ({want}): refusing to call it")

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
        """Every output by name for Q (N x nq, or one q) and the other inputs: NumPy arrays checked as the C target
        checks its inputs (runtime/inputs.py: real, finite, R > 0, q's quaternions by the one rule), device arrays
        as they are."""
        values = [self._checked(spec, v) for spec, v in zip(self.inputs, self._values(Q, inputs))]
        if self.host:
            return self._host_call([np.ascontiguousarray(v, dtype=self.dtype) for v in values])
        return self._device_call(values)

    def _checked(self, spec, value):
        """A host input (anything not on a device) checked and converted to the function's type; a device array
        (CuPy, PyTorch, JAX) untouched: checking it would cost a reduction and a synchronisation on the device."""
        if _kind(value) in ("cupy", "torch", "jax", "jaxlib"):
            return value
        return checked_values(spec["name"], real_array(spec["name"], value, self.dtype), self.manifest)

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
