"""Contact-mode libraries (casadi_delassus/contact_modes/): go1 with four 3D feet, all 16 modes
(the empty one included) through the Python and the C dispatcher against the NumPy
reference and the directly generated function; the dynamics through the dispatcher; the C
package built with make and CMake; a failed mode; the cache."""
import ctypes
import json
import shutil
import subprocess

import numpy as np
import pytest

import casadi_delassus as cd
from casadi_delassus.verify import reference
from casadi_delassus.errors import ConstraintError, DelassusError, InputError
from casadi_delassus.contact_modes import library, load_library
from casadi_delassus.verify.library_check import check_library
from casadi_delassus.contact_modes.package import write_library_package

FEET = ["FL_foot:3d", "FR_foot:3d", "RL_foot:3d", "RR_foot:3d"]
needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
needs_cmake = pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")


@pytest.fixture(scope="module")
def go1():
    return cd.load_robot("go1")


# The sixteen-mode library takes one algorithm: "auto" traces seven per mode (13 of the fixture's 19 s);
# test_auto_picks_per_mode_as_generate_does checks "auto" on two feet.
ALGORITHM = "pv_osim"


@pytest.fixture(scope="module")
def go1_lib(tmp_path_factory):
    """go1 4F3 (registry scenario), every mode, from an empty cache on all cores."""
    return library("go1", "4F3", ALGORITHM, out_dir=tmp_path_factory.mktemp("lib"))


def test_go1_sixteen_modes_match_reference_and_direct_function(go1_lib, go1):
    assert sorted(go1_lib.modes) == list(range(16))
    assert go1_lib.specs == FEET
    checks = check_library(go1_lib, go1, samples=20)
    assert len(checks) == 16 and all(c.passed for c in checks), [(c.name, c.reference, c.direct) for c in checks]
    for c in checks[1:]:           # every mode with a function was compared with both
        assert set(c.reference) == set(c.direct) == {"delassus"}
        assert c.worst("reference") < 1e-12 and c.worst("direct") < 1e-12
    empty = go1_lib.modes[0]
    assert empty["function"] is None and empty["m"] == 0
    assert go1_lib(0, go1.random_q(np.random.default_rng(1))).shape == (0, 0)


def test_full_mode_equals_generate_of_the_scenario(go1_lib, go1, out_dir):
    f = cd.generate(go1, "4F3", ALGORITHM, out_dir=out_dir)
    assert go1_lib.modes[0xF]["algorithm"] == ALGORITHM
    assert go1_lib.modes[0xF]["instructions"] == f.op_count["instructions"]
    rng = np.random.default_rng(2)
    for _ in range(20):
        q = go1.random_q(rng)
        np.testing.assert_allclose(go1_lib(0xF, q), f(q), rtol=0, atol=1e-13 * np.abs(f(q)).max())


def test_modes_by_name_and_mask(go1_lib, go1):
    q = go1.random_q(np.random.default_rng(3))
    D = go1_lib(0b0101, q)
    assert D.shape == (6, 6)
    assert np.array_equal(go1_lib(["FL_foot", "RL_foot:3d"], q), D)
    ref = reference.delassus(go1, cd.ConstraintSet.parse(go1, ["FL_foot:3d", "RL_foot:3d"]), q, {})
    assert close(D, ref, 1e-12)
    assert np.array_equal(go1_lib("RR_foot", q), go1_lib(0b1000, q))
    with pytest.raises(ConstraintError, match="unknown constraint 'FL_fot'.*FL_foot"):
        go1_lib(["FL_fot"], q)
    with pytest.raises(ConstraintError, match="bits beyond"):
        go1_lib(0x10, q)
    with pytest.raises(InputError, match="unexpected inputs"):
        go1_lib(1, q, lam=np.zeros(3))


def test_batches_per_mode(go1_lib, go1):
    rng = np.random.default_rng(4)
    Q = np.array([go1.random_q(rng) for _ in range(37)])
    for mask in (0, 0b0010, 0b1011, 0xF):
        D = go1_lib(mask, Q)
        m = go1_lib.modes[mask]["m"]
        assert D.shape == (37, m, m)
        for i in (0, 17, 36):
            single = go1_lib(mask, Q[i])
            assert np.abs(D[i] - single).max(initial=0) <= 1e-13 * max(np.abs(single).max(initial=0), 1)


