"""Single precision (issue 26; codegen/precision.py, verify/precision.py): the float build of a
function against its double build, its scalar call against its batch, float32 arrays from
Python, the stored error bound and the check that must fail on wrong float code."""
import json

import numpy as np
import pytest

import casadi_delassus as cd
from casadi_delassus.codegen.precision import hand_written_to_float, to_float
from casadi_delassus.errors import DelassusError, InputError
from casadi_delassus.verify import precision

from cli_runner import run_cli

# the double batch equals its single calls to 1e-14 (tests/runtime/test_batch.py), ~45 ulp of double:
# the same number of float ulp (FMA contraction differs between the scalar and the vector code)
FLOAT_ULPS_45 = 45 * np.finfo(np.float32).eps

# name -> (robot, scenario, generate keywords): Delassus family, dynamics, an operator, a derivative
CASES = {
    "go1 4F3 auto": ("go1", "4F3", {}),
    "chain delassus": ("chain:n=3", None, {"algorithm": "pv_osim"}),
    "chain aba": ("chain:n=3", None, {"algorithm": "aba"}),
    "chain delassus_apply": ("chain:n=3", None, {"algorithm": "delassus_apply"}),
    "chain aba jvp": ("chain:n=3", None, {"algorithm": "aba", "derivative": "jvp"}),
}


@pytest.fixture(scope="module", params=list(CASES))
def pair(request, out_dir):
    """(the single-precision function, its double build)."""
    robot, scenario, kw = CASES[request.param]
    f32 = cd.generate(robot, scenario, out_dir=out_dir, precision="single", **kw)
    return f32, f32.double_twin()


def batch_inputs(f, n, seed=0):
    """n random inputs of f stacked by name (the sampler of check and of the build's measurement)."""
    samples = list(precision.random_samples(f, f.robot, f.constraints, n, seed))
    return {name: np.array([x[name] for x in samples]) for name in samples[0]}


def rel(a, b):
    return float(np.abs(np.asarray(a, np.float64) - b).max() / np.abs(b).max())


def test_the_manifest_records_a_measured_bound(pair):
    f32, f64 = pair
    p = f32.precision
    assert p["type"] == "single" and f64.precision == {"type": "double"}
    assert p["samples"] == precision.SAMPLES and p["seed"] == precision.BUILD_SEED
    # a measurement: above float's rounding, far below what wrong code gives
    assert np.finfo(np.float32).eps / 8 < p["median_rel_error"] <= p["max_rel_error"] < 1e-4
    print(f"{f32.manifest['function']}: max {p['max_rel_error']:.1e}, median {p['median_rel_error']:.1e}")


def test_single_and_double_builds_never_share_a_file(pair):
    f32, f64 = pair
    assert f32.so_path.parent == f64.so_path.parent
    assert f32.so_path.name.endswith("-single.so") and f32.so_path != f64.so_path
    assert f32.manifest["function"] == f64.manifest["function"] + "_SINGLE"
    assert f32.manifest["hash"] != f64.manifest["hash"]
    assert "-Werror=double-promotion" in f32.manifest["cflags"]
    assert f32.manifest["batch"]["lanes"] == 2 * f64.manifest["batch"]["lanes"]


def test_within_the_stored_bound_of_double_on_fresh_samples(pair):
    f32, _ = pair
    result = cd.check_precision(f32, samples=100, seed=7)
    assert result["passed"], result


