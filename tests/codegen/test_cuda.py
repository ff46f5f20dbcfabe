"""The CUDA target (codegen/cuda.py, runtime/cuda.py; issue 26) without a GPU: the .cu of every
function family, compiled as C++ on the host through the shim, equals the C target's batch
(FP64: max |diff| / max |C| <= 1e-15 per configuration against the C batch or single call, or twice
what those two differ by where that is more (an output that amplifies rounding); FP32: within
ERROR_MARGIN x the error its manifest stores); one of each family on small cases, the whole
family x robot matrix as slow tests; both layouts; nvcc's register and spill report where nvcc is
installed (skipped without it); bench --gpu and the device path's clear errors where there is no
GPU, and the DLPack round trip where there is one."""
import functools
import json
import math
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import casadi_delassus as cd
from casadi_delassus.codegen import cuda
from casadi_delassus.codegen.precision import PRECISIONS
from casadi_delassus.contact_modes import library
from casadi_delassus.errors import ArtifactError, CompilerError, ConstraintError, DelassusError, InputError
from casadi_delassus.model.robot import unit_blocks
from casadi_delassus.registry import ALGORITHMS, delassus_algorithms
from casadi_delassus.runtime.cuda import CudaFunction
from casadi_delassus.verify.precision import batch_errors, record

from conftest import CASES, case
from robustness.test_fuzzed_surfaces import refused, run

FP64_TOL = 1e-15
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (CUDA toolkit)")


def g_name(path):
    """A host library's name: its function's (one path per library: the dynamic loader keeps them by path)."""
    return json.loads(path.read_text())["function"] + path.stem[path.stem.index("-cuda"):]


def host(c_function, tmp_path, precision="double", layout="soa", defines=()):
    """The CUDA form of ``c_function`` (a CompiledFunction), built on the host through the shim."""
    path = cuda.derive(c_function.manifest_path, precision, layout, nvcc=None)
    so = cuda.host_library(path.with_suffix(".cu"), tmp_path / f"{g_name(path)}-{layout}.so", c_function.manifest["cflags"],
                           defines=defines)
    return CudaFunction(path, host_library=so)


def as_the_c_path_reads(q, manifest):
    """q with each unit block divided by its norm (summed in order, one square root) as the C path
    does before it computes: the kernel takes q as given, and a quaternion one ulp off norm 1
    moves a constrained-dynamics result by κ ulp (4e-15 on go1 4F3 pv)."""
    q = q.copy()
    for _, sl, _ in unit_blocks(manifest["q_layout"]):
        for row in q:
            sq = 0.0
            for x in row[sl].tolist():
                sq += x * x
            row[sl] /= math.sqrt(sq)
    return q


def inputs(f, robot, n, seed, given=None):
    """n random inputs of f in manifest order: q from the robot's own sampler, as the C path reads
    it, ``given`` {name: array} as given."""
    rng = np.random.default_rng(seed)
    values = cuda.random_batch(f.manifest, n, rng)
    if f.inputs[0]["name"] == "q":
        values[0] = as_the_c_path_reads(np.array([robot.random_q(rng) for _ in range(n)]), f.manifest)
    return [(given or {}).get(name, v) for name, v in zip(f.input_names, values)]


class SingleCalls:
    """The C path's single call, one configuration after the other (the batch's twin)."""

    def __init__(self, f):
        self.f, self.inputs = f, f.inputs

    def outputs(self, q, **named):
        outs = [self.f.outputs(q[i], **{k: v[i] for k, v in named.items()}) for i in range(len(q))]
        return {k: np.array([o[k] for o in outs]) for k in outs[0]}


def fp64_errors(g, c_function, values):
    """Per output, (g's error against the C path: its batch or its single call, whichever g is
    closer to; what it may be: FP64_TOL, or twice what the C path's batch and single call differ by
    where that is more).  They differ by up to 1.2e-15 on go1 4F3 pv, and by 7.7e-13 on an output
    that amplifies rounding: Λ = (Λ⁻¹)⁻¹ of pv_osim_fast on talos 2F."""
    single = SingleCalls(c_function)
    batch, one, spread = (batch_errors(a, b, values) for a, b in ((g, c_function), (g, single), (c_function, single)))
    return {k: (min(batch[k], one[k]), max(FP64_TOL, 2 * spread[k])) for k in batch}


def worst(errors):
    """The (error, allowed) of fp64_errors' output nearest to (or furthest past) what it may be."""
    return max(errors.values(), key=lambda e: e[0] / e[1])


