"""Where independent jobs run (casadi_delassus/executor.py): a killed library build resumes
with only its missing modes and leaves no process or temporary folder behind; a Dask
cluster of worker processes builds a library whose files come back as bytes; `check` gives
the same table on one process and on a pool; modes and failures are named."""
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

import casadi_delassus as cd
from casadi_delassus import executor
from casadi_delassus.errors import ArtifactError, CompilerError, ConstraintError, DelassusError
from casadi_delassus.contact_modes import library
from casadi_delassus.contact_modes.build import check_workers, worker_identity
from casadi_delassus.verify.library_check import check_library
from casadi_delassus.contact_modes.modes import mode_name, parse_modes

FEET = ["FL_foot:3d", "FR_foot:3d", "RL_foot:3d", "RR_foot:3d"]


# -- modes ------------------------------------------------------------------------------------
def test_parse_modes(tmp_path):
    sole = ["l:3d@0.1,0.05,0", "l:3d@0.1,-0.05,0", "r:6d"]
    assert parse_modes("all", FEET) == list(range(16))
    assert parse_modes("2-of-4", FEET) == [3, 5, 6, 9, 10, 12]
    assert parse_modes(["0-of-4", "4-of-4", "0x5"], FEET) == [0, 5, 15]
    assert parse_modes(["FL_foot,RR_foot:3d", ["FR_foot"], "-", 0b0100], FEET) == [0, 2, 4, 9]
    assert parse_modes("l:3d@0.1,0.05,0,r", sole) == [5]
    listed = tmp_path / "modes.txt"
    listed.write_text("# stance phases\nFL_foot RR_foot\nFR_foot:3d, RL_foot:3d  # trot\n-\n0b1111\n")
    assert parse_modes(str(listed), FEET) == [0, 6, 9, 15]
    assert mode_name(5, 4) == "m5" and mode_name(5, 8) == "m05"
    for bad, why in (("l", "names 2 constraints"), ("3-of-2", "has 3 constraints, not 2"), ("x", "unknown constraint"),
                     (8, "bits beyond")):
        with pytest.raises(ConstraintError, match=why):
            parse_modes(bad, sole)
    with pytest.raises(ConstraintError, match="2\\^13 modes"):
        parse_modes("all", [f"a{i}:3d" for i in range(13)])
    listed.write_text("FL_foot\nFL_fot\n")
    with pytest.raises(ConstraintError, match="modes.txt:2: unknown constraint 'FL_fot'"):
        parse_modes(str(listed), FEET)


# -- the executor ---------------------------------------------------------------------------
def _fail(x):
    if x == 2:
        raise CompilerError("gcc exploded")
    if x == 3:
        raise ZeroDivisionError("bug")
    return x * x


@pytest.mark.parametrize("workers", [1, 2])
def test_failures_are_labelled_after_all_jobs_ran(workers):
    done = []
    jobs = [executor.Job(f"job {x}", _fail, (x,)) for x in range(5)]
    with pytest.raises(CompilerError, match=r"^job 2: gcc exploded \(1 more failed\)$"):
        executor.run(jobs, workers=workers, on_done=lambda i, r: done.append((i, r)))
    assert sorted(done) == [(0, 0), (1, 1), (4, 16)]
    with pytest.raises(DelassusError, match="job 3 failed: ZeroDivisionError: bug"):
        executor.run(jobs[3:], workers=workers)
    assert executor.run(jobs[:2] + jobs[4:], workers=workers) == [0, 1, 16]


def test_in_order_emits_in_job_order():
    seen = []
    done = executor.in_order(seen.append)
    for i, r in ((2, "c"), (0, "a"), (1, "b"), (3, "d")):
        done(i, r)
    assert seen == ["a", "b", "c", "d"]


