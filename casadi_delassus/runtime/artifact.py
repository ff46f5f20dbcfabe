"""Generated files on disk: their names, their integrity record, and the temporary folders
they are built in.

Names.  A function's files are ``<folder>/<stem>.{c,h,so,json}`` with the folder
``<model>/<scenario>`` (each component from codegen/escape.py's sanitisers) and the stem the
algorithm's name (then ``-single`` when it computes in float), ``<algorithm>-osim`` when Λ is an output too (a hyphen never occurs in an
algorithm name, so no stem of one algorithm is another's), ``<algorithm>_<stage>`` for a
stage, ``<algorithm>-<derivative>[-<wrt>]`` for a derivative (jvp, vjp, jacobian; ``<wrt>``
names the inputs when they are not all of them, see :func:`wrt_part`).  The C function is
``cd_<model>_<scenario>_<algorithm>`` plus ``_OSIM`` (algorithm names are lower case),
``_<stage>`` or ``_<derivative>[_<wrt>]`` (no stage is named jvp, vjp or jacobian); with
CasADi's derivative functions in the .so, ``<algorithm>-casadi`` and ``_CASADI``.

Integrity.  Every compiled artifact (a generated function, a contact-mode library, a CUDA
function, the contact step, rollout, MuJoCo step and step derivatives) has a manifest sealed
by :func:`seal`: what it is (``artifact``, one of ARTIFACTS), the size and sha256 of its files
(.c, .h, .so, .cu: ``files``) and the sha256 of its own content (``manifest_sha256``), which
covers its cache key (``hash``).  :func:`verify` recomputes all of them before anything is
loaded or taken from the cache (:func:`cached`), and runtime/library.open_sealed maps a .so
only through it: a truncated .so, a .so or .c replaced or rebuilt by hand, a deleted header or
an edited manifest is refused (a cache rebuilds it, ``cd.load`` raises a one-line error)
instead of being mapped into the process.  The record detects damage and stale mixtures of
files; it is not a signature: whoever can write the folder can write a new .so too.

Temporary folders.  Files are built in ``.tmp-<host>-<pid>-<time>-<stem>-XXXX`` inside the
output folder and moved into place.  A run that is killed (SIGKILL) cannot remove its own,
so every run removes the stale ones it finds where it writes: those of a dead process on
this host, and any older than STALE_AFTER_S.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from ..errors import ArtifactError, DelassusError, OutputError
from ..names import PART_LIMIT, ident_part, is_plain, path_part, readable, short_hash
from ..registry import VECTOR_INPUTS

OSIM_STEM = "-osim"
OSIM_FUNCTION = "_OSIM"
CASADI_STEM = "-casadi"         # with CasADi's derivative functions in the .so
CASADI_FUNCTION = "_CASADI"
CASADI_ORDER = 2                # their order (derivatives.casadi_companions; manifest: casadi_derivative_order)
SINGLE_STEM = "-single"         # computed in float (codegen/precision.py)
SINGLE_FUNCTION = "_SINGLE"
FILE_KINDS = ("c", "h", "so")
_MODEL = re.compile(r"[A-Za-z0-9]+(?:_[A-Za-z0-9]+)*")
MANIFEST_FORMAT = 2
# what a sealed manifest describes (its "artifact"), as errors name it
ARTIFACTS = {"function": "generated function", "library": "contact-mode library", "cuda": "CUDA function",
             "step": "contact step", "rollout": "rollout", "mjsoft": "MuJoCo contact step", "mjrollout": "MuJoCo rollout",
             "step_derivatives": "contact step's derivatives"}
BUILT_KINDS = ("c", "so")       # the files of a compiled C library that its seal covers (codegen/build.py build_cached)


# -- names ----------------------------------------------------------------------------------
def wrt_part(wrt, inputs):
    """The name part of a derivative with respect to the inputs ``wrt`` of a function with
    ``inputs``: None for all of them, the names joined by "_" when each is q or a vector input
    (none holds a "_", so the join is injective), else a hash-marked part (K_<link> names hold
    "_"; names.ident_part keeps it injective and never plain)."""
    wrt = list(wrt)
    if wrt == list(inputs):
        return None
    if all(w == "q" or w in VECTOR_INPUTS for w in wrt):
        return "_".join(wrt)
    return ident_part("+".join(wrt))


def _derivative_suffix(derivative, sep):
    """``derivative``: {"mode", "wrt", "inputs"} (the manifest's record) -> sep + mode [+ sep + wrt]."""
    part = wrt_part(derivative["wrt"], derivative["inputs"])
    return sep + ident_part(derivative["mode"]) + (sep + part if part else "")


def stem(algorithm, osim=False, stage=None, derivative=None, casadi=False, precision="double"):
    return _stem(algorithm, osim, stage, derivative, casadi) + (SINGLE_STEM if precision == "single" else "")


def _stem(algorithm, osim, stage, derivative, casadi):
    if derivative:
        return algorithm + _derivative_suffix(derivative, "-")
    if casadi:
        return algorithm + CASADI_STEM
    return f"{algorithm}_{stage}" if stage else f"{algorithm}{OSIM_STEM}" if osim else algorithm


def model_name(robot, name=None):
    """The model's name in folder and C names: ``name`` if given (letters and digits joined by
    single underscores); for a model file or text, the model's own name (``<robot name>``,
    ``<mujoco model>``, not the file's, which packages often call model.urdf or robot.xml)
    plus a hash of what the dynamics reads from it (Robot.fingerprint: moving or copying the
    file keeps its C names; two files with one name and other inertias get two folders); else
    the robot's name (registry, synthetic) through the identifier sanitiser.  A base other than
    the model's own (``robot.base_variant``, model.load_robot) adds ``_fixed`` or ``_floating``
    before the hash, so fixed and floating builds of one model never share files; coupled mimic
    joints (``robot.coupling``) add ``_mimic``."""
    if name is not None:
        if not is_plain(name):
            raise DelassusError(f"name {name!r}: use letters and digits joined by single underscores "
                                f"(at most {PART_LIMIT} characters, e.g. anymal_c)")
        return name
    variant = getattr(robot, "base_variant", None)
    mimic = "mimic" if getattr(robot, "coupling", None) is not None else None
    tag = "".join(f"_{t}" for t in (variant, mimic) if t)
    if not (getattr(robot, "model_file", None) or getattr(robot, "model_sha256", None) or tag):
        return ident_part(robot.name)
    readable_part = readable(robot.name)[:PART_LIMIT - len(tag)].rstrip("_")
    return f"{readable_part}{tag}_h{short_hash(robot.fingerprint() + tag)}"


def _checked_model(model):
    """A model name as :func:`model_name` makes them (a manifest's is data: checked again)."""
    if not (isinstance(model, str) and len(model) <= PART_LIMIT + 10 and _MODEL.fullmatch(model)):
        raise ArtifactError(f"model name {model!r} is not one casadi_delassus makes")
    return model


def function_name(model, scenario, algorithm, osim=False, stage=None, derivative=None, casadi=False, precision="double"):
    """The C name of a generated function for the model name ``model`` (:func:`model_name`);
    stage functions are the traced function's name plus ``_<stage>`` (codegen/staging.py),
    derivatives plus ``_<mode>[_<wrt>]`` (codegen/derivatives.py; ``derivative`` its record),
    a function with CasADi's derivative functions beside it plus ``_CASADI``; a single-precision
    one then ``_SINGLE``."""
    suffix = SINGLE_FUNCTION if precision == "single" else ""
    return _function_name(model, scenario, algorithm, osim, stage, derivative, casadi) + suffix


def _function_name(model, scenario, algorithm, osim, stage, derivative, casadi):
    base = "_".join(["cd", *_prefix(model, scenario), ident_part(algorithm)])
    if derivative:
        return base + _derivative_suffix(derivative, "_")
    if casadi:
        return base + CASADI_FUNCTION
    return f"{base}_{ident_part(stage)}" if stage else base + (OSIM_FUNCTION if osim else "")


def is_custom(scenario):
    """Whether a manifest's scenario names a list of specs (api.constraint_set: custom_<hash>,
    custom-<hash> before, "" under a user's name) rather than one of the robot's scenarios."""
    return scenario == "" or scenario.startswith(("custom_", "custom-"))


def _prefix(model, scenario):
    """[model, scenario] as C name parts; a custom constraint set under a name the user gave
    has the scenario "" (api.constraint_set): the name alone."""
    return [_checked_model(model), *([ident_part(scenario)] if scenario else [])]


def library_name(model, scenario):
    """The C package's library: lib<this>.a / .so."""
    return "_".join(["cd", *_prefix(model, scenario)])


def folder(out_dir, model, scenario):
    """``<out>/<model>/<scenario>``, or ``<out>/<model>`` for the scenario "" (see _prefix)."""
    base = Path(out_dir) / _checked_model(model)
    return base / path_part(scenario) if scenario else base


def expected_function(manifest):
    """The function name the manifest's own model, scenario, algorithm and variant give."""
    stage = manifest.get("stage")
    return function_name(manifest["model_name"], manifest["scenario"], manifest["algorithm"],
                         osim=bool(manifest.get("osim")), stage=stage["name"] if stage else None,
                         derivative=manifest.get("derivative"), casadi=bool(manifest.get("casadi_derivatives")),
                         precision=manifest.get("precision", {}).get("type", "double"))


# -- integrity ------------------------------------------------------------------------------
def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def self_hash(manifest):
    body = {k: v for k, v in manifest.items() if k != "manifest_sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def seal(manifest, folder_, file_stem, kinds=FILE_KINDS, what="function"):
    """Record that the manifest describes a ``what`` (ARTIFACTS), its files
    ``folder_/file_stem.{kinds…}`` and its own hash."""
    manifest["manifest_format"] = MANIFEST_FORMAT
    manifest["artifact"] = what
    manifest["files"] = {k: {"bytes": (Path(folder_) / f"{file_stem}.{k}").stat().st_size,
                             "sha256": sha256_file(Path(folder_) / f"{file_stem}.{k}")} for k in kinds}
    manifest["manifest_sha256"] = self_hash(manifest)
    return manifest


def verify(manifest_path, kinds=FILE_KINDS, what="function"):
    """The manifest at ``manifest_path`` after checking its own hash, that it describes a ``what``
    (a manifest from before ``artifact`` was recorded passes), and the size and sha256 of its
    files of ``kinds`` (what the caller requires, never what the manifest says it has);
    ArtifactError (one line) on any mismatch."""
    path = Path(manifest_path)
    try:
        manifest = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ArtifactError(f"cannot read manifest {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if not isinstance(manifest, dict) or "manifest_sha256" not in manifest or "files" not in manifest:
        raise ArtifactError(f"manifest {path} has no integrity record (written by an older casadi_delassus "
                            f"or not by casadi_delassus): regenerate it")
    if self_hash(manifest) != manifest["manifest_sha256"]:
        raise ArtifactError(f"manifest {path} was modified after it was written (its hash does not match): regenerate it")
    found = manifest.get("artifact", what)
    if found != what:
        name = ARTIFACTS.get(found) if isinstance(found, str) else None
        raise ArtifactError(f"{path} is the manifest of a {name or 'thing casadi_delassus does not make'}, "
                            f"not of a {ARTIFACTS[what]}")
    files = manifest["files"]
    for kind in kinds:
        _verify_file(path, path.with_suffix("." + kind), files.get(kind) if isinstance(files, dict) else None, kind)
    return manifest


def _verify_file(path, p, record, kind):
    """Check the file ``p`` against its ``record`` in the manifest at ``path``."""
    if not isinstance(record, dict):
        raise ArtifactError(f"manifest {path} does not record its .{kind} file: regenerate it")
    if not p.is_file():
        raise ArtifactError(f"{p} is missing (the manifest {path.name} records it): regenerate it")
    try:
        size = p.stat().st_size
        digest = sha256_file(p) if size == record.get("bytes") else None
    except OSError as exc:
        raise ArtifactError(f"cannot read {p}: {exc.strerror or exc}") from None
    if size != record.get("bytes") or digest != record.get("sha256"):
        raise ArtifactError(f"{p} is not the file its manifest records ({size:,} bytes, recorded "
                            f"{record.get('bytes')!r}; sha256 differs): regenerate it")


def cached(manifest_path, key, kinds=FILE_KINDS, what="function"):
    """Whether ``manifest_path`` holds the ``what`` built for the cache key ``key``, intact
    (:func:`verify`): what a cache may take instead of building again."""
    try:
        return verify(manifest_path, kinds, what).get("hash") == key
    except DelassusError:
        return False


def move_in(tmp, folder_, file_stem, kinds=FILE_KINDS):
    """Move ``tmp/file_stem.{kinds…}`` and then its manifest ``.json`` into ``folder_`` (os.replace:
    a reader sees the old files or the new ones, and never a manifest before its files)."""
    for ext in (*kinds, "json"):
        os.replace(Path(tmp) / f"{file_stem}.{ext}", Path(folder_) / f"{file_stem}.{ext}")
    return Path(folder_) / f"{file_stem}.json"


def install(folder_, file_stem, files, check=None):
    """Write generated files that arrived as bytes (``files``: {"c", "h", "so", "json": bytes},
    e.g. built on another machine) as ``folder_/file_stem.*``, the way the local build writes
    them: into this run's temporary folder, verified there (:func:`verify`, then ``check(manifest)``,
    which raises to refuse it), moved in with the manifest last.  Returns the manifest's path."""
    if not isinstance(files, dict) or set(files) != {*FILE_KINDS, "json"} or \
            not all(isinstance(v, bytes) for v in files.values()):
        raise ArtifactError(f"{file_stem}: expected the bytes of its .c, .h, .so and .json, got "
                            f"{sorted(files) if isinstance(files, dict) else type(files).__name__}")
    with build_folder(folder_, file_stem) as tmp:
        for ext, data in files.items():
            (tmp / f"{file_stem}.{ext}").write_bytes(data)
        manifest = verify(tmp / f"{file_stem}.json")
        if check is not None:
            check(manifest)
        return move_in(tmp, folder_, file_stem)


# -- temporary folders ----------------------------------------------------------------------
TEMP_PREFIX = ".tmp-"
STALE_AFTER_S = 6 * 3600
_TEMP = re.compile(r"\.tmp-([0-9a-f]{6})-(\d+)-(\d+)-")


def _host():
    return short_hash(socket.gethostname())[:6]


def make_temp(parent, file_stem):
    """A new temporary folder in ``parent`` (created with its parents), named after this process."""
    parent = Path(parent)
    prefix = f"{TEMP_PREFIX}{_host()}-{os.getpid()}-{int(time.time())}-{file_stem}-"
    for _ in range(10):        # a concurrent run may remove an empty folder it made (remove_empty)
        parent.mkdir(parents=True, exist_ok=True)
        try:
            return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
        except FileNotFoundError:
            continue
    return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:             # exists, owned by someone else
        return True
    return True


def is_stale(name, now=None):
    m = _TEMP.match(name)
    if not m:
        return False
    host, pid, started = m[1], int(m[2]), int(m[3])
    if (now or time.time()) - started > STALE_AFTER_S:
        return True
    return host == _host() and pid != os.getpid() and not _alive(pid)


def clean_stale(parent):
    """Remove the stale temporary folders in ``parent``; returns their names."""
    removed = []
    try:
        entries = list(Path(parent).iterdir())
    except OSError:
        return removed
    for p in entries:
        if p.name.startswith(TEMP_PREFIX) and is_stale(p.name) and p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p.name)
    return removed


def missing_folders(path):
    """The folders ``path`` needs that do not exist yet, deepest first."""
    path = Path(path)
    return [d for d in [path, *path.parents] if not d.exists()]


def remove_empty(folders):
    """Remove those of ``folders`` (deepest first) that are empty: what this run created and
    nobody has put anything in.  A folder another run writes to is never empty."""
    for d in folders:
        try:
            d.rmdir()
        except OSError:
            return


@contextmanager
def build_folder(parent, file_stem):
    """A temporary folder of this run in ``parent`` to build files in and move them out of
    with os.replace.  On any failure or interrupt it is removed, with the folders this run
    created while they are empty, and nothing else; an OSError (read-only, full disk)
    becomes a one-line OutputError.  Stale folders of killed runs in ``parent`` go too."""
    parent = Path(parent)
    created = missing_folders(parent)
    tmp = None
    try:
        tmp = make_temp(parent, file_stem)
        clean_stale(parent)
        yield tmp
    except BaseException as exc:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        remove_empty(created)
        if isinstance(exc, OSError):
            raise OutputError(f"cannot write to {parent}: {exc.strerror or exc}") from None
        raise
    shutil.rmtree(tmp, ignore_errors=True)