def test_rerun_takes_every_mode_from_the_cache(go1_lib):
    m = go1_lib.manifest
    again = library("go1", "4F3", ALGORITHM, out_dir=go1_lib.manifest_path.parents[3], jobs=1)
    assert again.manifest["build"] == dict(again.manifest["build"], built=0, reused=15)
    assert [md["manifest_sha256"] for md in again.manifest["modes"][1:]] == \
        [md["manifest_sha256"] for md in m["modes"][1:]]


def test_auto_picks_per_mode_as_generate_does(go1, tmp_path):
    """algorithm "auto": each mode's function is the one cd.generate's "auto" picks for that mode's constraints
    (the fewest instructions), with its instruction count; the library's values equal the reference."""
    two = FEET[:2]
    lib = library("go1", two, "auto", out_dir=tmp_path / "lib", cflags=("-O0",), jobs=1, quiet=True)
    for mask in (0b01, 0b11):
        specs = [s for i, s in enumerate(two) if mask >> i & 1]
        f = cd.generate(go1, specs, "auto", out_dir=tmp_path / "direct", cflags=("-O0",))
        assert lib.modes[mask]["algorithm"] == f.manifest["auto"]["chosen"]
        assert lib.modes[mask]["instructions"] == f.op_count["instructions"]
    checks = check_library(lib, go1, samples=5)
    assert all(c.passed for c in checks), [(c.name, c.reference, c.direct) for c in checks]


def close(a, b, tol):
    """|a − b| ≤ tol · max(|b|, 1) entrywise-max, shapes equal (empty arrays are close)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and np.abs(a - b).max(initial=0) <= tol * max(np.abs(b).max(initial=0), 1)


def _dispatcher(pkg_lib, name):
    """ctypes bindings of <lib>_eval and <lib>_batch (q and one output)."""
    lib = ctypes.CDLL(str(pkg_lib))
    p = ctypes.POINTER(ctypes.c_double)
    ev = getattr(lib, f"{name}_eval")
    ev.argtypes, ev.restype = [ctypes.c_uint64, p, p], ctypes.c_int
    ba = getattr(lib, f"{name}_batch")
    ba.argtypes, ba.restype = [ctypes.c_uint64, ctypes.c_longlong, p, p], ctypes.c_int
    return ev, ba


def _ptr(a):
    return a.ctypes.data_as(ctypes.POINTER(ctypes.c_double))


def parse_example(text):
    """{mask: {output: matrix}} from the example's "mode ..." and "name rows cols" blocks."""
    lines, out, k = text.strip().splitlines(), {}, 0
    while k < len(lines):
        words = lines[k].split()
        if words[0] == "mode":
            current = out.setdefault(int(words[1], 16), {})
            k += 1
            continue
        name, rows, cols = words[0], int(words[1]), int(words[2])
        current[name] = np.array([[float(v) for v in lines[k + 1 + i].split()] for i in range(rows)]).reshape(rows, cols)
        k += rows + 1
    return out


