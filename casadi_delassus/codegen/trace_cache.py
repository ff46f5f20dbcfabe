"""Traced functions kept on disk by what determines them, so that ``count`` then ``generate``
(two processes) trace a big model once: the casadi.Function serialised by CasADi
(``Function.serialize``) in the cache folder ``traces`` (runtime/cache_dirs.py), named by the sha256 of the package's source, CasADi's
version, the robot, the constraints, the algorithm, cse and osim.  Only traces that took
longer than KEEP_AFTER_S are kept (a quick one costs less than its file), and every traced function's
instruction count beside (``-a auto`` weighs each candidate algorithm by it); the least recently used
removed beyond MAX_BYTES or MAX_ENTRIES, and a file is written under a temporary name and moved in, so readers never see half of one.

An entry is checked before CasADi reads it: its first line holds the sha256 of its key and the
serialised text after it (:func:`seal`).  CasADi's deserialiser trusts its input (one character
changed can crash the process or give another function), so an entry that does not match (a
damaged file, a truncated one, another key's entry copied over it) is removed and traced again."""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path

import casadi as ca

from ..version import __version__
from ..runtime.cache_dirs import cache_dir, private_folder

KEEP_AFTER_S = 1.0
HEADER = b"casadi_delassus trace sha256="
MAX_BYTES = 512 * 2 ** 20       # the least recently used traces go beyond this
MAX_ENTRIES = 20_000            # and beyond this many files (counts are small)


@functools.lru_cache(maxsize=1)
def source_hash():
    """Hash of the package's own code, templates and C headers: editing an algorithm invalidates the
    caches (generated files, traces); read once per process."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for p in sorted([*root.rglob("*.py"), *root.rglob("*.j2"), *root.rglob("*.h")]):
        h.update(p.relative_to(root).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def key(robot, constraints, algorithm, cse, osim):
    """The file name of a trace: what the traced function depends on (not its name)."""
    data = {"source": source_hash(), "version": __version__, "casadi": ca.__version__, "robot": robot.describe(),
            "constraints": constraints.describe(), "algorithm": algorithm, "cse": cse, "osim": osim}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def _folder():
    folder = cache_dir("traces")
    return folder if private_folder(folder) else None


def seal(trace_key, text):
    """The bytes of an entry: HEADER, the sha256 of ``trace_key`` and ``text`` (the serialised
    function), a newline, then ``text``: an entry of another key never matches."""
    body = text.encode()
    return HEADER + _digest(trace_key, body) + b"\n" + body


def _digest(trace_key, body):
    return hashlib.sha256(trace_key.encode() + b"\n" + body).hexdigest().encode()


def _unsealed(trace_key, data):
    """The serialised text of the entry ``data`` (bytes) if it is the sealed entry of
    ``trace_key``, else None."""
    head, _, body = data.partition(b"\n")
    if head != HEADER + _digest(trace_key, body):
        return None
    try:
        return body.decode()
    except UnicodeDecodeError:
        return None


def load(trace_key, name):
    """The cached function of ``trace_key`` under the name ``name``, or None (nothing cached, or
    an entry that fails its check: removed, so that the trace is stored again)."""
    folder = _folder()
    path = folder / f"{trace_key}.casadi" if folder else None
    if path is None or not path.is_file():
        return None
    try:
        text = _unsealed(trace_key, path.read_bytes())
        f = None if text is None else ca.Function.deserialize(text)
    except (OSError, RuntimeError):
        f = None            # unreadable, or sealed but not read by this CasADi
    if f is None:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)
        return None
    with contextlib.suppress(OSError):
        os.utime(path)      # recently used: kept longest (_prune)
    if f.name() == name:
        return f
    x = f.sx_in()
    return ca.Function(name, x, f.call(x), f.name_in(), f.name_out())


def store(trace_key, f, seconds):
    """Keep ``f`` under ``trace_key`` when tracing it took longer than KEEP_AFTER_S."""
    folder = _folder()
    if folder is not None and seconds > KEEP_AFTER_S:
        _write(folder / f"{trace_key}.casadi", seal(trace_key, f.serialize()))


def load_count(trace_key):
    """The instruction count kept for ``trace_key``'s function, or None: ``-a auto`` weighs every candidate
    algorithm by its count, and a quick trace (not kept whole) costs more than reading its count."""
    folder = _folder()
    try:
        text = _unsealed(trace_key, (folder / f"{trace_key}.count").read_bytes()) if folder else None
    except OSError:
        return None
    return int(text) if text is not None and text.isdigit() else None


def store_count(trace_key, instructions):
    """Keep the instruction count of ``trace_key``'s function, whatever its trace took."""
    folder = _folder()
    if folder is not None:
        _write(folder / f"{trace_key}.count", seal(trace_key, str(int(instructions))))


def _write(path, data):
    """``data`` moved in as ``path`` in one step; a full or read-only cache only costs the next run a trace."""
    try:
        with tempfile.NamedTemporaryFile("wb", dir=path.parent, suffix=".tmp", delete=False) as tmp:
            tmp.write(data)
        os.replace(tmp.name, path)
        _prune(path.parent)
    except OSError:
        pass


def _prune(folder):
    """Remove the least recently used entries (traces and counts) until the folder holds at most MAX_BYTES and
    MAX_ENTRIES (the one just stored stays, whatever its size)."""
    files = sorted(((st.st_mtime, st.st_size, p) for pattern in ("*.casadi", "*.count")
                    for p in folder.glob(pattern) for st in (p.stat(),)), reverse=True)
    total = 0
    for k, (_, size, path) in enumerate(files):
        total += size
        if (total > MAX_BYTES or k >= MAX_ENTRIES) and k:
            path.unlink(missing_ok=True)
