"""The thin Python door: ``f(q)`` through a small CPython extension (door.c) instead of ctypes.

A ctypes call with numpy checks cost 10-20 µs per ``f(q)``, for functions that run in
0.5-3 µs.  door.c is one extension type, compiled here once per Python, numpy, compiler and
source (about 2 s, cached) when the first function is loaded (never at import), that
CompiledFunction's instances derive from (``callable_class``): bound to the checked function
pointer, its ``f(q)`` calls the C code when the inputs are already what it reads (float64
arrays of the right shape, finite, unit quaternions within inputs.UNIT_TOL) and hands
everything else to the Python path (CompiledFunction._evaluate, inputs.as_input: conversion or
a one-line InputError), so both paths accept and refuse the same inputs and compute the same
bits.

The same extension holds the batch runtime (``run_batch``: shares, worker threads, every
input layout; runtime/batch.py).  Where it cannot be built (no Python.h, no compiler)
CompiledFunction's instances derive from ``PythonCall`` instead and every call goes through
ctypes (one DoorWarning when the
first function is loaded, which the command line ignores); with
``CASADI_DELASSUS_DOOR=ctypes`` set when a function is loaded its door stays unbound (``f.door``
says which).

The built module is cached in ``$CASADI_DELASSUS_CACHE/door`` (default
``$XDG_CACHE_HOME/casadi_delassus/door``, ``~/.cache/...``), used only when that folder is
this user's and not writable by others; otherwise it is built into a private temporary
folder for this process.
"""
from __future__ import annotations

import ctypes
import hashlib
import importlib.machinery
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import warnings
from pathlib import Path

import numpy as np

from ..errors import CompilerError, DelassusError
from ..progress import step
from .compiler import find_compiler
from .cache_dirs import cache_dir, private_folder
from ..model.robot import unit_blocks
from .inputs import UNIT_TOL

SOURCE = Path(__file__).with_name("door.c")
POOL = SOURCE.with_name("pool.h")          # the one thread pool: door.c includes it, the contact step emits it
MODULE = "casadi_delassus_door"
CFLAGS = ("-O2", "-fPIC", "-shared", "-ffp-contract=off", "-fno-strict-aliasing", "-fvisibility=hidden")
CHECK_FINITE, CHECK_POSITIVE = 0, 1
ENV = "CASADI_DELASSUS_DOOR"

_lock = threading.Lock()
_state = {"module": None, "why": None}


def _key():
    """What the built module depends on (not the compiler that built it)."""
    data = [SOURCE.read_bytes(), POOL.read_bytes(), sys.version, sysconfig.get_config_var("EXT_SUFFIX"), np.__version__, CFLAGS]
    return hashlib.sha256(repr(data).encode()).hexdigest()[:16]