def test_check_on_a_pool_prints_what_it_prints_alone(out_dir):
    cmd = [sys.executable, "-m", "casadi_delassus", "check", "go1", "--all-scenarios", "-a", "pv_osim", "--samples", "3",
           "-o", str(out_dir)]
    runs = [subprocess.run(cmd + ["--jobs", j], capture_output=True, text=True, timeout=600) for j in ("2", "1")]
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr[-2000:]
    without_seconds = [[line.rsplit(None, 1)[0] for line in r.stdout.splitlines()] for r in runs]
    # header, rule, 4F3 and 2F3 against numpy and pinocchio (go1 is a URDF: both oracles by default)
    assert without_seconds[0] == without_seconds[1] and len(without_seconds[0]) == 6
    assert runs[0].stderr.count("go1/") == runs[1].stderr.count("go1/") == 4


# -- interrupted builds -----------------------------------------------------------------------
def _marked(mark):
    """Pids of live processes whose environment holds ``mark`` (Linux /proc)."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                text = (d / "environ").read_bytes()
                state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if mark.encode() in text and state != "Z":
                pids.append(int(d.name))
    return pids


def _finished(out):
    return {p.parent.name: p.stat().st_mtime_ns for p in Path(out).rglob("m*/pv_osim.json")}


_TWICE = """
import os, shutil, signal, sys
from casadi_delassus import executor
from casadi_delassus.runtime import artifact
executor._init_worker(True)
remove = shutil.rmtree
def interrupted_rmtree(path, **kw):     # the pool's second SIGTERM lands while the first unwinds
    os.kill(os.getpid(), signal.SIGTERM)
    remove(path, **kw)
shutil.rmtree = interrupted_rmtree
def job():
    with artifact.build_folder(sys.argv[1], "f"):
        os.kill(os.getpid(), signal.SIGTERM)