# issue 26's point 1: every function family on these cases (the robot-scale matrix, slow tests and
# bench/cuda_host_accuracy.py); family label -> (algorithm, generate options)
MATRIX_CASES = ("go1-4F3", "talos-2F", "cassie-loops", "ladder")
OPERATORS = ("delassus_apply", "damped_inverse_apply", "delassus_explicit_apply", "damped_inverse_explicit")
DYNAMICS = tuple(a for a, spec in ALGORITHMS.items() if {"vdot", "tau"} & set(spec.outputs))
LIBRARY = "library mode"
FAMILIES = {
    **{a: (a, {}) for a in delassus_algorithms()},
    **{f"{a} osim": (a, {"osim": True}) for a in delassus_algorithms()},
    **{a: (a, {}) for a in DYNAMICS + OPERATORS},
    **{f"{a} stages": (a, {"stages": True}) for a in ("delassus_apply", "damped_inverse_apply", "pv")},
    **{f"{a} {d}": (a, {"derivative": d} | ({"wrt": ["q"]} if d == "jacobian" else {}))
       for a in ("auto", "pv") for d in ("jvp", "vjp", "jacobian")},
    LIBRARY: ("auto", {}),
}


# families whose single precision has no bound a measurement could store: the error's tail is
# heavy, fresh samples reach many times the stored max on both targets
FP32_UNBOUNDED = {"pv_early": "PV-early's rank-1 early elimination loses its digits in float near a small pivot: "
                              "on go1 4F3 the C target's own FP32 build errs 22 x the scale of λ on 20 samples "
                              "(stored max 0.18, median 7e-7)"}

# pairs whose FP64 host build differs from the C path by more than FP64_TOL while the C path's own
# batch and single call agree: an open defect of issue 26 point 1, cause not found
FP64_OPEN = {("cassie-loops", "damped_inverse_apply stages"):
             "the damping stage is 3.1e-15 from the C path (not FMA contraction: 3.6e-15 with -ffp-contract=off; "
             "not -freciprocal-math: 3.1e-15 without it)"}


def family_functions(name, label, out):
    """The C functions of the family ``label`` on the case ``name``: one, or a staged algorithm's
    stages in order; a library mode of every other constraint.  The C target's own refusals
    (an algorithm that does not take the case's constraints) raise its DelassusError."""
    robot, cs = case(name)
    algorithm, kwargs = FAMILIES[label]
    if label == LIBRARY:
        mask = sum(1 << i for i in range(0, len(cs.specs), 2))
        return [library(robot, CASES[name][1], algorithm, modes=[mask], out_dir=out, jobs=1).function(mask)]
    f = cd.generate(robot, cs, algorithm, out_dir=out, **kwargs)
    return list(f.stages) if kwargs.get("stages") else [f]


def family_errors(functions, robot, tmp_path, n=20, seed=3):
    """Per function (stages chained: each takes the previous one's outputs), the host build's
    (function name, FP64 error and what it may be, FP32 error, FP32 stored max, FP32 bound)
    against the C path."""
    rows, work = [], {}
    for f in functions:
        values = inputs(f, robot, n, seed, given=work)
        fp64 = worst(fp64_errors(host(f, tmp_path), f, values))
        single = host(f, tmp_path, "single")
        stored = single.manifest["precision"]["max_rel_error"]
        rows.append((f.manifest["function"], *fp64, max(batch_errors(single, f, values).values()),
                     stored, fp32_bound(single)))
        work = f.outputs(values[0], **dict(zip(f.input_names[1:], values[1:])))
    return rows


def fp32_bound(g):
    """What fresh samples of the single-precision CudaFunction g may err: ERROR_MARGIN × its stored max."""
    return cuda.ERROR_MARGIN * g.precision["max_rel_error"]


def assert_equal(c_function, robot, tmp_path, precision="double", layout="soa", n=40, seed=3):
    g = host(c_function, tmp_path, precision, layout)
    values = inputs(c_function, robot, n, seed)
    if precision == "double":
        errors = fp64_errors(g, c_function, values)
        assert all(e <= allowed for e, allowed in errors.values()), (c_function.manifest["function"], errors)
        return {k: e for k, (e, _) in errors.items()}
    errors = batch_errors(g, c_function, values)
    assert max(errors.values()) <= fp32_bound(g), (c_function.manifest["function"], errors, fp32_bound(g))
    return errors


@pytest.fixture(scope="module")
def go1():
    return case("go1-4F3")


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    return tmp_path_factory.mktemp("cuda")