def _compile(cc, target):
    include = sysconfig.get_paths()["include"]
    if not (Path(include) / "Python.h").is_file():
        raise CompilerError(f"Python.h not found in {include} (install the Python development headers)")
    tmp = Path(tempfile.mkdtemp(prefix=".door-", dir=target.parent))
    try:
        out = tmp / target.name
        cmd = [*shlex.split(cc), *CFLAGS, f"-I{include}", f"-I{np.get_include()}", "-o", str(out), str(SOURCE)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
        except OSError as exc:
            raise CompilerError(f"cannot run {cc}: {exc}") from None
        if proc.returncode != 0 or not out.is_file():
            lines = [l for l in proc.stderr.splitlines() if "error" in l] or proc.stderr.splitlines() or ["no output"]
            raise CompilerError(f"compiling door.c failed: {lines[0][:300]}")
        os.replace(out, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _import(path):
    loader = importlib.machinery.ExtensionFileLoader(MODULE, str(path))
    spec = importlib.util.spec_from_file_location(MODULE, str(path), loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _build():
    name = f"{MODULE}-{_key()}{sysconfig.get_config_var('EXT_SUFFIX') or '.so'}"
    folder = cache_dir("door")
    if private_folder(folder):
        target = folder / name
        if target.is_file():
            try:
                return _import(target)
            except ImportError:       # damaged: build it again
                pass
        with step("compiling the Python door (door.c, once per Python and numpy)"):
            _compile(find_compiler(None), target)
        return _import(target)
    folder = Path(tempfile.mkdtemp(prefix="casadi_delassus-door-"))     # this process only
    try:
        with step("compiling the Python door (door.c; no private cache folder)"):
            _compile(find_compiler(None), folder / name)
        return _import(folder / name)             # mapped: the file is not needed any more
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class DoorWarning(RuntimeWarning):
    """Single calls go through ctypes: the door could not be built (the CLI ignores it)."""


def extension():
    """The door's extension module for single calls: ``module()``, or None where
    ``CASADI_DELASSUS_DOOR=ctypes`` asks for ctypes."""
    return None if os.environ.get(ENV, "").lower() == "ctypes" else module()


def module():
    """The door's extension module (single calls and the batch runtime), built on first use
    and cached; None where it cannot be (the reason is ``why()``)."""
    with _lock:
        if _state["module"] is None and _state["why"] is None:
            try:
                _state["module"] = _build()
            except (DelassusError, OSError, ImportError) as exc:
                _state["why"] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return _state["module"]


def _warn_once():
    if _state["why"] and not _state.get("warned"):
        _state["warned"] = True
        warnings.warn(f"casadi_delassus: single calls go through ctypes (~10 µs each): {_state['why']}", DoorWarning,
                      stacklevel=4)


def why():
    return _state["why"]


def _input_spec(spec):
    shape = [int(d) for d in spec["shape"]]
    rows, cols = (shape[0], 1) if len(shape) == 1 else (shape[0], shape[1])
    return (spec["name"], rows, cols, len(shape) == 1, CHECK_POSITIVE if spec["name"] == "R" else CHECK_FINITE)


class PythonCall:
    """CompiledFunction's base where the door cannot be built: every call goes to _evaluate."""
    _door_bound = False

    def __init__(self, *binding):
        pass

    def __call__(self, *first, threads=None, out=None, **inputs):
        return self._evaluate(first, inputs, threads, out, True)

    def _door_call(self, first, inputs, out, all_outputs):
        return NotImplemented


_classes = {}


def callable_class(cls):
    """(a subclass of ``cls`` and of the door's base, that base): the extension's Door, or
    PythonCall where it cannot be built.  Made on the first load, not at import, and once
    per class: CompiledFunction's methods come first, the call (tp_call) is the door's."""
    door = module()
    base = PythonCall if door is None else door.Door
    with _lock:
        if (cls, base) not in _classes:
            _classes[cls, base] = type(cls.__name__, (cls, base), {"__module__": cls.__module__,
                                                                   "__qualname__": cls.__qualname__})
        return _classes[cls, base], base


def binding(f, release_gil=True):
    """The arguments of Door.__init__ for the CompiledFunction ``f`` (its checked symbol
    ``f._fn`` from the library ``f._lib``), or None when calls are to go through ctypes
    (no extension, or CASADI_DELASSUS_DOOR=ctypes)."""
    if extension() is None:
        _warn_once()
        return None
    if f.dtype != np.float64:           # the door's single calls are float64: float32 ones go through ctypes
        return None
    names = [i["name"] for i in f.inputs]
    q_index = names.index("q") if "q" in names else -1
    units = [(sl.start, sl.stop - sl.start) for _, sl, _ in unit_blocks(f.manifest.get("q_layout", ()))] if q_index >= 0 else []
    work = f._work
    return (ctypes.cast(f._fn, ctypes.c_void_p).value, f._lib, DelassusError, f.manifest["function"],
            [_input_spec(i) for i in f.inputs], [(o["name"], tuple(int(d) for d in o["shape"])) for o in f.output_specs],
            q_index, units, UNIT_TOL,
            (max(work["sz_arg"], len(f.inputs)), max(work["sz_res"], len(f.output_specs)), max(work["sz_iw"], 0),
             max(work["sz_w"], 0)), release_gil)
