"""Build a contact-mode library: plan the modes (plan.py), take the unchanged ones from the
cache, generate the others as jobs of the executor (casadi_delassus/executor.py: this
process, all local cores, or a Dask cluster), then write the dispatcher and the library
manifest.

Each mode is an ordinary generated function (codegen/build.py), written atomically where it
belongs as soon as it is done, so an interrupted build keeps every finished mode and the next
run builds only the missing ones; a mode that fails fails the build, naming it, once the
others are done.  The library manifest and the dispatcher are written last, after every mode
is there, under a lock file: a run into a folder that holds this library already keeps the
earlier modes still in the cache (``--modes all`` then ``--modes 0x1`` leaves all of them), and
runs at the same time into one folder merge one after another.

Local workers write their mode's files themselves (the same file system).  Dask workers build
in a temporary folder of their own and send the files back as bytes, which this process
writes through artifact.install (verified, then moved in with the manifest last): workers
need this package installed, not this file system.  Before any work is sent, each worker's
package sources and (for code built with -march=native) CPU are checked against this
process's: a mode built elsewhere must be the very function this machine would build.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .. import executor
from ..version import __version__
from ..api import DEFAULT_OUT, constraint_set, default_constraints
from ..constraints import ConstraintSet
from ..runtime import artifact
from ..codegen.build import DEFAULT_CFLAGS, NATIVE, build, find_compiler, host_cpu, source_hash
from ..errors import ArtifactError, DelassusError, OutputError
from ..model import load_robot
from ..progress import Bar
from .dispatch import LIBRARY_FORMAT, render_dispatcher
from .modes import parse_modes
from .plan import EMPTY_VALUES, kind_of, library_folder, library_io, library_name, output_map, plan_modes


@dataclass
class ModeTask:
    """Everything a worker needs to generate one mode (picklable; the robot travels with it)."""
    robot: object
    specs: list
    algorithm: str
    scenario: str
    model: str
    folder: str | None        # where to write; None: build in a temporary folder and return the bytes
    cflags: tuple
    cc: str | None
    cse: bool
    osim: bool
    force: bool


def build_mode(task):
    """A worker's job: generate and compile one mode; returns {"seconds"} and, when the task
    has no folder, {"files": {ext: bytes}}."""
    t0 = time.perf_counter()
    cs = ConstraintSet.parse_or_empty(task.robot, task.specs)
    args = dict(cflags=task.cflags, cc=task.cc, cse=task.cse, osim=task.osim, model=task.model)
    if task.folder is not None:
        build(task.robot, cs, task.algorithm, task.folder, task.scenario, force=task.force, **args)
        return {"seconds": time.perf_counter() - t0}
    with tempfile.TemporaryDirectory(prefix="casadi_delassus-mode-") as tmp:
        path = build(task.robot, cs, task.algorithm, tmp, task.scenario, force=True, **args)
        files = {ext: path.with_suffix("." + ext).read_bytes() for ext in (*artifact.FILE_KINDS, "json")}
    return {"seconds": time.perf_counter() - t0, "files": files}


def worker_identity():
    """What must agree between this process and a worker for their builds to be the same."""
    return {"version": __version__, "source": source_hash(), "cpu": hashlib.sha256(host_cpu().encode()).hexdigest()[:16]}


def check_workers(identities, native):
    """DelassusError naming the first worker whose package (or, for ``native`` code, CPU)
    differs from this process's; ``identities``: {worker address: worker_identity()}."""
    mine = worker_identity()
    for worker, theirs in sorted(identities.items()):
        if theirs["source"] != mine["source"] or theirs["version"] != mine["version"]:
            raise DelassusError(f"Dask worker {worker} runs another casadi_delassus ({theirs['version']}, sources "
                                f"{theirs['source'][:12]}) than this process ({mine['version']}, {mine['source'][:12]}): "
                                f"install the same version on the workers")
        if native and theirs["cpu"] != mine["cpu"]:
            raise DelassusError(f"Dask worker {worker} has another CPU than this machine: code it builds with "
                                f"-march=native may not run here; build with --cflags auto-portable")
    if not identities:
        raise DelassusError("the Dask cluster has no workers")


def _uses_native(cflags):
    return "auto" in cflags or NATIVE in cflags