@needs_make
def test_package_make_example_switches_modes_and_c_dispatcher_matches(go1_lib, go1, tmp_path):
    pkg = tmp_path / "pkg"
    written = {p.relative_to(pkg).as_posix() for p in write_library_package(pkg, go1_lib.manifest_path)}
    name = go1_lib.name
    assert {f"{name}.c", f"{name}.h", f"{name}.json", "Makefile", "CMakeLists.txt", "README.md", "main.c",
            f"modes/m5/{ALGORITHM}.c", f"modes/mf/{ALGORITHM}.h"} <= written
    r = subprocess.run(["make", "-j2", "CD_OPT=-O0"], cwd=pkg, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (pkg / f"lib{name}.a").is_file() and (pkg / f"lib{name}.so").is_file()
    q = go1.random_q(np.random.default_rng(5))
    run = subprocess.run([str(pkg / "example"), *map(repr, map(float, q))], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    printed = parse_example(run.stdout)
    assert sorted(printed) == list(range(16))
    for mask, outs in printed.items():
        expected = go1_lib(mask, q)
        assert close(outs["delassus"], expected, 1e-12)
    # the C dispatcher of the shared library on 20 random q per mode, single and batched
    ev, ba = _dispatcher(pkg / f"lib{name}.so", name)
    rng = np.random.default_rng(6)
    Q = np.array([go1.random_q(rng) for _ in range(20)])
    for mask in range(16):
        m = go1_lib.modes[mask]["m"]
        want = go1_lib(mask, Q)
        got = np.zeros((20, m, m))
        assert ba(mask, 20, _ptr(Q), _ptr(got)) == 0
        assert close(got, want, 1e-12)
        for i in range(0, 20, 7):
            one = np.zeros(m * m)
            assert ev(mask, _ptr(Q[i].copy()), _ptr(one)) == 0
            assert close(one.reshape(m, m, order="F"), want[i], 1e-12)
    assert ev(0x10, _ptr(Q[0].copy()), _ptr(np.zeros(144))) == -1          # not a mode: NAME_NO_MODE


@needs_cmake
def test_package_builds_with_cmake(go1_lib, go1, tmp_path):
    pkg = tmp_path / "pkg"
    write_library_package(pkg, go1_lib.manifest_path)
    for cmd in (["cmake", "-S", ".", "-B", "build", "-DCD_OPT=-O0"], ["cmake", "--build", "build", "-j", "2"]):
        r = subprocess.run(cmd, cwd=pkg, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    run = subprocess.run([str(pkg / "build" / "example"), "-m", "0x9"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    printed = parse_example(run.stdout)
    q0 = np.zeros(go1.nq)
    q0[6] = 1.0
    assert list(printed) == [9]
    assert close(printed[9]["delassus"], go1_lib(9, q0), 1e-12)


@pytest.fixture(scope="module")
def dyn_lib(tmp_path_factory):
    """go1 with two 3D feet, pv_early (v̇, λ and a pivot output): modes 0..3, mode 0 = ABA."""
    return library("go1", "2F3", "pv_early", out_dir=tmp_path_factory.mktemp("dyn"))


def test_dynamics_through_the_dispatcher(dyn_lib, go1):
    assert dyn_lib.manifest["kind"] == "dynamics"
    assert [md["algorithm"] for md in dyn_lib.manifest["modes"]] == ["aba", "pv_early", "pv_early", "pv_early"]
    checks = check_library(dyn_lib, go1, samples=20)
    assert all(c.passed for c in checks), [(c.name, c.reference, c.direct) for c in checks]
    assert set(checks[0].reference) == {"vdot"} and set(checks[3].reference) == {"vdot", "lam"}
    rng = np.random.default_rng(7)
    q, v, tau = go1.random_q(rng), rng.normal(size=go1.nv), rng.normal(size=go1.nv)
    out = dyn_lib.outputs(0, q, v=v, tau=tau, k=np.zeros(0))
    np.testing.assert_allclose(out["vdot"].ravel(), reference.forward_dynamics(go1, q, v, tau), rtol=1e-12, atol=1e-12)
    assert out["lam"].shape == (0, 1) and out["pivot"].item() == 1.0
    with pytest.raises(InputError, match="no active rows"):
        dyn_lib.outputs(0, q, v=v, tau=tau, k=np.zeros(3))
    Q = np.array([go1.random_q(rng) for _ in range(9)])
    batch = dyn_lib.outputs(3, Q, v=v, tau=tau, k=np.zeros(6))
    assert batch["vdot"].shape == (9, go1.nv, 1) and batch["lam"].shape == (9, 6, 1)


@needs_make
def test_dynamics_package_example(dyn_lib, go1, tmp_path):
    pkg = tmp_path / "pkg"
    write_library_package(pkg, dyn_lib.manifest_path)
    r = subprocess.run(["make", "-j2", "CD_OPT=-O0"], cwd=pkg, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    run = subprocess.run([str(pkg / "example")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    printed = parse_example(run.stdout)
    q0 = np.zeros(go1.nq)
    q0[6] = 1.0
    zeros = np.zeros(go1.nv)
    for mask, outs in printed.items():
        m = dyn_lib.modes[mask]["m"]
        want = dyn_lib.outputs(mask, q0, v=zeros, tau=zeros, k=np.zeros(m))
        assert set(outs) == {"vdot", "lam", "pivot"} and outs["lam"].shape == (m, 1)
        for k in outs:
            assert close(outs[k], want[k], 1e-10), (mask, k)


def test_auto_soft_picks_a_soft_solver_per_mode(tmp_path, go1):
    """auto_soft: per mode the fewest instructions of pv_soft and ltl_soft; the empty mode is ABA."""
    lib = library("go1", "2F3", "auto_soft", modes=["-", "FL_foot", "FL_foot,RR_foot"], out_dir=tmp_path)
    assert sorted(lib.modes) == [0, 1, 3]
    for mask, md in lib.modes.items():
        if mask:
            counts = lib.function(mask).manifest["auto"]["instructions"]
            assert set(counts) == {"pv_soft", "ltl_soft"} and md["algorithm"] == min(counts, key=counts.get)
    assert lib.modes[0]["algorithm"] == "aba"
    checks = check_library(lib, go1, samples=20)
    assert all(c.passed for c in checks) and set(checks[2].reference) == {"vdot", "lam"}


def test_failed_mode_names_itself_and_finished_modes_stay(tmp_path):
    """pv_osim refuses link-to-link rows: every mode with one fails, the others are built."""
    specs = ["FL_foot:3d", "FL_calf|RR_calf:3d"]
    with pytest.raises(ConstraintError) as err:
        library("go1", specs, "pv_osim", out_dir=tmp_path, jobs=2)
    assert "mode m2 (FL_calf|RR_calf:3d)" in str(err.value) and "1 more failed" in str(err.value)
    made = sorted(p.relative_to(tmp_path).parts[-2] for p in tmp_path.rglob("pv_osim.json"))
    assert made == ["m1"]
    assert not list(tmp_path.rglob("*_modes.json")) and not list(tmp_path.rglob(".tmp-*"))


def test_runtime_K_inputs_per_constraint(tmp_path, go1):
    """Runtime K of the full set, given in every mode, read where its constraint is active."""
    lib = library("go1", ["FL_foot:3d-input", "RR_foot:3d", "RL_foot:3d-input"], "pv_osim",
                  modes=["0b101", "FL_foot,RR_foot", "-"], out_dir=tmp_path, jobs=1)
    assert sorted(lib.modes) == [0, 3, 5]
    assert [i["name"] for i in lib.input_specs] == ["q", "K_FL_foot", "K_RL_foot"]
    checks = check_library(lib, go1, samples=20)
    assert all(c.passed for c in checks) and len(checks) == 3
    with pytest.raises(InputError, match="is not in library"):
        lib(1, go1.random_q(np.random.default_rng(0)), K_FL_foot=np.eye(3, 6), K_RL_foot=np.eye(3, 6))


def test_library_manifest_is_checked(tmp_path):
    lib = library("go1", ["FL_foot:3d"], "pv_osim", out_dir=tmp_path, jobs=1)
    path = lib.manifest_path
    data = json.loads(path.read_text())
    data["modes"][1]["name"] = "../x"
    path.write_text(json.dumps(data))
    with pytest.raises(DelassusError, match="modified after it was written"):
        load_library(path.parent)
    rebuilt = library("go1", ["FL_foot:3d"], "pv_osim", out_dir=tmp_path, jobs=1)
    assert rebuilt.manifest["build"]["reused"] == 1 and rebuilt(1, np.r_[np.zeros(6), 1, np.zeros(12)]).shape == (3, 3)


def test_library_errors(tmp_path):
    with pytest.raises(DelassusError, match="does not depend on the constraints"):
        library("go1", "2F3", "aba", out_dir=tmp_path)
    with pytest.raises(DelassusError, match="osim needs a Delassus library"):
        library("go1", "2F3", "pv", osim=True, out_dir=tmp_path)
    with pytest.raises(ConstraintError, match="the library has 2 constraints, not 4"):
        library("go1", "2F3", "pv_osim", modes="1-of-4", out_dir=tmp_path)
    assert not list(tmp_path.iterdir())


def test_names_out_of_library_order_are_refused(go1_lib, go1):
    """The rows come in library order; names given in another order are refused in one line
    naming that order, not silently answered in a different one."""
    q = go1.random_q(np.random.default_rng(4))
    with pytest.raises(InputError, match=r"library order.*FL_foot, RL_foot"):
        go1_lib(["RL_foot", "FL_foot"], q)
    assert np.array_equal(go1_lib(["FL_foot", "RL_foot"], q), go1_lib(0b0101, q))


def test_a_mask_call_goes_straight_to_the_mode_function(go1_lib, go1, monkeypatch):
    """After the first call of a mask, lib(mask, q) calls the mode's function directly (its
    overhead is the function's own, bench/library_call.py), with the same result; other
    inputs, names or out= take the checked path again."""
    q = go1.random_q(np.random.default_rng(5))
    first = go1_lib(0b0110, q)
    monkeypatch.setattr(type(go1_lib), "outputs", lambda *a, **k: pytest.fail("not the direct path"))
    assert np.array_equal(go1_lib(0b0110, q), first)
    assert np.array_equal(go1_lib(0b0110, q), go1_lib.function(0b0110)(q))
    Q = np.stack([q, q])
    assert close(go1_lib(0b0110, Q)[1], first, 1e-13)          # the batch's own arithmetic
    with pytest.raises(BaseException, match="not the direct path"):
        go1_lib(0b0110, q, lam=np.zeros(6))


def test_names_called_before_take_the_direct_path(go1_lib, go1, monkeypatch):
    """Issue 34 point 10: names that resolved once go straight to the mode's function, as a
    mask does (neither outputs() nor mask() runs again); names out of order or unknown are
    still refused, and a name never resolved still takes the checked path."""
    q = go1.random_q(np.random.default_rng(7))
    want = go1_lib(0b1001, q)
    assert np.array_equal(go1_lib(["FL_foot", "RR_foot"], q), want)
    assert np.array_equal(go1_lib(("FL_foot:3d", "RR_foot"), q), want)
    assert np.array_equal(go1_lib("FR_foot", q), go1_lib(0b0010, q))
    with monkeypatch.context() as m:
        m.setattr(type(go1_lib), "outputs", lambda *a, **k: pytest.fail("not the direct path"))
        m.setattr(type(go1_lib), "mask", lambda *a, **k: pytest.fail("names resolved again"))
        assert np.array_equal(go1_lib(["FL_foot", "RR_foot"], q), want)
        assert np.array_equal(go1_lib(("FL_foot:3d", "RR_foot"), q), want)
        assert np.array_equal(go1_lib("FR_foot", q), go1_lib(0b0010, q))
    with pytest.raises(InputError, match="library order"):
        go1_lib(["RR_foot", "FL_foot"], q)
    with pytest.raises(ConstraintError, match="unknown constraint 'RR_fot'"):
        go1_lib(["FL_foot", "RR_fot"], q)
    with pytest.raises(ConstraintError, match="constraint names are strings"):
        go1_lib([["FL_foot"]], q)


def test_a_full_set_function_generated_before_is_reused(tmp_path, monkeypatch):
    """generate() of the scenario, then a library of its modes: the full mode is that very
    function (its files, not a rebuild), loaded through the library."""
    from casadi_delassus.codegen import build as build_module
    specs = ["FL_foot:3d", "RR_foot:3d"]
    f = cd.generate("go1", specs, "pv_osim", out_dir=tmp_path)
    compiled = []
    real = build_module.write_compiled
    monkeypatch.setattr(build_module, "write_compiled", lambda *a, **k: compiled.append(a[3]) or real(*a, **k))
    lib = library("go1", specs, "pv_osim", out_dir=tmp_path, jobs=1)
    assert sorted(compiled) == ["pv_osim", "pv_osim"] and len(lib.modes) == 4          # the two one-foot modes only
    full = lib.function(0b11)
    assert full.manifest_path == f.manifest_path and full.manifest["function"] == f.manifest["function"]
    q = cd.load_robot("go1").random_q(np.random.default_rng(6))
    assert np.array_equal(lib(0b11, q), f(q))
