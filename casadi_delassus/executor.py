"""Independent jobs run where they fit: in this process, on a pool of local processes (all
cores by default), or on a Dask cluster.  The modes of a contact-mode library
(casadi_delassus/contact_modes/), ``check registry`` and the op-count studies all go through
:func:`run`.

Local pool.  Tracing an algorithm is CPU-bound Python (threads would share one interpreter)
and CasADi does not survive ``fork`` of a threaded process, so jobs run in processes that a
``forkserver`` (``spawn`` where there is none) starts: the server imports this package once,
single-threaded, and forks each worker from that clean state.  A worker ignores SIGINT (the
parent decides: a Ctrl-C at a terminal reaches the whole process group) and turns SIGTERM
into an exception inside the running job, so a job's ``finally`` clauses and temporary-folder
cleanup run (runtime/artifact.py) and the worker then exits.  On an interrupt (Ctrl-C,
SIGTERM) the parent cancels what has not started and sends SIGTERM to its workers.  A worker
whose parent is gone (SIGKILL) notices at once (multiprocessing's parent sentinel) and stops
the same way.

Dask.  With ``client`` (a ``distributed.Client``) every job is a task on the cluster; the
job's function and arguments are pickled to the worker, its result comes back to this process.
Jobs must therefore be module-level functions of an importable module with picklable arguments
and results.

Failures.  A failing job does not stop the others (what they finish is kept); when all are
done, :func:`run` raises the first failure (in job order) with the job's label in front, as
the DelassusError subclass it was (other exceptions become a DelassusError naming their type).
"""
from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import socket
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable

from .runtime.batch import cores
from .errors import DelassusError

BROKEN = ("a worker process died (killed, out of memory, or -- when this runs from a script -- the script's "
          "code is not under `if __name__ == \"__main__\":`, which every worker re-imports); jobs=1 runs in this process")
# imported once by the forkserver, so that a worker starts with them loaded
PRELOAD = ["casadi_delassus.api"]


@dataclass
class Job:
    """``fn(*args)``, named ``label`` in progress lines and errors."""
    label: str
    fn: Callable
    args: tuple = field(default_factory=tuple)


def where(workers=None, client=None):
    """How jobs will run, in words: 'this process', '2 local processes', 'Dask cluster tcp://…'."""
    if client is not None:
        return f"Dask cluster {client.scheduler.address} ({len(client.scheduler_info()['workers'])} workers)"
    n = workers or cores()
    return "this process" if n == 1 else f"{n} local processes"


def run(jobs, workers=None, client=None, on_done=None, quiet_workers=False):
    """Run ``jobs`` (a list of Job) and return their results in job order.

    ``client``: a Dask ``distributed.Client`` (then ``workers`` is ignored); else ``workers``
    local processes (default: :func:`cores`; 1 runs the jobs one by one in this process).
    ``on_done(index, result)`` is called in this process as each job succeeds, in the order
    they finish.  ``quiet_workers`` turns off the workers' own progress lines
    (casadi_delassus.progress), e.g. under a progress bar."""
    jobs = list(jobs)
    results, failures = [None] * len(jobs), {}

    def finished(i, outcome, ok):
        if ok:
            results[i] = outcome
            if on_done is not None:
                on_done(i, outcome)
        else:
            failures[i] = outcome

    n = workers or cores()
    if client is not None:
        _run_dask(client, jobs, finished)
    elif n == 1 or len(jobs) <= 1:
        for i, job in enumerate(jobs):
            try:
                outcome, ok = job.fn(*job.args), True
            except Exception as exc:            # noqa: BLE001 -- reported with its label below
                outcome, ok = exc, False
            finished(i, outcome, ok)
    else:
        _run_pool(min(n, len(jobs)), jobs, finished, quiet_workers)
    if failures:
        first = min(failures)
        raise _labelled(jobs[first].label, failures[first], len(failures) - 1)
    return results