executor._call(job, ())
"""


def test_a_second_sigterm_does_not_cut_the_cleanup_short(tmp_path):
    """When one worker exits on SIGTERM, ProcessPoolExecutor sends SIGTERM to every worker again
    (terminate_broken): a worker still removing its temporary folder must finish removing it."""
    p = subprocess.run([sys.executable, "-c", _TWICE, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 128 + signal.SIGTERM, p.stderr[-2000:]
    assert list(tmp_path.iterdir()) == []


# A C compiler that lets the first $CD_GATE_OPEN shared-library builds through and holds every
# later one until $CD_GATE_DIR/open exists: a signal sent once a known number of modes is done
# then finds the others still building, however slow or fast the machine (no sleep to race
# against); the held compilers then finish, as real ones still running at a signal would.
_GATED_CC = """#!/bin/sh
gcc "$@" || exit $?
case " $* " in *" -shared "*) ;; *) exit 0 ;; esac
i=0
while ! mkdir "$CD_GATE_DIR/$i" 2>/dev/null; do i=$((i + 1)); done
[ "$i" -lt "$CD_GATE_OPEN" ] && exit 0
t=0
while [ ! -e "$CD_GATE_DIR/open" ] && [ "$t" -lt 1200 ]; do sleep 0.05; t=$((t + 1)); done
"""


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="counts processes through /proc")
def test_killed_build_resumes_with_only_the_missing_modes(tmp_path):
    """10 modes (1 and 2 feet of go1's four) on 2 processes: SIGINT once 3 are done (the rest held
    at the compiler), SIGKILL once 2 more are, then a full run builds exactly the ones still missing."""
    mark = f"CD_KILL_TEST={uuid.uuid4().hex}"
    cc = tmp_path / "gated-cc"
    cc.write_text(_GATED_CC)
    cc.chmod(0o755)
    out = tmp_path / "lib"
    env = dict(os.environ, CD_KILL_TEST=mark.split("=")[1], CC=str(cc))
    # SIGINT as a terminal's Ctrl-C gives it, also where this test runs with SIGINT ignored (a
    # background job of a non-interactive shell), which the child would inherit
    cmd = [sys.executable, "-c", "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
           "runpy.run_module('casadi_delassus', run_name='__main__', alter_sys=True)",
           "library", "go1", "-s", "4F3", "-a", "pv_osim", "--cflags", "-O0",
           "--modes", "1-of-4", "--modes", "2-of-4", "-o", str(out), "--jobs", "2"]

    def interrupt(sig, builds, gate):
        after = len(_finished(out)) + builds      # the progress line counts cached modes as done
        gate.mkdir()
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             env=dict(env, CD_GATE_DIR=str(gate), CD_GATE_OPEN=str(builds)))
        try:
            for line in p.stderr:
                if (m := re.search(r"\] (\d+)/10 modes", line)) and int(m[1]) >= after:
                    break
            p.send_signal(sig)
        finally:
            (gate / "open").touch()
        p.communicate(timeout=60)           # the rest of stderr (workers hold it open until they stop)
        rc = p.returncode
        deadline = time.time() + 20
        while _marked(mark) and time.time() < deadline:
            time.sleep(0.2)
        assert _marked(mark) == [], f"processes left after {sig!r}"
        assert not list(out.rglob(".tmp-*")), f"temporary folders left after {sig!r}"
        return rc

    assert interrupt(signal.SIGINT, 3, tmp_path / "gate1") == 130
    first = _finished(out)
    assert 3 <= len(first) <= 5              # 3, and at most the 2 held when the signal came
    assert interrupt(signal.SIGKILL, 2, tmp_path / "gate2") == -signal.SIGKILL
    kept = _finished(out)
    assert set(first) <= set(kept) and len(first) + 2 <= len(kept) < 10
    assert all(kept[m] == t for m, t in first.items())
    (tmp_path / "gate3").mkdir()
    last = subprocess.run(cmd, capture_output=True, text=True, env=dict(env, CD_GATE_DIR=str(tmp_path / "gate3"),
                                                                         CD_GATE_OPEN="10"), timeout=600)
    assert last.returncode == 0, last.stderr[-2000:]
    assert f"{len(kept)} from the cache, building {10 - len(kept)} on" in last.stderr
    built = set(re.findall(r"modes: (m[0-9a-f]+) built", last.stderr))
    assert built == {mode_name(m, 4) for m in parse_modes(["1-of-4", "2-of-4"], FEET)} - set(kept)
    after = _finished(out)
    assert len(after) == 10 and all(after[m] == t for m, t in kept.items())


# -- Dask -------------------------------------------------------------------------------------
def test_dask_cluster_builds_and_ships_the_modes_back(tmp_path):
    distributed = pytest.importorskip("distributed")
    go1 = cd.load_robot("go1")
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        workers = client.run(os.getpid)
        lib = library(go1, "2F3", "pv_osim", out_dir=tmp_path, client=client)
        assert lib.manifest["build"]["built"] == 3 and "Dask cluster" in lib.manifest["build"]["where"]
        assert os.getpid() not in workers.values()
    checks = check_library(lib, go1, samples=20)
    assert len(checks) == 4 and all(c.passed for c in checks)
    again = library(go1, "2F3", "pv_osim", out_dir=tmp_path, jobs=1)          # the same keys here: all cached
    assert again.manifest["build"]["reused"] == 3 and again.manifest["build"]["built"] == 0


def test_workers_with_other_sources_or_cpus_are_refused():
    mine = worker_identity()
    check_workers({"tcp://a:1": mine}, native=True)
    with pytest.raises(DelassusError, match="tcp://b:2 runs another casadi_delassus"):
        check_workers({"tcp://a:1": mine, "tcp://b:2": dict(mine, source="0" * 64)}, native=False)
    other_cpu = {"tcp://c:3": dict(mine, cpu="x")}
    check_workers(other_cpu, native=False)
    with pytest.raises(DelassusError, match="tcp://c:3 has another CPU.*auto-portable"):
        check_workers(other_cpu, native=True)


def test_shipped_files_are_verified_before_they_are_installed(tmp_path):
    from casadi_delassus.runtime import artifact
    f = cd.generate("go1", ["FL_foot:3d"], "pv_osim", out_dir=tmp_path / "src")
    files = {ext: f.so_path.with_suffix("." + ext).read_bytes() for ext in ("c", "h", "so", "json")}
    target = tmp_path / "dst"
    bad = dict(files, so=files["so"][:-10])
    with pytest.raises(ArtifactError, match="is not the file its manifest records"):
        artifact.install(target, "pv_osim", bad)
    assert not target.exists()
    path = artifact.install(target, "pv_osim", files)
    q = cd.load_robot("go1").random_q(np.random.default_rng(0))
    assert np.array_equal(cd.load(path)(q), f(q))