def test_batch_of_float32_arrays_equals_single_calls(pair):
    f32, f64 = pair
    x = batch_inputs(f32, 37, seed=3)
    x32 = {k: v.astype(np.float32) for k, v in x.items()}
    batch = f32.outputs(**x32)
    want = f64.outputs(**x)
    for name, got in batch.items():
        assert got.dtype == np.float32 and got.flags.c_contiguous and got.shape == want[name].shape
        single = np.array([f32.outputs(**{k: v[i] for k, v in x32.items()})[name] for i in range(37)])
        assert single.dtype == np.float32
        err = max(rel(got[i], single[i]) for i in range(37))
        print(f"{f32.manifest['function']} {name}: batch vs single call {err:.1e}, vs double "
              f"{max(rel(got[i], want[name][i]) for i in range(37)):.1e}")
        assert err <= FLOAT_ULPS_45
        assert max(rel(got[i], want[name][i]) for i in range(37)) <= precision.CHECK_FACTOR * f32.precision["max_rel_error"]


def test_bit_identical_across_threads_sizes_and_positions(pair):
    f32, _ = pair
    x = {k: v.astype(np.float32) for k, v in batch_inputs(f32, 101, seed=4).items()}
    first = f32.input_names[0]
    want = f32.outputs(**x)
    for threads in (1, 2, 3):
        assert all(np.array_equal(v, want[k]) for k, v in f32.outputs(**x, threads=threads).items()), threads
    for start, stop in ((0, 1), (5, 22), (37, 101)):
        part = f32.outputs(**{k: v[start:stop] for k, v in x.items()})
        assert all(np.array_equal(v, want[k][start:stop]) for k, v in part.items()), (start, stop)
    fortran = f32.outputs(**{k: (np.asfortranarray(v) if k == first else v) for k, v in x.items()}, threads=2)
    assert all(np.array_equal(v, want[k]) for k, v in fortran.items())


@pytest.mark.parametrize("cflags", [("auto",), ("auto", "-mno-avx512f")], ids=["native", "avx2"])
def test_streamed_float_outputs_at_every_alignment(cflags, out_dir):
    """Above CD_BATCH_STREAM_BYTES the float output goes out with non-temporal stores: whole
    vectors where instances are vector-aligned, 16-byte halves (AVX) where they are 16-byte
    aligned, plain stores otherwise; on one thread (one call of the entry point over all n)
    every alignment gives the result of two threads (two calls each below the threshold), bit
    for bit, and the single call's to rounding."""
    f32 = cd.generate("go1", "4F3", out_dir=out_dir, precision="single", cflags=cflags)
    n = 7400                                        # 7400 x 144 floats > 4 MiB
    Q = f32.robot.random_q(np.random.default_rng(9), 64).astype(np.float32)[np.arange(n) % 64]
    want = f32(Q, threads=2)
    raw = np.empty(n * 144 + 64, np.float32)
    start = (-raw.ctypes.data % 64) // 4
    for offset in (0, 8, 4, 1):                     # bytes mod 64: 0, 32, 16, 4
        out = raw[start + offset:start + offset + n * 144].reshape(n, 12, 12)
        out[...] = np.nan
        assert f32(Q, out=out, threads=1) is out and np.array_equal(out, want), offset
    assert max(rel(want[i], f32(Q[i])) for i in range(64)) <= FLOAT_ULPS_45


def test_float64_inputs_are_rounded_to_float32(pair):
    f32, _ = pair
    x = batch_inputs(f32, 9, seed=5)
    got = f32.outputs(**x)
    again = f32.outputs(**{k: v.astype(np.float32) for k, v in x.items()})
    assert all(np.array_equal(v, again[k]) and v.dtype == np.float32 for k, v in got.items())


def test_a_wrong_float_result_fails_the_bound(pair):
    """The bound check can fail: a result off by 1e-5 relative (wrong float code errs by much
    more: a constant cut to fewer digits, an operation dropped) is refused."""
    f32, f64 = pair

    class Perturbed:
        precision = f32.precision

        def outputs(self, **x):
            return {k: v * np.float32(1 + 1e-5) for k, v in f32.outputs(**x).items()}

    samples = list(precision.random_samples(f32, f32.robot, f32.constraints, 20, 11))
    assert precision.within_bound(f32, f64.outputs, samples)[2]
    worst, allowed, passed = precision.within_bound(Perturbed(), f64.outputs, samples)
    assert not passed and worst > allowed


