"""What `pip install casadi_delassus` gives a user (issue 34 point 1): the wheel built from this
checkout carries every file the package reads (templates, the door's C, the robot registry), and
installed into a fresh virtual environment it runs the README's Python example and
`casadi-delassus check go1 -s 4F3` from a folder outside the checkout, importing the installed
copy, never the source tree.

The fresh environment gets the dependencies (casadi, numpy, yourdfpy, ...; example-robot-data
for go1's URDF) from this project's own .venv without its editable install: one .pth file lists
.venv's site-packages and what .venv's own .pth files add, leaving out the ``__editable__`` ones.
So the test needs no network but the build backend's (pip builds the wheel in an isolated
environment, setuptools from the package index or pip's cache)."""
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from project.test_docs import README, examples

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "casadi_delassus"


def run(cmd, **kwargs):
    """Run ``cmd``; its CompletedProcess, failing the test with its output when it fails."""
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kwargs)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def source_files():
    """The package's files as a fresh clone has them, relative to the folder that holds the
    package: git's tracked files, or without git every file but caches and build products."""
    try:
        tracked = subprocess.run(["git", "ls-files", "-z", "casadi_delassus"], cwd=REPO, capture_output=True,
                                 text=True, timeout=60)
    except OSError:
        tracked = None
    if tracked is not None and tracked.returncode == 0 and tracked.stdout:
        return {p for p in tracked.stdout.split("\0") if p and (REPO / p).is_file()}
    return {str(p.relative_to(REPO)) for p in PACKAGE.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".so", ".o")}


def project_paths():
    """The lines of a .pth giving this .venv's packages but not its editable install: its
    site-packages, then each line of its own .pth files (paths made absolute)."""
    lines = []
    for site in dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib")):
        lines.append(site)
        for pth in sorted(Path(site).glob("*.pth")):
            if pth.name.startswith("__editable__"):
                continue
            for line in pth.read_text().splitlines():
                if line.startswith(("import ", "import\t")):
                    lines.append(line)
                elif line.strip() and not line.startswith("#"):
                    lines.append(str(Path(site, line.strip()).resolve()))
    return [line for line in lines if Path(line.split()[0]).resolve() != REPO]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel pip builds from a copy of the checkout's package files."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for rel in ["pyproject.toml", "README.md", *source_files()]:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, src / rel)
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp / "dist"), str(src)])
    found = list((tmp / "dist").glob("casadi_delassus-*.whl"))
    assert len(found) == 1, found
    return found[0]


@pytest.fixture(scope="module")
def fresh(wheel, tmp_path_factory):
    """(python, bin folder, site-packages) of a fresh venv with the wheel installed by pip."""
    venv = tmp_path_factory.mktemp("venv") / "v"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "--quiet",
         str(wheel)])
    site = Path(run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    (site / "00_project_venv.pth").write_text("\n".join(project_paths()) + "\n")
    return python, venv / "bin", site


@pytest.fixture
def outside(tmp_path):
    """(cwd, env) for a run outside the checkout: no PYTHONPATH, caches of a user of its own."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "CASADI_DELASSUS_ROBOTS")}
    env["CASADI_DELASSUS_CACHE"] = str(tmp_path / "cache")
    work = tmp_path / "work"
    work.mkdir()
    return work, env


def test_the_wheel_carries_every_file_of_the_package(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = sorted(source_files() - names)
    assert not missing, f"files the wheel lacks: {missing}"
    assert "casadi_delassus/model/robots/go1.json" in names and "casadi_delassus/runtime/door.c" in names
    assert "casadi_delassus/py.typed" in names          # PEP 561: type checkers read the installed package's hints


def test_the_installed_wheel_runs_the_readme_example(fresh, outside):
    python, _, site = fresh
    work, env = outside
    code = ("import os, sys, casadi_delassus as cd\n"
            "print(cd.__file__)\n"      # the only folder on the path that holds the package, no editable finder:
            "print([p for p in sys.path if os.path.isdir(os.path.join(p or '.', 'casadi_delassus'))])\n"
            "assert 'editable' not in str(sys.meta_path), sys.meta_path\n"
            + examples(README, "python")[0])
    proc = run([str(python), "-c", code], cwd=work, env=env)
    lines = proc.stdout.splitlines()
    where, holders, printed = lines[0], lines[1], lines[-1]
    assert Path(where).is_relative_to(site), where           # the installed copy, not the checkout
    assert holders == repr([str(site)]), holders
    instructions, passed = printed.split()
    assert int(instructions) > 0 and passed == "True"


def test_the_installed_command_checks_go1(fresh, outside):
    _, bin_dir, site = fresh
    work, env = outside
    script = bin_dir / "casadi-delassus"
    assert script.read_text().splitlines()[0] == f"#!{bin_dir / 'python'}"     # pip's script, the fresh venv's python
    proc = run([str(script), "check", "go1", "-s", "4F3"], cwd=work, env=env)
    rows = [line.split() for line in proc.stdout.splitlines() if line.startswith("go1 ")]
    assert rows and all(r[:3] == ["go1", "4F3", "auto"] and r[-2] == "ok" for r in rows), proc.stdout
    assert "numpy" in {r[3] for r in rows}


USER_CODE = """import numpy as np
import casadi_delassus as cd

robot: cd.Robot = cd.load_robot("go1")
R, p = robot.frame_placement(robot.neutral_q(), "FL_foot")
q: np.ndarray = cd.place(robot, ["FL_foot"], robot.neutral_q(), clearance=0.1)
s = cd.contact_step(robot, ["FL_foot:3d-world"], quiet=True)
"""
WRONG = """
n: int = cd.place(robot, ["FL_foot"], robot.neutral_q())
cd.load_robot("go1", floating_base="yes")
"""


def test_a_type_checker_reads_the_installed_hints(fresh, outside):
    """PEP 561 (issue 34 point 9): mypy, run on a user's file against the installed wheel, reads the package's hints
    (py.typed): right calls pass, a wrong return type and a wrong argument are found."""
    pytest.importorskip("mypy")
    python, _, _ = fresh
    work, env = outside
    (work / "ok.py").write_text(USER_CODE)
    (work / "wrong.py").write_text(USER_CODE + WRONG)
    mypy = [sys.executable, "-m", "mypy", "--python-executable", str(python), "--no-incremental",
            "--ignore-missing-imports", "--config-file", os.devnull]
    # one run over both files: mypy's time is numpy's and the package's hints, read once
    wrong = subprocess.run(mypy + ["ok.py", "wrong.py"], cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert wrong.returncode == 1 and "Found 2 errors in 1 file (checked 2 source files)" in wrong.stdout, wrong.stdout
    assert "ok.py" not in wrong.stdout, wrong.stdout
    assert 'wrong.py:9: error: Incompatible types in assignment (expression has type "ndarray' in wrong.stdout
    assert 'wrong.py:10: error: Argument "floating_base" to "load_robot" has incompatible type' in wrong.stdout