# -- every family on go1 4F3 (fast) ----------------------------------------------------------------
@pytest.mark.parametrize("algorithm, kwargs", [
    ("pv_osim", {}),                                    # Delassus family
    ("pv_osimr", {"osim": True}),                       # Delassus and Λ
    ("aba", {}),                                        # unconstrained dynamics
    ("pv", {}),                                         # constrained dynamics
    ("delassus_apply", {}),                             # operators
    ("damped_inverse_apply", {}),
    ("pv_osim", {"derivative": "jvp"}),                 # derivatives
    ("pv_osim", {"derivative": "vjp"}),
    ("aba", {"derivative": "jacobian", "wrt": ["q"]}),
])
def test_go1_families_equal_the_c_path(go1, out, tmp_path, algorithm, kwargs):
    robot, cs = go1
    f = cd.generate(robot, cs, algorithm, out_dir=out, **kwargs)
    assert_equal(f, robot, tmp_path)


def test_stages_equal_the_c_path_stage_by_stage(go1, out, tmp_path):
    robot, cs = go1
    staged = cd.generate(robot, cs, "damped_inverse_apply", out_dir=out, stages=True)
    work = {}
    for stage in staged.stages:
        values = inputs(stage, robot, 30, 5, given=work)
        errors = fp64_errors(host(stage, tmp_path), stage, values)
        assert all(e <= allowed for e, allowed in errors.values()), (stage.manifest["function"], errors)
        names = stage.input_names
        work = stage.outputs(values[0], **dict(zip(names[1:], values[1:])))


def test_a_contact_mode_library_mode_equals_the_c_path(go1, out, tmp_path):
    robot, _ = go1
    lib = library(robot, "4F3", "auto", modes=[0b0101], out_dir=out, jobs=1)
    assert_equal(lib.function(0b0101), robot, tmp_path)


def test_single_precision_is_within_its_stored_bound_on_other_samples(go1, out, tmp_path):
    robot, cs = go1
    f = cd.generate(robot, cs, "pv_osim", out_dir=out)
    errors = assert_equal(f, robot, tmp_path, precision="single", n=100, seed=11)
    stored = json.loads(cuda.derive(f.manifest_path, "single", nvcc=None).read_text())["precision"]
    assert set(stored) == {"type", *record([0.0], 0)}           # the C target's record (verify/precision), key for key
    assert stored["type"] == "single" and stored["samples"] == cuda.ERROR_SAMPLES
    assert 1e-9 < stored["median_rel_error"] <= stored["max_rel_error"] < 1e-4
    assert 1e-9 < max(errors.values())          # it computed in float: not the double result


def test_single_precision_source_has_no_double(go1, out):
    robot, cs = go1
    f = cd.generate(robot, cs, "pv_osim", out_dir=out)
    text = cuda.derive(f.manifest_path, "single", nvcc=None).with_suffix(".cu").read_text()
    body = text[text.index("_device("):]
    assert "double" not in body and "sincosf" in text
    literals = re.findall(r"(?<![\w.])(\d+\.\d*(?:e[-+]?\d+)?)(f?)", body)
    assert literals and all(suffix == "f" for _, suffix in literals)


@pytest.mark.parametrize("layout", ["soa", "aos"])
def test_both_layouts_and_the_aos_define_give_the_c_result(go1, out, tmp_path, layout):
    robot, cs = go1
    f = cd.generate(robot, cs, "pv_osim", out_dir=out)
    assert_equal(f, robot, tmp_path, layout=layout)
    path = cuda.derive(f.manifest_path, "double", layout, nvcc=None)
    g = CudaFunction(path, host_library=cuda.host_library(path.with_suffix(".cu"), tmp_path / "other.so",
                                                          defines=(f"CD_CUDA_AOS={int(layout == 'soa')}",)))
    values = inputs(f, robot, 7, 1)
    assert max(batch_errors(g, f, values).values()) <= FP64_TOL


def test_the_launch_covers_a_partial_last_block_and_one_configuration(go1, out, tmp_path):
    robot, cs = go1
    f = cd.generate(robot, cs, "pv_osim", out_dir=out)
    g = host(f, tmp_path)
    values = inputs(f, robot, cuda.THREADS + 3, 2)
    assert np.array_equal(g(values[0]), f(values[0])) or batch_errors(g, f, values)["delassus"] <= FP64_TOL
    one = g(values[0][5])
    assert one.shape == (12, 12) and np.allclose(one, f(values[0][5]), rtol=0, atol=1e-15 * np.abs(one).max())


# -- small robots, loops, robot scale ----------------------------------------------------------------
# Cassie's loops are robot scale (57 s of host builds on 2 cores): slow; a two-rung ladder (its rungs welded to the world
# and coupled through the rail) makes the same check of closed loops through the CUDA rewrite fast, and
# test_every_family_on_every_case_equals_the_c_path covers Cassie (slow too)
@pytest.mark.parametrize("name, algorithm", [("ladder-small", "pv_osim"),
                                             pytest.param("cassie-loops", "auto", marks=pytest.mark.slow)])
