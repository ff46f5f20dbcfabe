"""The drop-in C package (`generate --package`): built with make and with CMake in a fresh
folder, its example's printed matrix equals the Python loader's result."""
import os
import shutil
import subprocess

import numpy as np
import pytest

import casadi_delassus as cd
from casadi_delassus.verify.check import relative_error
from casadi_delassus.codegen.package import neutral_q, write_package

from cli_runner import run_cli

pytestmark = pytest.mark.skipif(shutil.which("make") is None or shutil.which("cc") is None and shutil.which("gcc") is None,
                                reason="needs make and a C compiler")


@pytest.fixture(scope="module")
def go1(out_dir):
    return cd.generate("go1", "4F3", "naive", out_dir=out_dir)


@pytest.fixture(scope="module")
def panda_k(out_dir):
    """A runtime-input K: the example passes K = I."""
    return cd.generate("panda", ["panda_hand_tcp:6d-input"], "naive", out_dir=out_dir)


def parse_outputs(text):
    """{name: matrix} from the example's "name rows cols" blocks."""
    lines, out, k = text.strip().splitlines(), {}, 0
    while k < len(lines):
        name, rows, cols = lines[k].split()
        rows, cols = int(rows), int(cols)
        out[name] = np.array([[float(v) for v in lines[k + 1 + i].split()] for i in range(rows)]).reshape(rows, cols)
        k += rows + 1
    return out


def run_example(exe, q=None):
    r = subprocess.run([str(exe), *([] if q is None else [repr(float(x)) for x in q])],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return parse_outputs(r.stdout)


def check_example(exe, f, **inputs):
    q0 = neutral_q(f.manifest)
    assert relative_error(run_example(exe)["delassus"], f(q0, **inputs)) <= 1e-12
    q = f.robot.random_q(np.random.default_rng(3))
    assert relative_error(run_example(exe, q)["delassus"], f(q, **inputs)) <= 1e-12


def test_make_builds_static_shared_and_example(go1, tmp_path):
    pkg = tmp_path / "pkg"
    written = {p.name for p in write_package(pkg, [go1])}
    assert written == {"naive.c", "naive.h", "naive.json", "Makefile", "CMakeLists.txt", "README.md", "main.c"}
    r = subprocess.run(["make"], cwd=pkg, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (pkg / "libcd_go1_4F3.a").is_file() and (pkg / "libcd_go1_4F3.so").is_file()
    check_example(pkg / "example", go1)
    readme = (pkg / "README.md").read_text()
    assert "cd_go1_4F3_naive_eval(const double* q, double* delassus)" in readme
    assert "| 7 | `FL_hip_joint` | revolute |" in readme and "| `RR_foot:3d` | 9..11 (x, y, z) |" in readme


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed (the Makefile path is tested)")
def test_cmake_builds_and_example_agrees(go1, tmp_path):
    pkg = tmp_path / "pkg"
    write_package(pkg, [go1])
    build = tmp_path / "build"
    for cmd in (["cmake", "-S", str(pkg), "-B", str(build)], ["cmake", "--build", str(build)]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
    assert (build / "libcd_go1_4F3.a").is_file() and (build / "libcd_go1_4F3.so").is_file()
    check_example(build / "example", go1)


def test_runtime_K_input_example_passes_identity(panda_k, tmp_path):
    pkg = tmp_path / "pkg"
    write_package(pkg, [panda_k])
    r = subprocess.run(["make", "example"], cwd=pkg, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    check_example(pkg / "example", panda_k, K_panda_hand_tcp=np.eye(6))


def test_cli_generate_package(out_dir, tmp_path):
    pkg = tmp_path / "cli_pkg"
    r = run_cli("generate", "go1", "-s", "4F3", "-a", "naive", "-o", out_dir, "--package", pkg)
    assert r.returncode == 0, r.stderr
    assert {"naive.c", "naive.h", "Makefile", "CMakeLists.txt", "README.md", "main.c"} <= set(os.listdir(pkg))
    assert not [p for p in os.listdir(pkg) if p.startswith(".package-")]
