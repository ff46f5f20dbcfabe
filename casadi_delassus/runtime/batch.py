"""Batches from Python: ``f(Q)`` and ``f.outputs(Q, …)`` of every compiled function.

Python converts and checks the call's values once (``canonical``: float64, the shapes of the
manifest, an input given for one instance repeated for all with a zero stride, no copy of an
array in any order) and hands them to the one batch runtime, door.c's ``run_batch``: it
splits the batch into shares, runs them on its worker threads, one per CPU, gathers inputs
not in the batched entry point's layout (Fortran order, slices) share by share and calls
``<fn>_batch_arrays`` (codegen/vectorise.py, templates/batch.c.j2).  An instance the batched
code refuses is named with the single call's one-line InputError (runtime/inputs.as_input).

Where the door's extension cannot be built, a batch is one call of the entry point in the
calling thread.
"""
from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass

import numpy as np

from ..errors import ArtifactError, BatchInputError, DelassusError, InputError
from ..names import shown
from . import door
from .inputs import as_input, out_array, refuse_masked
from .library import own_symbol

# SX instructions per thread's share below which another thread costs more than it saves:
# handing a share to a worker and waking it takes tens of µs, a batch runs about 15
# instructions per ns per core (bench/batch.py), so a share is at least ~200 µs of work
MIN_SHARE_INSTRUCTIONS = 3_000_000
MAX_THREADS = 2 ** 31 - 1      # the C entry points take a thread count as an int