def test_ladder_and_cassie_loops_equal_the_c_path(out, tmp_path, name, algorithm):
    robot, cs = case(name)
    f = cd.generate(robot, cs, algorithm, out_dir=out)
    assert_equal(f, robot, tmp_path, n=20)
    assert_equal(f, robot, tmp_path, precision="single", n=20)


@pytest.mark.slow
@pytest.mark.parametrize("label", list(FAMILIES))
@pytest.mark.parametrize("name", MATRIX_CASES)
def test_every_family_on_every_case_equals_the_c_path(out, tmp_path, name, label):
    """The robot-scale matrix (bench/cuda_host_accuracy.py prints its numbers)."""
    robot, _ = case(name)
    try:
        functions = family_functions(name, label, out)
    except ConstraintError as exc:          # the C target's own refusal (Cassie's loops: loop algorithms only)
        pytest.skip(f"the C target refuses {label} on {name}: {str(exc).splitlines()[0]}")
    for function, fp64, allowed, fp32, _, bound in family_errors(functions, robot, tmp_path):
        if fp64 > allowed and (name, label) in FP64_OPEN:
            pytest.xfail(FP64_OPEN[name, label])
        assert fp64 <= allowed, (function, fp64, allowed)
        if fp32 > bound and label in FP32_UNBOUNDED:
            pytest.xfail(FP32_UNBOUNDED[label])
        assert fp32 <= bound, (function, fp32, bound)


# -- nvcc (where installed) --------------------------------------------------------------------------
@needs_nvcc
def test_nvcc_builds_for_sm90_and_reports_registers_and_spills(out):
    """A 3-DoF chain: nvcc's build and report are the point, not the kernel's size (the ladder took 89 s)."""
    f = cd.generate("chain:n=3", None, "pv_osim", out_dir=out)
    for precision in ("double", "single"):
        m = json.loads(cuda.derive(f.manifest_path, precision, nvcc="auto").read_text())
        nv = m["nvcc"]
        assert nv["arch"] == "sm_90" and 0 < nv["registers"] <= 255 and nv["spill_stores_bytes"] >= 0
        assert "so" in m["files"] and "-arch=sm_90" in nv["command"]


@needs_nvcc
def test_single_precision_ptx_computes_nothing_in_double(out, tmp_path):
    """The FP32 kernel's PTX holds no f64 instruction but CUDA's own sincosf large-argument
    reduction (one int-to-double conversion and one multiply per angle)."""
    robot, cs = case("go1-4F3")
    f = cd.generate(robot, cs, "pv_osim", out_dir=out)
    cu = cuda.derive(f.manifest_path, "single", nvcc=None).with_suffix(".cu")
    subprocess.run(["nvcc", "-arch=sm_90", "-ptx", "-o", str(tmp_path / "k.ptx"), str(cu)], check=True, capture_output=True)
    ops = re.findall(r"^\s+([a-z.]*f64[a-z0-9.]*)", (tmp_path / "k.ptx").read_text(), re.M)
    angles = cu.read_text().count("cd_cuda_sincos(")
    assert set(ops) <= {"cvt.rn.f64.s64", "mul.f64"} and ops.count("mul.f64") <= angles, sorted(set(ops))


# -- the device path and bad input ----------------------------------------------------------------------
def test_without_a_gpu_a_call_is_one_clear_error(go1, out):
    robot, cs = go1
    f = cd.generate(robot, cs, "pv_osim", out_dir=out, target="cuda", nvcc=None)
    assert isinstance(f, CudaFunction) and f.manifest["target"] == "cuda" and f.manifest["layout"] == "soa"
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() > 0:
            pytest.skip("a GPU is present")
    except Exception:
        pass
    with pytest.raises(DelassusError) as err:
        f(np.array([robot.neutral_q()]))
    assert "\n" not in str(err.value)


def test_dlpack_round_trip_on_the_gpu(go1, out):
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() == 0:
            pytest.skip("no CUDA device")
    except Exception:
        pytest.skip("no CUDA device")
    robot, cs = go1
    f = cd.generate(robot, cs, "pv_osim", out_dir=out, target="cuda")
    Q = np.array([robot.random_q(np.random.default_rng(k)) for k in range(1000)])
    got = f(cupy.asarray(Q))
    assert isinstance(got, cupy.ndarray)
    assert batch_errors(type("G", (), {"outputs": lambda s, q: {"delassus": got.get()}})(), f.c_function,
                                [Q])["delassus"] < 1e-12