def _mode_record(mode, lib_folder, outputs, reused):
    """The library manifest's entry of a mode (its function's manifest verified first)."""
    record = {"mask": mode.mask, "name": mode.name, "active": mode.specs, "m": mode.m}
    if mode.algorithm is None:
        return record | {"algorithm": None, "function": None, "instructions": 0, "flops": 0, "manifest": None,
                         "inputs": [], "outputs": [None] * len(outputs), "constants": _constants(outputs, [None] * len(outputs)),
                         "reused": False}
    m = artifact.verify(mode.manifest_path)
    if m.get("hash") != mode.key or m.get("function") != mode.function:
        raise ArtifactError(f"{mode.manifest_path} is not the function planned for {mode.label} (another cache key: "
                            f"were this package's sources or the compiler changed during the build?): rebuild the library")
    names = [i["name"] for i in m["inputs"]]
    if len(names) != len(mode.inputs) or any(a != b for a, b in zip(names, mode.inputs) if not a.startswith("K_")):
        raise ArtifactError(f"{mode.manifest_path}: inputs {names} are not the library's {mode.inputs}")
    mapped = output_map(outputs, m["outputs"])
    return record | {
        "algorithm": m.get("auto", {}).get("chosen", m["algorithm"]), "requested": m["algorithm"],
        "function": m["function"], "instructions": m["op_count"]["instructions"], "flops": m["op_count"]["flops"],
        "manifest": Path(os.path.relpath(mode.manifest_path, lib_folder)).as_posix(), "manifest_sha256": m["manifest_sha256"],
        "so_bytes": m["so_bytes"], "timings_s": m["timings_s"], "cflags": m["cflags"],
        "inputs": mode.inputs, "function_inputs": names, "function_outputs": [o["name"] for o in m["outputs"]],
        "outputs": mapped, "constants": _constants(outputs, mapped),
        "work": {k: m[k] for k in ("sz_arg", "sz_res", "sz_iw", "sz_w")}, "reused": reused}


def _constants(outputs, mapped):
    """{library output: value} of the outputs a mode does not compute that are not empty."""
    return {o["name"]: EMPTY_VALUES[o["name"]] for o, got in zip(outputs, mapped)
            if got is None and o["name"] in EMPTY_VALUES}


def _write(lib_folder, lib, manifest):
    """The dispatcher's .c/.h and the library manifest, atomically, the manifest last."""
    with artifact.build_folder(lib_folder, lib) as tmp:
        for name, text in render_dispatcher(manifest).items():
            (tmp / name).write_text(text)
        artifact.seal(manifest, tmp, lib, kinds=("c", "h"), what="library")
        (tmp / f"{lib}.json").write_text(json.dumps(manifest, indent=1))
        return artifact.move_in(tmp, lib_folder, lib, kinds=("c", "h"))


@contextmanager
def _locked(lib_folder, lib):
    """The library's lock (a file beside its manifest): runs into one folder read the earlier
    manifest and write theirs one at a time, so that none loses the modes of another."""
    try:
        lib_folder.mkdir(parents=True, exist_ok=True)
        fh = open(lib_folder / f".{lib}.lock", "a")
    except OSError as exc:
        raise OutputError(f"cannot write the library folder {lib_folder}: {exc.strerror or exc}") from None
    with fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def _earlier_masks(lib_folder, lib, cs, cse):
    """The masks of the manifest of this library already in ``lib_folder`` (same constraints
    and cse; none when there is none or it is damaged): a run for fewer modes adds its modes
    to them instead of replacing the library with a narrower one."""
    try:
        m = artifact.verify(lib_folder / f"{lib}.json", kinds=("c", "h"), what="library")
        if [c["spec"] for c in m["constraints"]] != list(cs.specs) or m["cse"] != cse:
            return set()
        return {mask for mask in (int(md["mask"]) for md in m["modes"]) if 0 <= mask < 1 << len(cs.specs)}
    except (DelassusError, KeyError, TypeError, ValueError):
        return set()