def test_out_must_be_float32(out_dir):
    f32 = cd.generate("chain:n=3", out_dir=out_dir, precision="single", algorithm="pv_osim")
    q = np.zeros((4, f32.robot.nq), np.float32)
    out = np.empty((4, *f32.output_specs[0]["shape"]), np.float32)
    assert f32(q, out=out) is out
    with pytest.raises(InputError, match="float32"):
        f32(q, out=np.empty_like(out, dtype=np.float64))
    with pytest.raises(InputError, match="float32"):
        f32(q[0], out=np.empty(f32.output_specs[0]["shape"], np.float64, order="F"))


def test_casadi_external_is_refused_for_float_code(out_dir):
    with pytest.raises(DelassusError, match="casadi.external"):
        cd.generate("chain:n=3", out_dir=out_dir, precision="single", algorithm="pv_osim", casadi_derivatives=True)
    with pytest.raises(DelassusError, match="precision 'half'"):
        cd.generate("chain:n=3", out_dir=out_dir, precision="half")
    f32 = cd.generate("chain:n=3", out_dir=out_dir, precision="single", algorithm="pv_osim")
    with pytest.raises(DelassusError, match="single precision"):
        f32.casadi_function()
    with pytest.raises(DelassusError, match="single precision"):
        cd.load(f32.manifest_path, backend="casadi")


def test_relative_error_is_scaled_by_the_largest_entry():
    ref = np.array([[4.0, 1e-9], [0.0, -2.0]])
    assert precision.relative_error(ref, ref) == 0.0
    assert precision.relative_error(ref, ref + [[0, 4e-6], [0, 0]]) == pytest.approx(1e-6)
    assert precision.relative_error(ref, ref * np.nan) == np.inf
    assert precision.relative_error(np.zeros(3), np.ones(3)) == np.inf
    assert precision.relative_error(ref * np.inf, ref) == np.inf         # a non-finite reference too


def test_relative_errors_of_a_batch_are_each_samples_relative_error():
    """One definition for both targets: the batch form (the CUDA target's) is sample by sample
    the single-sample one (the C target's)."""
    rng = np.random.default_rng(2)
    ref = rng.normal(size=(6, 3, 4))
    ref[2] = 0.0
    val = ref + rng.normal(size=ref.shape) * 1e-7
    val[2], val[4, 1, 1] = 0.0, np.nan
    got = precision.relative_errors(ref, val)
    assert got.shape == (6,) and got[2] == 0.0 and got[4] == np.inf and 1e-9 < got[0] < 1e-6
    assert got.tolist() == [precision.relative_error(r, v) for r, v in zip(ref, val)]


def test_to_float_casts_literals_and_renames_libm_calls():
    line = "  a3=(2.*sqrt(a1))+sin(a2)-1.5e-03*casadi_sq(a4)+fabs(a5)*3e2;"
    assert to_float(line) == ("  a3=(((casadi_real)2.)*sqrtf(a1))+sinf(a2)-((casadi_real)1.5e-03)*casadi_sq(a4)"
                              "+fabsf(a5)*((casadi_real)3e2);")
    assert "arg[0][3]" in to_float("  a1=arg[0]? arg[0][3] : 0;")         # indices are no literals
    assert to_float("/* 2.5 */\n#if X > 2.5") == "/* 2.5 */\n#if X > 2.5"   # comments, preprocessor


@pytest.mark.parametrize("argv", [["generate", "chain:n=3", "--precision", "half"],
                                  ["check", "chain:n=3", "--precision", "float"]])