def test_bad_inputs_are_typed_errors(go1, out, tmp_path):
    robot, cs = go1
    g = host(cd.generate(robot, cs, "pv_osim", out_dir=out), tmp_path)
    with pytest.raises(InputError):
        g(np.zeros((3, 18)))
    with pytest.raises(InputError):
        g(np.zeros((3, 19)), v=np.zeros(3))
    with pytest.raises(DelassusError):
        cd.generate(robot, cs, "pv_osim", out_dir=out, target="cuda", precision="half")
    with pytest.raises(DelassusError):
        cd.generate(robot, cs, "pv_osim", out_dir=out, target="metal")


def test_unknown_statements_stop_the_rewrite():
    code = "\n".join([__import__("casadi_delassus.codegen.statements", fromlist=["x"]).BODY_START, "  casadi_real a0;", "  a0=arg[0]? arg[0][0] : 0;",
                      "  a0=mystery(a0);", "  return 0;", "}"])
    io = [{"rows": 1, "cols": 1, "size": 1}]
    with pytest.raises(CompilerError, match="mystery"):
        cuda.device_body(code, io, io, "double")
    with pytest.raises(CompilerError, match="unknown statement"):
        cuda.device_body(code.replace("  a0=mystery(a0);", "  goto x;"), io, io, "double")
    with pytest.raises(CompilerError, match="declared twice"):      # as the SIMD rewrite refuses it
        cuda.device_body(code.replace("  a0=mystery(a0);", "  casadi_real a0;"), io, io, "double")


@pytest.mark.parametrize("option", [("--target", "gpu"), ("--precision", "half"), ("--layout", "soaa")])
def test_cli_refuses_bad_target_precision_layout(tmp_path, option):
    r, _ = run("generate", "go1", "-c", "FL_foot:3d", "-a", "pv_osim", "-o", str(tmp_path), *option)
    refused(r, option[0])
    assert not list(tmp_path.iterdir())


def has_gpu():
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:           # no CuPy, or CuPy without a driver or device
        return False


def test_cli_generate_prints_the_stored_single_precision_error(tmp_path):
    r, _ = run("generate", "chain:n=3", "-c", "link3:3d", "-a", "pv_osim", "--target", "cuda", "--precision", "single",
               "-o", str(tmp_path))
    assert r.returncode == 0, r.stderr
    said = float(re.search(r"CUDA single soa, .*; host build \(float\) equals C \(double\) to (\S+) ", r.stdout)[1])
    stored = json.loads(next(tmp_path.rglob("pv_osim-cuda-f32.json")).read_text())["precision"]["max_rel_error"]
    assert said == float(f"{stored:.1e}") and 1e-9 < said < 1e-4


def test_cli_generate_says_what_was_built_run_and_checked(tmp_path):
    """Issue 34 point 7: where the kernel cannot run, the line says so and what the host build
    was measured against at build (the manifest's host_check, FP64 within FP64_TOL of C)."""
    r, _ = run("generate", "chain:n=3", "-c", "link3:3d", "-a", "pv_osim", "--target", "cuda", "-o", str(tmp_path))
    assert r.returncode == 0, r.stderr
    check = json.loads(next(tmp_path.rglob("pv_osim-cuda.json")).read_text())["host_check"]
    assert check["samples"] == cuda.ERROR_SAMPLES and check["max_rel_error"] <= FP64_TOL
    said = re.search(r"; host build equals C to (\S+) \(max rel\. error over (\d+) samples\) -> ", r.stdout)
    assert said and float(said[1]) == float(f"{check['max_rel_error']:.1e}") and int(said[2]) == cuda.ERROR_SAMPLES
    if has_gpu():
        assert "runs on the CUDA device here" in r.stdout
    elif shutil.which("nvcc"):
        assert re.search(r"; built \(nvcc: \d+ registers, \d+ B spill stores\), not run: no CUDA device here; ", r.stdout)
    else:
        assert "; not built: no nvcc here (the .cu is written); " in r.stdout


def test_without_a_cxx_compiler_a_double_build_says_its_host_build_was_not_checked(go1, out, monkeypatch):
    robot, cs = go1
    f = cd.generate(robot, cs, "pv_osim", out_dir=out)

    def no_cxx():
        raise CompilerError("no C++ compiler found (looked for $CXX, g++, c++, clang++)")
    monkeypatch.setattr(cuda, "find_cxx", no_cxx)
    m = json.loads(cuda.derive(f.manifest_path, "double", "aos", nvcc=None, force=True).read_text())
    assert m["host_check"] == {"not_run": "no C++ compiler found (looked for $CXX, g++, c++, clang++)"}
    with pytest.raises(CompilerError, match="no C"):            # single precision has no record without it
        cuda.derive(f.manifest_path, "single", "aos", nvcc=None, force=True)