def build_library(robot, constraints=None, algorithm="auto", modes="all", out_dir=DEFAULT_OUT, cflags=DEFAULT_CFLAGS,
                  cc=None, cse=True, osim=False, force=False, name=None, jobs=None, client=None):
    """Generate a contact-mode library (casadi_delassus/contact_modes/); returns the path of its
    manifest.  ``jobs``: local processes (default all cores, 1 = this process); ``client``:
    a Dask ``distributed.Client`` to build on instead."""
    robot = load_robot(robot)
    cs, scenario = constraint_set(robot, constraints if constraints is not None else default_constraints(robot), name)
    kind_of(algorithm)
    masks = parse_modes(modes, cs.specs)
    model = artifact.model_name(robot, name)
    lib = library_name(model, scenario, algorithm, osim)
    lib_folder = library_folder(out_dir, model, scenario, algorithm, osim)
    inputs, outputs = library_io(robot, cs, algorithm, osim)
    cflags = tuple(cflags)
    compiler = find_compiler(cc)
    planned = plan_modes(robot, cs, scenario, model, algorithm, osim, masks, lib_folder, cflags, compiler, cse, inputs)
    todo = [md for md in planned if md.algorithm and (force or not artifact.cached(md.manifest_path, md.key))]
    if client is not None:
        check_workers(client.run(worker_identity), _uses_native(cflags))
    t0 = time.perf_counter()
    functions = [md for md in planned if md.algorithm]
    bar = Bar(len(planned), "modes", done=len(planned) - len(todo))
    bar.say(f"{lib}: {len(planned)} modes ({len(functions)} functions), {len(functions) - len(todo)} from the cache"
            + (f", building {len(todo)} on {executor.where(jobs, client)}" if todo else ""))
    ship = client is not None

    def done(i, result):
        md = todo[i]
        if ship:
            artifact.install(md.folder, md.stem, result["files"], check=lambda m: _check_shipped(m, md))
        bar.advance(f"{md.name} built ({', '.join(md.specs) or 'no constraints'}; {result['seconds']:.1f} s)")

    tasks = [executor.Job(md.label, build_mode, (ModeTask(robot, md.specs, md.algorithm, md.scenario, model,
                                                          None if ship else str(md.folder), cflags, cc, cse,
                                                          osim and bool(md.specs), force),))
             for md in todo]
    try:
        executor.run(tasks, workers=jobs, client=client, on_done=done, quiet_workers=bar.tty)
    finally:
        bar.close()
    built = {md.mask for md in todo}
    with _locked(lib_folder, lib):
        kept = [md for md in plan_modes(robot, cs, scenario, model, algorithm, osim,
                                        sorted(_earlier_masks(lib_folder, lib, cs, cse) - set(masks)), lib_folder,
                                        cflags, compiler, cse, inputs)
                if not md.algorithm or artifact.cached(md.manifest_path, md.key)]
        planned = sorted(planned + kept, key=lambda md: md.mask)
        functions = [md for md in planned if md.algorithm]
        manifest = {
            "library": lib, "library_format": LIBRARY_FORMAT, "kind": kind_of(algorithm), "algorithm": algorithm,
            "osim": osim, "cse": cse, "cflags": list(cflags), "robot": robot.name, "model_name": model, "scenario": scenario, "source": robot.source,
            "nq": robot.nq, "nv": robot.nv, "q_layout": robot.q_layout(), "q_convention": robot.q_convention,
            "constraints": [{"bit": i, "spec": c.spec, "rows": c.rows} for i, c in enumerate(cs.constraints)],
            "inputs": inputs, "outputs": outputs,
            "modes": [_mode_record(md, lib_folder, outputs, md.mask not in built) for md in planned],
            "build": {"seconds": round(time.perf_counter() - t0, 2), "where": executor.where(jobs, client),
                      "functions": len(functions), "built": len(todo), "reused": len(functions) - len(todo),
                      "kept": len(kept)},
            "version": __version__,
        }
        return _write(lib_folder, lib, manifest)


def _check_shipped(manifest, mode):
    if manifest.get("hash") != mode.key or manifest.get("function") != mode.function:
        raise ArtifactError(f"{mode.label} came back as {manifest.get('function')!r} with another cache key than "
                            f"this machine computes: the worker's compiler or options differ")


__all__ = ["build_library", "build_mode", "ModeTask", "worker_identity", "check_workers"]