def _labelled(label, exc, others):
    """``exc`` with ``label`` in front of its message (same class for a DelassusError)."""
    more = f" ({others} more failed)" if others else ""
    if isinstance(exc, DelassusError):
        try:
            out = type(exc)(f"{label}: {exc}{more}")
        except TypeError:
            out = DelassusError(f"{label}: {exc}{more}")
    else:
        out = DelassusError(f"{label} failed: {type(exc).__name__}: {exc}{more}")
    out.__cause__ = exc
    return out


# -- local processes ------------------------------------------------------------------------
class _Stop(BaseException):
    """SIGTERM inside a worker's job: unwinds the job (its cleanups run), then the worker exits."""


_busy, _stopping = threading.Event(), threading.Event()
STOP_GRACE_S = 30       # a job that has not unwound by then (stuck in C) is cut short


def _on_sigterm(signum, frame):
    if _stopping.is_set():
        # already unwinding: a second _Stop would cut the job's cleanups short (the pool sends
        # SIGTERM to every worker again when the first of them exits)
        return
    _stopping.set()     # sticky: a bare `except:` in a library (CasADi's wrappers have some) may swallow _Stop
    if _busy.is_set():
        raise _Stop()
    os._exit(128 + signal.SIGTERM)


def _watch_parent():
    """Stop this worker when the process that started the pool is gone.  (Not os.getppid():
    a forkserver's workers are its children, and it outlives a killed parent while they run.)"""
    parent = multiprocessing.parent_process()
    if parent is not None:
        parent.join()               # waits on the parent's sentinel pipe: EOF once it exits
        # to the main thread itself: a signal sent to the process may be taken by this thread,
        # leaving the main thread blocked in a read that nothing interrupts
        signal.pthread_kill(threading.main_thread().ident, signal.SIGTERM)
        time.sleep(STOP_GRACE_S)
        os._exit(128 + signal.SIGTERM)


def _init_worker(quiet):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_sigterm)
    threading.Thread(target=_watch_parent, daemon=True).start()
    if quiet:
        from . import progress
        progress.quiet()


def _call(fn, args):
    """A job inside a worker; an exception that cannot be pickled comes back as a DelassusError."""
    _busy.set()
    try:
        return fn(*args)
    except _Stop:
        os._exit(128 + signal.SIGTERM)
    except Exception as exc:
        try:
            pickle.dumps(exc)
        except Exception:                       # noqa: BLE001
            raise DelassusError(f"{type(exc).__name__}: {exc}") from None
        raise
    finally:
        _busy.clear()
        if _stopping.is_set():                  # told to stop, and the job went on: stop now
            os._exit(128 + signal.SIGTERM)


def _context():
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
        return ctx
    return multiprocessing.get_context("spawn")


def _stop_workers(pool):
    """SIGTERM to every worker of ``pool`` (CPython keeps them in ``_processes``; Python 3.14's
    ``terminate_workers`` is the public form of this)."""
    for proc in list((getattr(pool, "_processes", None) or {}).values()):
        try:
            proc.terminate()
        except (OSError, ValueError, AttributeError):
            pass


def _run_pool(n, jobs, finished, quiet):
    pool = ProcessPoolExecutor(max_workers=n, mp_context=_context(), initializer=_init_worker, initargs=(quiet,))
    futures = {}
    try:
        futures = {pool.submit(_call, job.fn, job.args): i for i, job in enumerate(jobs)}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in sorted(done, key=futures.get):
                exc = fut.exception()
                if isinstance(exc, BrokenProcessPool):
                    exc = DelassusError(BROKEN)
                finished(futures[fut], exc if exc is not None else fut.result(), exc is None)
    except BaseException:
        for fut in futures:
            fut.cancel()
        _stop_workers(pool)
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


# -- Dask -----------------------------------------------------------------------------------
def _run_dask(client, jobs, finished):
    from distributed import as_completed
    futures = {}
    try:
        futures = {client.submit(job.fn, *job.args, pure=False): i for i, job in enumerate(jobs)}
        for fut in as_completed(list(futures)):
            i = futures[fut]
            try:
                outcome, ok = fut.result(), True
            except Exception as exc:            # noqa: BLE001 -- the remote job's exception
                outcome, ok = exc, False
            finished(i, outcome, ok)
    except BaseException:
        client.cancel(list(futures))
        raise