def check_rows(output, robot):
    """{oracle: the row's cells} of `check`'s table."""
    rows = [re.split(r"\s{2,}", line) for line in output.splitlines() if line.startswith(robot + " ")]
    return {row[3]: row for row in rows}


def test_cli_check_target_cuda_runs_the_host_build_against_c_and_numpy(tmp_path):
    r, _ = run("check", "chain:n=3", "-c", "link3:3d", "-a", "pv_osim", "--target", "cuda", "--samples", "20",
               "-o", str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    rows = check_rows(r.stdout, "chain_n3")
    assert set(rows) == {"C target", "numpy"} and all(row[2] == "pv_osim (cuda host)" and row[-2] == "ok"
                                                      for row in rows.values())
    assert float(rows["C target"][7]) <= FP64_TOL
    assert "C target: pv_osim: " in r.stderr and "host build equals C to" in r.stderr


def test_cli_check_target_cuda_fails_a_wrong_kernel(tmp_path, monkeypatch):
    """The same check with one output entry of the kernel moved by 1e-6: the C target and the
    NumPy reference both fail it (in-process, so that the rewrite can be broken)."""
    from click.testing import CliRunner
    from casadi_delassus import cli
    body = cuda.device_body
    monkeypatch.setattr(cuda, "device_body", lambda *a: (lambda b, used: (b.replace("CD_AT(y0, 0)=", "CD_AT(y0, 0)=1e-6+", 1),
                                                                          used))(*body(*a)))
    bad = CliRunner().invoke(cli.cli, ["check", "chain:n=3", "-c", "link3:3d", "-a", "pv_osim", "--target", "cuda",
                                       "--samples", "20", "-o", str(tmp_path)])
    assert bad.exit_code == 1, bad.output
    rows = check_rows(bad.stdout, "chain_n3")
    assert {o: row[-2] for o, row in rows.items()} == {"C target": "FAIL", "numpy": "FAIL"}
    assert float(rows["C target"][7]) > 1e-8


@pytest.mark.skipif(has_gpu(), reason="a GPU is present: bench --gpu would run")
def test_bench_gpu_without_a_gpu_is_one_line_and_exit_2(tmp_path):
    r, _ = run("bench", "go1", "-s", "4F3", "-a", "pv_osim", "--gpu", "-o", str(tmp_path))
    refused(r, "bench --gpu", "no CUDA device or CuPy")
    assert not list(tmp_path.iterdir())        # refused before generating anything


def test_bench_gpu_with_a_device_but_no_nvcc_names_nvcc(monkeypatch):
    from casadi_delassus.timing import gpu_bench
    monkeypatch.setattr(gpu_bench, "device_cupy", lambda: None)
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    with pytest.raises(DelassusError, match="nvcc") as err:
        gpu_bench.require_gpu()
    assert "\n" not in str(err.value)


def test_bench_gpu_prepares_and_measures_one_robot(out, monkeypatch, capsys):
    """bench --gpu's path with the device replaced by the host build: both precisions and layouts,
    checked against the C target's outputs before they are timed."""
    from casadi_delassus.timing import gpu_bench, gpu_kernels
    measure = gpu_kernels.measure
    monkeypatch.setattr(gpu_bench, "require_gpu", lambda: None)
    monkeypatch.setattr(gpu_kernels, "measure", lambda folder, host, sizes, reps: measure(folder, True, sizes, reps))
    robot = cd.load_robot("chain:n=3")
    rows = gpu_bench.bench_on_gpu("chain3", robot, ["link3:3d"], "pv_osim", functools.partial(cd.generate, out_dir=out),
                                  sizes=[200], reps=1)
    assert {(r["precision"], r["layout"]) for r in rows} == {(p, l) for p in PRECISIONS for l in cuda.LAYOUTS}
    assert all(r["error"] < (1e-13 if r["precision"] == "double" else 1e-4) for r in rows)
    assert "| chain3 | single | aos | 200 |" in capsys.readouterr().out


def test_the_gpu_measurement_imports_no_part_of_the_package():
    """bench/gpu.py loads timing/gpu_kernels.py by its path on a GPU machine without CasADi."""
    import ast
    from pathlib import Path
    tree = ast.parse((Path(cd.__file__).parent / "timing" / "gpu_kernels.py").read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0}
    assert not any(isinstance(n, ast.ImportFrom) and n.level for n in ast.walk(tree))
    assert imported <= {"__future__", "ctypes", "json", "re", "subprocess", "sys", "time", "concurrent", "numpy", "cupy"}


def test_without_nvcc_the_cuda_target_writes_the_source_and_no_device_library(go1, out, monkeypatch):
    """What a machine without the CUDA toolkit gets (make test there): the .cu and its manifest,
    no .so, no nvcc report, and a call that says how to get the device library."""
    robot, cs = go1
    f = cd.generate(robot, cs, "pv_osim", out_dir=out)
    monkeypatch.setattr(shutil, "which", lambda name, *a, which=shutil.which, **k: None if name == "nvcc" else which(name))
    assert cuda.find_nvcc() is None
    path = cuda.derive(f.manifest_path, "double", "aos", nvcc="auto")
    m = json.loads(path.read_text())
    assert "nvcc" not in m and "so" not in m["files"] and path.with_suffix(".cu").exists()
    with pytest.raises(DelassusError, match="nvcc was not found"):
        CudaFunction(path)._entry()


def test_the_gpu_bench_run_half_on_the_host(out, tmp_path):
    """bench/gpu.py run --host on a prepared folder of one small case: builds both layouts,
    checks them against the CPU reference and prints a row per kernel and N.  The script is what is tested: a 3-DoF
    chain, not the ladder (76 s of host builds on 2 cores; the ladder's kernels equal the C path in
    test_ladder_and_cassie_loops_equal_the_c_path)."""
    import sys
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[2] / "bench"))
    import gpu
    robot = cd.load_robot("chain:n=3")
    f = cd.generate(robot, None, "pv_osim", out_dir=out)
    cuda.shim_header(tmp_path)
    Q = np.array([robot.random_q(np.random.default_rng(k)) for k in range(64)])
    np.savez(tmp_path / "chain.npz", Q=Q, **f.outputs(Q))
    listed = []
    for precision in PRECISIONS:
        path = cuda.derive(f.manifest_path, precision, nvcc=None)
        shutil.copy(path.with_suffix(".cu"), tmp_path / f"chain-{precision}.cu")
        shutil.copy(path, tmp_path / f"chain-{precision}.json")
        listed.append({"case": "chain", "precision": precision, "stem": f"chain-{precision}", "ref": "chain.npz"})
    (tmp_path / "cases.json").write_text(json.dumps(listed))
    rows = gpu.run(tmp_path, host=True, sizes=[300], reps=2)
    assert len(rows) == 4 and all(len(r["configs_per_us"]) == 2 for r in rows)
    errors = {(r["precision"], r["layout"]): r["error"] for r in rows}
    assert max(errors[("double", "soa")], errors[("double", "aos")]) < 1e-13
    assert 1e-9 < errors[("single", "soa")] < 1e-4


