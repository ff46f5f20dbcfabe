"""``python -m casadi_delassus ARGS`` for the tests without a new interpreter's start-up (imports were most of
a CLI test's CPU: yourdfpy with trimesh and scipy, casadi, numpy): each command runs in a process that
multiprocessing's fork server forks from its state after importing PRELOAD once (a clean process, never the
threaded pytest worker).

The child is what ``python -m`` starts: the working directory ``cwd``, ``os.environ`` replaced by ``env`` (the
C-level environment with it, so compilers the command starts get it), ``sys.argv`` and ``sys.path[0]`` as -m
sets them, stdin from /dev/null and stdout/stderr redirected at the descriptor level (a compiler's output and C
writes are captured; neither is a terminal, as with pipes), the package's __main__ run as -m runs it, and
Python's exit status (SystemExit's code; an uncaught exception: its traceback and 1).

What is imported before ``env`` applies must not read it: none of the preloaded modules reads the environment or
the working directory at import (the robot registry's folder, CC, the forced -O level and the cache folders are
read when called, and no cache of the package is filled by importing it).  Variables only the interpreter's start
reads (PYTHON*) cannot apply to a forked child, so an ``env`` that changes them is refused: such a test starts a
real interpreter.

multiprocessing keeps one fork server per process, the one casadi_delassus/executor.py's pool also uses: the first to
start it sets what it preloads.  Where a test ran the pool in the pytest worker first, a command imports the rest
itself: slower, the same result."""
from __future__ import annotations

import atexit
import multiprocessing
import os
import runpy
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

PRELOAD = ["casadi_delassus.cli", "yourdfpy", __name__]
TESTS = Path(__file__).resolve().parent
_SERVER = multiprocessing.get_context("forkserver")


def run_cli(*args, env=None, cwd=None, timeout=None):
    """subprocess.run([sys.executable, "-m", "casadi_delassus", *map(str, args)], capture_output=True, text=True,
    env=env, cwd=cwd, timeout=timeout), forked from the preloaded server: a CompletedProcess, or TimeoutExpired
    once the child is killed."""
    return run_module("casadi_delassus", *args, env=env, cwd=cwd, timeout=timeout)


def run_module(module, *args, env=None, cwd=None, timeout=None):
    """``python -m module ARGS`` so (run_cli's, for any module)."""
    argv = [str(a) for a in args]
    command = [sys.executable, "-m", module, *argv]
    env = dict(os.environ if env is None else env)
    if _startup_settings(env) != _startup_settings(os.environ):
        raise ValueError("PYTHON* variables act at an interpreter's start: run this command in a real subprocess")
    _SERVER.set_forkserver_preload(PRELOAD)
    with tempfile.TemporaryDirectory(prefix="cli_runner_") as tmp:
        out, err = Path(tmp, "stdout"), Path(tmp, "stderr")
        out.touch()
        err.touch()
        child = _SERVER.Process(target=_child, args=(module, argv, os.fspath(cwd or os.getcwd()), env, out, err))
        child.start()
        child.join(timeout)
        if child.exitcode is None:
            child.kill()
            child.join()
            raise subprocess.TimeoutExpired(command, timeout, out.read_text(), err.read_text())
        return subprocess.CompletedProcess(command, child.exitcode, out.read_text(), err.read_text())


def _startup_settings(env):
    return {k: v for k, v in env.items() if k.startswith("PYTHON")}


def _child(module, argv, cwd, env, out, err):
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    # multiprocessing already made sys.stdin read /dev/null; descriptor 0 is what C code and subprocesses read
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, out, os.O_WRONLY), (2, err, os.O_WRONLY)):
        _redirect(fd, path, flags)
    sys.argv = ["-m", *argv]
    # -m puts the working directory first; the folders pytest put on the worker's path are not there
    sys.path[:] = [cwd, *(p for p in sys.path if p and not Path(p).resolve().is_relative_to(TESTS))]
    status = _exit_status(module)
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _redirect(fd, path, flags):
    opened = os.open(path, flags)
    os.dup2(opened, fd)
    os.close(opened)


def _exit_status(module):
    """Run ``module`` (a package: its __main__) as -m does; the status the interpreter would exit with."""
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1
    return 0
