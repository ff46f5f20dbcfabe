"""The compiled library of a generated function, mapped and checked before anything is called;
every other compiled kind (contact step, rollout, MuJoCo step, step derivatives, CUDA device
library) is mapped the same way, through :func:`open_sealed`.

What is mapped is a private copy of the .so whose bytes were checked against the manifest as
they were copied (then unlinked): a later change of the file in place cannot reach the
mapping, and a .so regenerated at the same path is mapped anew (dlopen would hand back the
library already loaded under that name).  A symbol is used only when that library itself
defines it (not found through its dependencies, as ``system`` from libc would be), and the
.so's own description of the function (number, shapes and density of inputs and outputs,
work sizes) must be the manifest's: a mismatch is a one-line ArtifactError, never a call with
wrong buffers.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import tempfile
from pathlib import Path

from ..errors import ArtifactError
from . import artifact

_int_p = ctypes.POINTER(ctypes.c_longlong)
REAL_BYTES = {"double": 8, "single": 4}        # sizeof(casadi_real) of each precision


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _dladdr():
    try:
        fn = ctypes.CDLL(None).dladdr
    except (AttributeError, OSError):
        return None
    fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)], ctypes.c_int
    return fn


_DLADDR = _dladdr()


def _verified_copy(so_path, record):
    """A private copy of ``so_path`` in the temporary folder, its sha256 checked against ``record``."""
    fd, copy = tempfile.mkstemp(prefix="casadi_delassus-", suffix=".so")
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out, open(so_path, "rb") as src:
            for block in iter(lambda: src.read(1 << 20), b""):
                digest.update(block)
                out.write(block)
        if digest.hexdigest() != record.get("sha256"):
            raise ArtifactError(f"{so_path} changed after its manifest was checked: regenerate it")
    except BaseException:
        os.unlink(copy)
        raise
    return copy


def open_library(so_path, record, load=ctypes.CDLL):
    """(``load(path)``, that path): ``path`` a private copy of ``so_path`` whose sha256 is
    ``record``'s, unlinked once loaded; the file itself (checked by artifact.verify just
    before) where no copy can be written or loaded (a full or noexec temporary folder)."""
    try:
        copy = _verified_copy(so_path, record)
    except OSError:
        copy = None
    if copy is not None:
        try:
            return load(copy), copy
        except (OSError, RuntimeError):         # casadi.external raises RuntimeError
            pass
        finally:
            os.unlink(copy)
    try:
        return load(str(so_path)), str(so_path)
    except (OSError, RuntimeError) as exc:
        raise ArtifactError(f"cannot load {so_path}: {str(exc).strip().splitlines()[-1]}") from None


def open_sealed(manifest_path, kinds, what, load=ctypes.CDLL):
    """(manifest, ``load(path)``, path): the sealed manifest of a ``what`` at ``manifest_path``
    and its ``kinds`` files verified (artifact.verify, ``kinds`` holding "so"), then its .so
    loaded through a private copy whose bytes are checked again as they are copied
    (:func:`open_library`).  A damaged or mismatched artifact is a one-line ArtifactError and is
    never mapped."""
    manifest = artifact.verify(manifest_path, kinds, what)
    loaded, mapped = open_library(Path(manifest_path).with_suffix(".so"), manifest["files"]["so"], load)
    return manifest, loaded, mapped


def own_symbol(lib, mapped, name, restype=ctypes.c_int, argtypes=None, label=None):
    """``name`` from the shared library ``lib`` mapped from the file ``mapped``, refused unless
    that library itself defines it (dlsym also finds the symbols of its dependencies, such as
    libc's ``system``).  ``label`` names the library in errors."""
    label = label or mapped
    try:
        fn = getattr(lib, name)
    except AttributeError:
        raise ArtifactError(f"{label} does not define {name}: regenerate it") from None
    if _DLADDR is not None:
        info = _DlInfo()
        addr = ctypes.cast(fn, ctypes.c_void_p).value
        if not _DLADDR(addr, ctypes.byref(info)) or info.dli_fname is None or \
                os.path.realpath(os.fsdecode(info.dli_fname)) != os.path.realpath(mapped):
            where = os.fsdecode(info.dli_fname) if info.dli_fname else "elsewhere"
            raise ArtifactError(f"{name} is not defined by {label} (found in {where}): refusing to call it")
    fn.restype = restype
    if argtypes is not None:
        fn.argtypes = argtypes
    return fn


def entries(lib, mapped, label, prefix, signatures):
    """The C functions ``prefix + suffix`` of ``lib`` for each (suffix, argument types) of
    ``signatures``, in order: each returns int and is defined by that library itself (own_symbol)."""
    return [own_symbol(lib, mapped, prefix + suffix, argtypes=list(types), label=label) for suffix, types in signatures]


def _shape_of(sparsity, name, so_path):
    """(rows, cols) of a CasADi sparsity pattern [rows, cols, 1 (dense) | colind…, row…]."""
    rows, cols, flag = sparsity[0], sparsity[1], sparsity[2]
    if flag != 1 and rows * cols != 0:
        raise ArtifactError(f"{so_path}: {name} is not dense: regenerate it")
    return rows, cols


def check_library(lib, mapped, so_path, manifest):
    """(the function, its work sizes) after checking the .so's own description of it against
    the manifest.  Work sizes are the .so's own (CasADi's C keeps most of the work of an SX
    function in locals, so they are often below the manifest's in-memory sz_w)."""
    fname = manifest["function"]

    def sym(name, restype=ctypes.c_int, argtypes=None):
        return own_symbol(lib, mapped, name, restype, argtypes, label=so_path)

    expected = artifact.expected_function(manifest)
    if fname != expected:
        raise ArtifactError(f"manifest {so_path.with_suffix('.json')} names function {fname!r}, "
                            f"not {expected!r} (its model, scenario and algorithm): refusing to call it")
    if sym(f"{fname}_casadi_int_size")() != ctypes.sizeof(ctypes.c_longlong):
        raise ArtifactError(f"{so_path} uses another casadi_int size than 64-bit: regenerate it")
    precision = manifest.get("precision", {}).get("type", "double")
    real = sym(f"{fname}_casadi_real_size")()
    if real != REAL_BYTES.get(precision):
        raise ArtifactError(f"{so_path} computes with {real}-byte values, its manifest says {precision} precision: "
                            f"regenerate it")
    for kind, specs in (("in", manifest["inputs"]), ("out", manifest["outputs"])):
        n = sym(f"{fname}_n_{kind}", ctypes.c_longlong)()
        if n != len(specs):
            raise ArtifactError(f"{so_path}: {fname} has {n} {kind}puts, its manifest lists {len(specs)}: regenerate it")
        sparsity = sym(f"{fname}_sparsity_{kind}", _int_p, [ctypes.c_longlong])
        for k, spec in enumerate(specs):
            shape = [int(d) for d in spec["shape"]]
            want = (shape[0], shape[1] if len(shape) > 1 else 1)
            got = _shape_of(sparsity(k), spec["name"], so_path)
            if got != want:
                raise ArtifactError(f"{so_path}: {kind}put {spec['name']!r} is {got[0]} x {got[1]}, its manifest says "
                                    f"{want[0]} x {want[1]}: regenerate it")
    sizes = [ctypes.c_longlong() for _ in range(4)]
    if sym(f"{fname}_work")(*[ctypes.byref(x) for x in sizes]) != 0:
        raise ArtifactError(f"{so_path}: {fname}_work failed: regenerate it")
    work = dict(zip(("sz_arg", "sz_res", "sz_iw", "sz_w"), (x.value for x in sizes)))
    if work["sz_arg"] < len(manifest["inputs"]) or work["sz_res"] < len(manifest["outputs"]) or min(work.values()) < 0:
        raise ArtifactError(f"{so_path}: implausible work sizes {work}: regenerate it")
    return sym(fname), work