def test_runtime_constraint_matrices_are_read_in_the_users_row_major_order(out, tmp_path):
    """A K_<link> input (m_i x 6, a matrix input: CasADi's column-major entries moved to row-major)."""
    robot = cd.load_robot("go1")
    f = cd.generate(robot, ["FL_foot:3d-input", "RR_foot:6d"], "pv_osim", out_dir=out)
    assert any(len(i["shape"]) == 2 and i["shape"][1] == 6 for i in f.inputs)
    assert_equal(f, robot, tmp_path)


# -- a manifest is data: checked against the library before any call (issue 31 point 9) -----------------------
@pytest.fixture(scope="module")
def chain_builds(tmp_path_factory):
    """chain:n=3's naive in both precisions: {precision: (manifest path, its host build)}."""
    out = tmp_path_factory.mktemp("cuda_chain")
    c = cd.generate("chain:n=3", None, "naive", out_dir=out)
    builds = {}
    for precision in PRECISIONS:
        path = cuda.derive(c.manifest_path, precision, nvcc=None)
        builds[precision] = path, cuda.host_library(path.with_suffix(".cu"), out / f"host-{precision}.so")
    return builds


def defined_symbols(so):
    """The names of the functions ``so`` defines (nm)."""
    out = subprocess.run(["nm", "-D", "--defined-only", str(so)], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if " T " in line}


@pytest.mark.skipif(shutil.which("nm") is None, reason="needs nm")
def test_float_and_double_builds_share_no_symbol(chain_builds):
    """The single-precision build's names end in _SINGLE, as the C target's: its manifest's function and entry points
    and every symbol its library defines differ from the double build's."""
    (double, d_so), (single, s_so) = chain_builds["double"], chain_builds["single"]
    d, s = (json.loads(p.read_text()) for p in (double, single))
    assert s["function"] == d["function"] + "_SINGLE" and s["entry"] == s["function"] + "_cuda"
    assert s["c_function"] == d["c_function"] == d["function"]
    d_syms, s_syms = defined_symbols(d_so), defined_symbols(s_so)
    assert {d["entry"], d["raw_entry"], d["function"] + "_cuda_layout"} <= d_syms
    assert {s["entry"], s["raw_entry"], s["function"] + "_cuda_layout"} <= s_syms
    assert not {x for x in d_syms & s_syms if x.startswith("cd_")}


