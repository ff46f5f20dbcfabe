"""Batches that outgrow one machine: ``map_blocks(f, Q)`` evaluates a compiled function on
every block of rows of a ``dask.array`` of configurations (N x nq), on whatever cluster the
array is computed on.

A task carries the manifest (a few kB), not the compiled code: each worker process loads
the .so beside the manifest's path when it is there, intact and built from the same hash
(a shared file system, a LocalCluster), or else regenerates the function from the manifest
into its own cache folder (``CASADI_DELASSUS_CACHE``, default a folder in the temporary
directory; codegen/rebuild.py) and checks that it got the same function (name and
instruction count).  Loaded
functions are kept per process, so a worker compiles or loads once.  Blocks are evaluated by
the batched entry point (runtime/batch.py, runtime/door.c), whose result for one configuration does not
depend on the block it is in: ``map_blocks(f, Q).compute()`` equals ``f(Q.compute())``
bit for bit.  Needs the ``distributed`` extra (``dask[distributed]``).
"""
from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path

import numpy as np

from ..errors import BatchInputError, InputError
from . import artifact

_loaded = {}
_lock = threading.Lock()


def cache_dir():
    return Path(os.environ.get("CASADI_DELASSUS_CACHE") or Path(tempfile.gettempdir()) / "casadi_delassus-workers")


def worker_function(manifest_path, manifest, load):
    """The compiled function of ``manifest`` in this process: loaded (``load``, runtime/loader's,
    handed in by the task: this module does not import the loader, which imports it) from
    ``manifest_path`` when that holds the same build, else regenerated from the manifest
    (once per process)."""
    key = (str(manifest_path), manifest["hash"])
    with _lock:
        if key not in _loaded:
            path = manifest_path
            if not artifact.cached(manifest_path, manifest["hash"]):      # not there, damaged or another build
                # the one use of the compile side by the runtime: a worker that cannot see the
                # .so compiles it (tests/project/test_imports.py names this import and no other)
                from ..codegen.rebuild import rebuild
                path = rebuild(manifest, cache_dir())
            _loaded[key] = load(path)
        return _loaded[key]


class BlockEvaluator:
    """A picklable task body: the named output of the function of ``manifest`` for one block
    of configurations (with ``inputs`` for one instance repeated over the block)."""

    def __init__(self, manifest_path, manifest, output, threads, inputs, load):
        self.manifest_path, self.manifest, self.output = str(manifest_path), manifest, output
        self.threads, self.inputs, self.load = threads, inputs, load

    def __call__(self, block, block_info=None):
        f = worker_function(self.manifest_path, self.manifest, self.load)
        try:
            return f.outputs(np.asarray(block), threads=self.threads, **self.inputs)[self.output]
        except BatchInputError as exc:     # the batch names an instance of the block: name the row of Q
            start = block_info[0]["array-location"][0][0] if block_info else 0
            raise InputError(f"row {start + exc.instance} of Q: {exc.reason}") from None


def map_blocks(f, Q, output=None, threads=1, **inputs):
    """``output`` (default: the first) of the compiled function ``f`` for every row of the
    dask array ``Q`` (N x nq; chunked along rows only: the columns are joined into one
    chunk), as a lazy dask array N x (output shape) chunked like Q's rows.  ``inputs``: the
    other inputs, one instance each, the same for every row.  ``threads``: threads per task
    (default 1, as dask already runs one task per worker thread).  The same as
    ``f.map_blocks(Q, …)``."""
    return f.map_blocks(Q, output, threads, **inputs)


def blocks(f, Q, output, threads, inputs, load):
    """map_blocks, with ``load`` the loader the workers use (CompiledFunction.map_blocks')."""
    import dask.array as da
    specs = {o["name"]: o for o in f.output_specs}
    output = output or f.output_specs[0]["name"]
    if output not in specs:
        raise InputError(f"unknown output {output!r}; this function has {list(specs)}")
    first = f.inputs[0]
    if not isinstance(Q, da.Array) or Q.ndim != 2 or Q.shape[1] != first["shape"][0]:
        raise InputError(f"map_blocks needs a 2-D dask array of {first['name']} rows (N x {first['shape'][0]}), "
                         f"got {type(Q).__name__} {getattr(Q, 'shape', '')}")
    if len(Q.chunks[1]) != 1:
        Q = Q.rechunk({1: -1})
    shape = tuple(specs[output]["shape"])
    task = BlockEvaluator(f.manifest_path, f.manifest, output, threads,
                          {k: np.asarray(v, dtype=float) for k, v in inputs.items()}, load)
    return Q.map_blocks(task, dtype=np.float64, drop_axis=1, new_axis=list(range(1, 1 + len(shape))),
                        chunks=(Q.chunks[0], *((s,) for s in shape)), meta=np.empty((0,) * (1 + len(shape))))