# a Dask scheduler's first message (its handshake) is a few hundred bytes; a length prefix
# far above that is some other protocol's bytes, read as a length
MAX_HANDSHAKE_BYTES = 1 << 20
CONNECT_TIMEOUT_S = 10


def _tcp_host_port(address):
    """(host, port) of a tcp:// (or scheme-less) address, or None for other schemes."""
    scheme, _, rest = address.rpartition("://")
    if scheme not in ("", "tcp"):
        return None
    host, _, port = rest.rpartition(":")
    if not host or not port.isdigit():
        raise DelassusError(f"cannot connect to the Dask scheduler at {address}: expected tcp://HOST:PORT")
    return host.strip("[]"), int(port)


def _probe(address, timeout_s):
    """Check, before dask does, that a Dask scheduler answers at ``address``: the port takes the
    connection and the first 8 bytes the peer sends (a Dask scheduler speaks first) are a
    message length a handshake can have.  Dask itself retries a refused port until its timeout,
    waits forever on a peer that never speaks, and sizes a buffer from whatever 8 bytes arrive."""
    where = _tcp_host_port(address)
    if where is None:
        return
    fail = f"cannot connect to the Dask scheduler at {address}"
    try:
        with socket.create_connection(where, timeout=timeout_s) as sock:
            head = b""
            while len(head) < 8:
                chunk = sock.recv(8 - len(head))
                if not chunk:
                    raise DelassusError(f"{fail}: the peer closed the connection without a word (not a Dask scheduler?)")
                head += chunk
    except socket.timeout:
        raise DelassusError(f"{fail}: the peer took the connection but sent nothing in {timeout_s:g} s "
                            f"(not a Dask scheduler, or a stuck one)") from None
    except OSError as exc:
        raise DelassusError(f"{fail}: {exc.strerror or type(exc).__name__}") from None
    if int.from_bytes(head, "little") > MAX_HANDSHAKE_BYTES:
        raise DelassusError(f"{fail}: the peer speaks another protocol (its first bytes are {head!r}), not Dask's")


def _client(address, timeout_s):
    """``distributed.Client(address)``, given up after about ``timeout_s`` (a peer that passed
    the probe may still stall the handshake, which dask waits on without a timeout)."""
    from distributed import Client
    box = {}

    def make():
        try:
            box["client"] = Client(address, timeout=f"{timeout_s}s")
        except BaseException as exc:        # noqa: BLE001 -- reported below, on one line
            box["error"] = exc
    thread = threading.Thread(target=make, daemon=True)
    thread.start()
    thread.join(2 * timeout_s + 5)
    fail = f"cannot connect to the Dask scheduler at {address}"
    if thread.is_alive():
        raise DelassusError(f"{fail}: no handshake in {2 * timeout_s + 5:g} s")
    if "error" in box:
        exc = box["error"]
        raise DelassusError(f"{fail}: {str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__}")
    return box["client"]


@contextmanager
def connect(address, timeout_s=CONNECT_TIMEOUT_S):
    """A ``distributed.Client`` of the Dask scheduler at ``address`` (tcp://host:8786), closed
    after the ``with`` block; None when ``address`` is None.  One-line errors, within about
    ``timeout_s``, when dask is not installed, the port is closed, or the peer is silent or
    not a Dask scheduler."""
    if not address:
        yield None
        return
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise DelassusError("--cluster needs dask.distributed: pip install 'casadi_delassus[distributed]'") from None
    _probe(address, timeout_s)
    client = _client(address, timeout_s)
    try:
        yield client
    finally:
        client.close()


def in_order(emit):
    """An ``on_done`` for :func:`run` that calls ``emit(result)`` in job order: a result that
    arrives early waits for those before it (output identical to running one by one)."""
    ready, state = {}, {"next": 0}

    def done(i, result):
        ready[i] = result
        while state["next"] in ready:
            emit(ready.pop(state["next"]))
            state["next"] += 1
    return done