@pytest.mark.parametrize("manifest_precision", PRECISIONS)
def test_a_library_of_the_other_precision_is_refused(chain_builds, manifest_precision):
    """A double manifest with the float build's library (or the reverse) is refused with one line before any call:
    it returned garbage when both exported the same symbols."""
    other = "single" if manifest_precision == "double" else "double"
    path, so = chain_builds[manifest_precision][0], chain_builds[other][1]
    with pytest.raises(ArtifactError, match="a library of another function or precision") as err:
        CudaFunction(path, host_library=so)
    assert "\n" not in str(err.value)
    renamed = json.loads(path.read_text()) | {k: v for k, v in json.loads(chain_builds[other][0].read_text()).items()
                                              if k in ("function", "entry", "raw_entry")}
    with pytest.raises(ArtifactError, match=f"computes with {8 if other == 'double' else 4}-byte values"):
        CudaFunction(renamed, host_library=so)


# hostile manifests as dicts; each is tried in a process of its own (before these checks, the library wrote past
# buffers sized from the dict: a heap overflow, SIGSEGV or SIGABRT)
_HOSTILE = r"""
import json, sys
import numpy as np
from casadi_delassus.errors import DelassusError
from casadi_delassus.runtime.cuda import CudaFunction
manifest, so, change = json.loads(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
manifest.update(change.get("set", {}))
for part, k, value in change.get("spec", []):
    manifest[part][k]["shape"] = value
try:
    f = CudaFunction(manifest, host_library=so)
    out = f.outputs(np.zeros((64, 3)))
    print(json.dumps({"said": None, "shapes": {k: list(v.shape) for k, v in out.items()}}))
except DelassusError as exc:
    print(json.dumps({"said": str(exc), "type": type(exc).__name__}))
"""
HOSTILE = {
    "output smaller than the library writes": {"spec": [["outputs", 0, [1, 1]]]},
    "output larger than the library writes": {"spec": [["outputs", 0, [60, 60]]]},
    "input larger than the library reads": {"spec": [["inputs", 0, [3000]]]},
    "transposed output": {"spec": [["outputs", 0, [3, 12]]]},
    "an output fewer": {"set": {"outputs": []}},
    "an input more": {"set": {"inputs": [{"name": "q", "shape": [3]}, {"name": "v", "shape": [3]}]}},
    "shape of a negative size": {"spec": [["outputs", 0, [-6, 6]]]},
    "shape of a huge size": {"spec": [["outputs", 0, [2 ** 40, 2 ** 40]]]},
    "shape as text": {"spec": [["outputs", 0, "66"]]},
    "shape of floats": {"spec": [["outputs", 0, [6.0, 6.0]]]},
    "precision unknown": {"set": {"precision": {"type": "quad"}}},
    "precision missing": {"set": {"precision": None}},
    "precision of the other build": {"set": {"precision": {"type": "single"}}},
    "entry naming libc's system": {"set": {"entry": "system"}},
    "function naming libc's system": {"set": {"function": "system", "entry": "system_cuda", "raw_entry": "system_cuda_raw"}},
    "function not an identifier": {"set": {"function": "x; system", "entry": "x; system_cuda"}},
    "inputs not a list": {"set": {"inputs": "q"}},
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_manifest_dict_is_refused_with_one_line(chain_builds, name):
    path, so = chain_builds["double"]
    r = subprocess.run([sys.executable, "-c", _HOSTILE, path.read_text(), str(so), json.dumps(HOSTILE[name])],
                       capture_output=True, text=True)
    assert r.returncode == 0, f"the process died (status {r.returncode}): {r.stderr[-500:]}"
    got = json.loads(r.stdout)
    assert got["said"] and got["type"] == "ArtifactError" and "\n" not in got["said"], got


def test_a_manifest_dict_that_matches_its_library_runs_and_other_arguments_are_refused(chain_builds):
    """The intact manifest as a dict runs the host build (equal to the manifest by path); an array for the manifest
    (CudaFunction(Q, Q)) or the host library, and a dict without a host build, are one-line errors."""
    path, so = chain_builds["double"]
    Q = np.random.default_rng(0).normal(size=(8, 3))
    by_path, by_dict = CudaFunction(path, host_library=so), CudaFunction(json.loads(path.read_text()), host_library=so)
    assert np.array_equal(by_path(Q), by_dict(Q))
    for args, match in (((Q, Q), "a CUDA manifest is a dict or the path of one, not ndarray"),
                        ((path, Q), "host_library: the path of a host build, not ndarray"),
                        ((json.loads(path.read_text()),), "runs a host build only")):
        with pytest.raises(ArtifactError, match=match):
            CudaFunction(*args)