def test_a_bad_precision_is_one_line_and_exit_2(argv, tmp_path):
    proc = run_cli(*argv, "-o", tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "precision" in proc.stderr
    assert not any(tmp_path.iterdir())


def test_generate_prints_the_bound(tmp_path):
    proc = run_cli("generate", "chain:n=3", "-a", "pv_osim", "--precision", "single", "-o", tmp_path)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads(next(tmp_path.rglob("pv_osim-single.json")).read_text())
    assert f"max {manifest['precision']['max_rel_error']:.1e}" in proc.stdout


@pytest.mark.parametrize("lanes", [1, 4, 8, 16])
def test_every_float_lane_count_agrees(lanes, out_dir):
    """The float batch at each lane count (SSE 4, AVX 8, AVX-512 16; 1: a loop over the scalar
    call): its register transposes over each instance's entries in order and their remainder
    (go1: q of 19 entries, 12 x 12 outputs)
    and libmvec's float sin/cos of that width, against single calls and the double build."""
    if lanes == 16 and "avx512f" not in open("/proc/cpuinfo").read():
        pytest.skip("no AVX-512 here")
    f32 = cd.generate("go1", "4F3", out_dir=out_dir, precision="single", cflags=("auto", f"-DCD_BATCH_LANES={lanes}"))
    assert f32.manifest["batch"]["lanes"] == lanes
    f64 = f32.double_twin()
    Q = f64.robot.random_q(np.random.default_rng(lanes), 2 * lanes + 3)
    D = f32(Q.astype(np.float32))
    single = np.array([f32(q) for q in Q])
    assert max(rel(D[i], single[i]) for i in range(len(Q))) <= FLOAT_ULPS_45
    assert max(rel(D[i], f64(Q[i])) for i in range(len(Q))) <= precision.CHECK_FACTOR * f32.precision["max_rel_error"]


def test_hand_written_to_float_declares_casadi_real_and_casts_constants():
    """The rollout's templates in float (issue 33): double declared casadi_real (sizeof too), literals and libm calls as
    to_float, a #define of a floating constant cast (it enters expressions), other preprocessor lines and comments
    kept."""
    code = ("#define RHO_CLIP 1e6\n#define CD_MW (3 * CD_M)\n/* double 2.5 */\n"
            "static double f(const double *x) { return sqrt(x[0]) * 0.5 + sizeof(double); }")
    assert hand_written_to_float(code).split("\n") == [
        "#define RHO_CLIP ((casadi_real)1e6)", "#define CD_MW (3 * CD_M)", "/* double 2.5 */",
        "static casadi_real f(const casadi_real *x) { return sqrtf(x[0]) * ((casadi_real)0.5) + sizeof(casadi_real); }"]


def test_rollout_errors_scale_by_the_double_states_and_flag_other_stops():
    """rollout_errors: max |single − double| over the steps per environment relative to the double states' largest
    magnitude, q and v apart, the worse of them; inf where one environment stopped at another step or with another
    status."""
    from casadi_delassus.runtime.contact_rollout import RawRollouts
    T, N = 3, 2
    Q = np.ones((T + 1, N, 2))
    V = np.full((T + 1, N, 2), 0.5)
    raw = lambda Q, V, count, status: RawRollouts(np.array(count), Q, V, *(np.zeros(0),) * 5, np.array(status))  # noqa: E731
    double = raw(Q, V, [T, T], np.zeros((T, N), dtype=int))
    V2 = V.copy()
    V2[2, 0, 1] += 1e-3
    assert np.allclose(precision.rollout_errors(double, raw(Q, V2, [T, T], np.zeros((T, N), dtype=int))), [2e-3, 0])
    assert list(precision.rollout_errors(double, raw(Q, V2, [T, T], np.zeros((T, N), dtype=int)), steps=1)) == [0, 0]
    status = np.zeros((T, N), dtype=int)
    status[-1, 1] = 3
    assert list(precision.rollout_errors(double, raw(Q, V, [T, T], status))) == [0, np.inf]
    assert list(precision.rollout_errors(double, raw(Q, V, [T, 1], np.zeros((T, N), dtype=int)))) == [0, np.inf]