def cores():
    """The cores this process may run on (taskset / cgroups respected)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


@dataclass(frozen=True)
class Entry:
    """``<fn>_batch_arrays`` of one compiled function: its address, the lanes it computes at
    once and the instructions of one instance (what the runtime splits a batch by)."""
    address: int
    call: object
    lanes: int
    per_instance: int


def entry(f):
    """The batched entry point of the CompiledFunction ``f``, from its library as loaded and
    checked (runtime/library.py: only symbols that library itself defines); kept on ``f``."""
    if getattr(f, "_batch", None) is not None:
        return f._batch
    manifest, so_path = f.manifest, f.so_path
    info = manifest.get("batch")
    if not info:
        raise DelassusError(f"{so_path.name} was generated without a batched entry point: regenerate it (--force)")
    name = f"{manifest['function']}_batch"
    if info.get("entry") != name:
        raise DelassusError(f"{so_path.name}: the manifest's batched entry point is not {name}: regenerate it")
    pointers = ctypes.POINTER(ctypes.c_void_p)
    call = own_symbol(f._lib, f._mapped, name + "_arrays", ctypes.c_int, [ctypes.c_longlong, pointers, pointers],
                      label=so_path)
    lanes = int(own_symbol(f._lib, f._mapped, name + "_lanes", ctypes.c_int, [], label=so_path)())
    if lanes != info["lanes"]:
        raise DelassusError(f"{so_path.name} computes {lanes} lanes, its manifest says {info['lanes']}")
    f._batch = Entry(ctypes.cast(call, ctypes.c_void_p).value, call, lanes,
                     max(int(manifest.get("op_count", {}).get("instructions", 0)), 1))
    return f._batch


def door_binding(f):
    """(entry address, lanes, instructions per instance, MIN_SHARE_INSTRUCTIONS): what the door
    needs to run f(Q) straight from its call, for a function of q alone with a batched entry
    point; None otherwise (its batches come through ``evaluate``)."""
    if [i["name"] for i in f.inputs] != ["q"] or not f.manifest.get("batch") or f.dtype != np.float64:
        return None
    try:
        e = entry(f)
    except ArtifactError:       # built before <fn>_batch_arrays: single calls work, a batch says "regenerate"
        return None
    return e.address, e.lanes, e.per_instance, MIN_SHARE_INSTRUCTIONS


def shares(f, n, threads=None):
    """[(start, stop)]: the shares the runtime cuts n instances of ``f`` into on ``threads``
    threads (default every core)."""
    e = entry(f)
    return [tuple(s) for s in door.module().shares(n, e.lanes, e.per_instance, MIN_SHARE_INSTRUCTIONS, threads or 0)]


def is_batched(f, first, inputs, threads=None):
    """Whether a call of ``f`` is a batch: its first input (q, or a stage's own first input) is
    given with a leading batch dimension, i.e. has one dimension more than one instance
    (a column vector of the right size stays a single call)."""
    x = first[0] if first else inputs.get(f.inputs[0]["name"])
    spec = f.inputs[0]["shape"]
    try:
        shape = np.shape(x)
    except ValueError:          # ragged: not a batch; the single call's checks name the problem
        shape = ()
    check_threads(threads)
    return len(shape) == len(spec) + 1 and not (len(spec) == 1 and shape == (spec[0], 1))


def check_threads(threads):
    """An InputError unless ``threads`` is None or a count (an integer from 1 to MAX_THREADS; a bool is no count):
    the one rule of every batch entry point (the door's, the contact step's)."""
    if threads is not None and (not isinstance(threads, (int, np.integer)) or isinstance(threads, (bool, np.bool_))
                                or not 1 <= threads <= MAX_THREADS):
        raise InputError(f"threads must be a positive integer (at most {MAX_THREADS}), got {shown(threads)}")


def _canonical_one(f, spec, value, n, lead):
    """One input as an aligned native array (n, *shape) of f's type (float64, float32 in single
    precision: converted as runtime/inputs.py says), any strides."""
    shape = tuple(spec["shape"])
    refuse_masked(spec["name"], value)
    a = np.asarray(value)
    if a.dtype.kind not in "fiub":
        raise InputError(f"input {spec['name']} holds {a.dtype}, not numbers")
    if a.shape == shape and not lead:
        a = np.broadcast_to(a, (n, *shape))
    elif len(shape) == 1 and a.shape == (n, *shape, 1):    # vectors as outputs give them: N x r x 1
        a = a[..., 0]
    elif a.shape != (n, *shape):
        want = " x ".join(map(str, (n, *shape)))
        raise InputError(f"input {spec['name']} has shape {a.shape}; a batch of {n} needs {want}"
                         + (f" (nq = {f.manifest['nq']})" if spec["name"] == "q" else ""))
    a = np.asarray(a, dtype=f.dtype)
    return a if a.flags.aligned else a.copy()


def canonical(f, first, inputs):
    """(n, [arrays]) from the call's inputs, in manifest order: each (n, *shape) of f's type, in
    whatever order it came (the runtime gathers what is not in the entry's layout)."""
    if first:
        inputs = {f.inputs[0]["name"]: first[0], **inputs}
    names = [s["name"] for s in f.inputs]
    extra = set(inputs) - set(names)
    if extra:
        raise InputError(f"unexpected inputs {sorted(extra)}; this function takes {names}")
    missing = [s for s in f.inputs if s["name"] not in inputs]
    if missing:
        s = missing[0]
        raise InputError(f"missing input {s['name']} ({' x '.join(map(str, s['shape']))})")
    n = np.shape(inputs[names[0]])[0]
    return n, [_canonical_one(f, s, inputs[s["name"]], n, s is f.inputs[0]) for s in f.inputs]


def aligned_empty(shape, align=64, dtype=np.float64):
    """np.empty(shape, dtype) whose data starts at a multiple of ``align`` bytes (the batched
    code streams large outputs with aligned vector stores)."""
    size, item = int(np.prod(shape)), np.dtype(dtype).itemsize
    raw = np.empty(size + align // item, dtype)
    start = (-raw.ctypes.data % align) // item
    return raw[start:start + size].reshape(shape)


def run(f, n, ins, outs, threads):
    """``f``'s batched entry point on n instances: ``ins`` from ``canonical``, ``outs``
    C-contiguous (n, *shape) arrays or None; threads 0 for every core."""
    e, module = entry(f), door.module()
    if module is not None:
        code = module.run_batch(e.address, e.lanes, e.per_instance, MIN_SHARE_INSTRUCTIONS, n,
                                ins, outs, threads, f.dtype.itemsize)
    else:
        ins = [np.ascontiguousarray(a) for a in ins]
        ptrs = [(ctypes.c_void_p * max(len(arrays), 1))(*[None if a is None else a.ctypes.data for a in arrays])
                for arrays in (ins, outs)]
        code = e.call(n, *[ctypes.cast(p, ctypes.POINTER(ctypes.c_void_p)) for p in ptrs])
    if code < 0:
        refuse(f, -1 - code, ins)
    if code:
        raise DelassusError(f"{f.manifest['function']}_batch returned an error")


def refuse(f, i, ins):
    """Raise the single call's one-line InputError for instance i, which the batched code
    refused (runtime/inputs.as_input says why)."""
    try:
        for spec, a in zip(f.inputs, ins):
            as_input(spec, a[i], f.manifest)
    except InputError as exc:
        raise BatchInputError(i, str(exc)) from None
    raise BatchInputError(i, "an input the single call refuses")


def _output_buffer(f, spec, n, given):
    shape = (n, *spec["shape"])
    return aligned_empty(shape, dtype=f.dtype) if given is None else out_array(spec["name"], shape, given, dtype=f.dtype)


def evaluate(f, first, inputs, threads=None, out=None, only_first=False):
    """Outputs {name: (n, *shape) array} of a batched call of the CompiledFunction ``f``.
    ``out``: an array for the first output (``only_first``) or {name: array}; ``threads``:
    default all cores."""
    n, ins = canonical(f, first, inputs)
    specs = f.output_specs
    wanted = specs[:1] if only_first else specs
    given = {specs[0]["name"]: out} if only_first else dict(out or {})
    unknown = set(given) - {s["name"] for s in specs}
    if unknown:
        raise InputError(f"out names unknown outputs {sorted(unknown)}; this function has {[s['name'] for s in specs]}")
    bufs = {s["name"]: _output_buffer(f, s, n, given.get(s["name"])) for s in wanted}
    # an out= over an input's memory would be written before all of that input is read
    ins = [a.copy() if any(np.may_share_memory(a, b) for b in bufs.values()) else a for a in ins]
    if n:
        run(f, n, ins, [bufs.get(s["name"]) for s in specs], 0 if threads is None else int(threads))
    return bufs
