"""Batched evaluation (codegen/batch.py): the vector rewrite of CasADi's code against the
scalar code op by op (special values included, every lane count), the batched entry point
against the single call on go1 4F3 (a Delassus function and pv_early with its if_else, fmin
and copysign), bit-identical results across thread counts, batch sizes and positions, the
Python call's shapes and errors, and dask blocks on a local cluster."""
import ctypes
import json
import os
import subprocess
import sys

import casadi as ca
import numpy as np
import pytest

import casadi_delassus as cd
from casadi_delassus.verify import reference as ref
from casadi_delassus.codegen import precision as fp, vectorise
from casadi_delassus.runtime import batch
from casadi_delassus.codegen.build import accepts_native, find_compiler
from casadi_delassus.codegen.emit import TEMPLATES, casadi_source
from casadi_delassus.errors import CompilerError, InputError

SPECIAL = [0.0, -0.0, 0.3, -0.7, 1.0, -2.5, 3.0, 1e300, -1e-310, np.inf, -np.inf, np.nan, 1e5, -31.4]


def all_ops():
    """Every operation CasADi's C code generator prints for SX, as one output each."""
    x, y = ca.SX.sym("x", 3), ca.SX.sym("y")
    a = x[0]
    ops = [a + y, a - y, a * y, a / y, -a, ca.exp(a), ca.log(a), a ** y, a ** 3, ca.sqrt(a), a ** 2, 2 * a,
           ca.sin(a), ca.cos(a), ca.tan(a), ca.asin(a), ca.acos(a), ca.atan(a), a < y, a <= y, a == y, a != y,
           ca.logic_not(a), ca.logic_and(a, y), ca.logic_or(a, y), ca.floor(a), ca.ceil(a), ca.fmod(a, y),
           ca.fabs(a), ca.sign(a), ca.copysign(a, y), ca.if_else(a < y, x[1], x[2]), ca.erf(a), ca.fmin(a, y),
           ca.fmax(a, y), 1 / a, ca.sinh(a), ca.cosh(a), ca.tanh(a), ca.asinh(a), ca.acosh(a), ca.atanh(a),
           ca.atan2(a, y), ca.log1p(a), ca.expm1(a), ca.hypot(a, y), ca.if_else(y, x[1], x[2], True),
           0.1 * a + 3, ca.SX(np.inf), ca.SX(-np.inf), ca.SX(np.nan), ca.if_else(ca.fabs(a) > 1, ca.sin(x[1]), 0)]
    names = ["+", "-", "*", "/", "neg", "exp", "log", "pow", "cube", "sqrt", "sq", "twice", "sin", "cos", "tan",
             "asin", "acos", "atan", "<", "<=", "==", "!=", "not", "and", "or", "floor", "ceil", "fmod", "fabs",
             "sign", "copysign", "if_else", "erf", "fmin", "fmax", "inv", "sinh", "cosh", "tanh", "asinh", "acosh",
             "atanh", "atan2", "log1p", "expm1", "hypot", "if_else short", "affine", "inf", "-inf", "nan",
             "if_else zero"]
    return ca.Function("ops", [x, y], [ca.vertcat(*ops)], ["x", "y"], ["r"]), names


@pytest.fixture(scope="module")
def ops_source():
    f, names = all_ops()
    manifest = {"inputs": [{"name": "x", "shape": [3]}, {"name": "y", "shape": [1]}],
                "outputs": [{"name": "r", "shape": [len(names), 1]}]}
    code = casadi_source(f)
    return code + "\n" + vectorise.render(f, manifest, code, TEMPLATES)[0], names


def compile_ops(source, tmp_path, flags, checked=False):
    """The ops function and its batch entry point, unchecked (special values go through) unless
    ``checked``."""
    cc = find_compiler()
    c = tmp_path / "ops.c"
    c.write_text(source)
    so = tmp_path / f"ops{abs(hash((flags, checked)))}.so"
    native = ["-march=native"] if accepts_native(cc) else []
    subprocess.run([cc, "-O2", "-ffp-contract=off", "-fno-math-errno", *([] if checked else ["-DCD_BATCH_UNCHECKED"]),
                    *native, *flags, "-fPIC", "-shared", "-o", str(so), str(c), "-lm"], check=True, capture_output=True)
    return ctypes.CDLL(str(so))


def scalar_ops(lib, X, Y, size):
    fn = lib.ops
    fn.restype = ctypes.c_int
    out = np.empty((len(X), size))
    p = ctypes.POINTER(ctypes.c_double)
    for i, (x, y) in enumerate(zip(X, Y)):
        x, y, r = np.ascontiguousarray(x), np.array([y]), np.empty(size)
        arg = (p * 2)(x.ctypes.data_as(p), y.ctypes.data_as(p))
        res = (p * 1)(r.ctypes.data_as(p))
        assert fn(arg, res, None, None, 0) == 0
        out[i] = r
    return out


def batch_ops(lib, X, Y, size, expect=0):
    fn = lib.ops_batch
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_longlong] + [ctypes.c_void_p] * 3
    X, Y, out = np.ascontiguousarray(X), np.ascontiguousarray(Y), np.empty((len(X), size))
    assert fn(len(X), X.ctypes.data, Y.ctypes.data, out.ctypes.data) == expect
    return out


@pytest.mark.parametrize("flags", [(), ("-DCD_BATCH_LANES=1",), ("-DCD_BATCH_LANES=2",), ("-DCD_BATCH_LANES=8",),
                                   ("-DCD_BATCH_NO_LIBMVEC",)], ids=["native", "lanes1", "lanes2", "lanes8", "libm"])
def test_every_op_matches_the_scalar_code(ops_source, tmp_path, flags):
    """Bit for bit (NaN as NaN), special values included, except sin/cos through libmvec
    (a few ulp), on 197 instances (a partial last group) and on 0 and 1."""
    source, names = ops_source
    lib = compile_ops(source, tmp_path, flags)
    rng = np.random.default_rng(0)
    grid = np.array([(a, b) for a in SPECIAL for b in SPECIAL])
    X = np.column_stack([grid[:, 0], rng.normal(size=len(grid)), rng.normal(size=len(grid))])
    X = np.vstack([X, rng.normal(size=(1, 3))])
    Y = np.r_[grid[:, 1], 0.5]
    with np.errstate(all="ignore"):
        want, got = scalar_ops(lib, X, Y, len(names)), batch_ops(lib, X, Y, len(names))
    lanes = lib.ops_batch_lanes()
    forced = {"-DCD_BATCH_LANES=1": 1, "-DCD_BATCH_LANES=2": 2, "-DCD_BATCH_LANES=8": 8}
    assert lanes == forced.get(flags[0] if flags else None, lanes) >= 1
    isa = ctypes.cast(lib.ops_batch_isa, ctypes.CFUNCTYPE(ctypes.c_char_p))().decode()
    inexact = {"sin", "cos", "if_else zero"} if isa.endswith("libmvec") else set()
    for k, name in enumerate(names):
        w, g = want[:, k], got[:, k]
        same = (np.isnan(w) & np.isnan(g)) | (w.view(np.int64) == g.view(np.int64))
        if name in inexact:
            same |= np.abs(g - w) <= 4 * np.spacing(np.abs(w))
        assert same.all(), f"{name}: x = {X[~same][0]}, y = {Y[~same][0]}: scalar {w[~same][0]!r}, batch {g[~same][0]!r}"
    assert np.array_equal(batch_ops(lib, X[:1], Y[:1], len(names)), got[:1], equal_nan=True)
    assert batch_ops(lib, X[:0], Y[:0], len(names)).shape == (0, len(names))


@pytest.mark.parametrize("flags", [(), ("-DCD_BATCH_LANES=1",), ("-DCD_BATCH_LANES=2",), ("-DCD_BATCH_LANES=8",)],
                         ids=["native", "lanes1", "lanes2", "lanes8"])
def test_checked_batches_name_the_first_refused_instance(ops_source, tmp_path, flags):
    """Without -DCD_BATCH_UNCHECKED the entry point returns -1 - i for the first instance i
    with a non-finite input entry (in a full or the last, partial group), else 0 with the
    unchecked code's results."""
    source, names = ops_source
    checked = compile_ops(source, tmp_path, flags, checked=True)
    unchecked = compile_ops(source, tmp_path, flags)
    rng = np.random.default_rng(1)
    X, Y = rng.normal(size=(11, 3)), rng.normal(size=11)
    with np.errstate(all="ignore"):
        assert np.array_equal(batch_ops(checked, X, Y, len(names)), batch_ops(unchecked, X, Y, len(names)),
                              equal_nan=True)
        for i, where in ((5, "X"), (9, "Y"), (10, "X"), (0, "Y")):
            bad_X, bad_Y = X.copy(), Y.copy()
            if where == "X":
                bad_X[i, 2] = np.inf
            else:
                bad_Y[i] = np.nan
            bad_X[i + 1:, 0] = np.nan                  # later instances too: the first is named
            assert batch_ops(checked, bad_X, bad_Y, len(names), expect=-1 - i) is not None


def _body(extra):
    f, _ = all_ops()
    code = casadi_source(f)
    return code.replace("  return 0;\n}", f"{extra}\n  return 0;\n}}", 1)


def matrix_ops(precision):
    """A function of a 3 x 5 matrix and a vector of 11 whose outputs (5 x 3 and 4 x 3) are all
    different mixes of entries, so an entry read or written in the wrong place shows; the
    sizes leave a remainder at every lane count.  (C source with its batch entry point, the
    function.)"""
    A, b = ca.SX.sym("A", 3, 5), ca.SX.sym("b", 11)
    B = ca.reshape(b[:9] * b[9] - b[10], 3, 3)
    f = ca.Function("mat", [A, b], [A.T @ B + ca.DM(np.arange(15).reshape(5, 3)) * A.T, B[:, 0] @ A[0, :4] / (1 + A[:, 1].T @ A[:, 1]) ], ["A", "b"], ["C", "D"])
    manifest = {"inputs": [{"name": "A", "shape": [3, 5]}, {"name": "b", "shape": [11]}],
                "outputs": [{"name": "C", "shape": [5, 3]}, {"name": "D", "shape": [3, 4]}]}
    code = casadi_source(f, precision=precision)
    scalar = fp.to_float(code) if precision == "single" else code
    return scalar + "\n" + vectorise.render(f, manifest, code, TEMPLATES, precision)[0], f


@pytest.mark.parametrize("precision", ["double", "single"])
@pytest.mark.parametrize("lanes", [1, 2, 4, 8, 16])
def test_matrix_entries_keep_their_places(precision, lanes, tmp_path):
    """The kernel keeps each instance's entries in row-major order (the scalar code's are
    column-major): matrix inputs and outputs that are neither square nor symmetric, through
    whole register transposes and their remainders, equal the scalar function's, bit for bit,
    in a full and a partial last group."""
    source, f = matrix_ops(precision)
    lib = compile_ops(source, tmp_path, (f"-DCD_BATCH_LANES={lanes}", "-Wno-error"))
    real = np.float32 if precision == "single" else np.float64
    rng = np.random.default_rng(lanes)
    n = 2 * lanes + 3
    A, b = rng.normal(size=(n, 3, 5)).astype(real), rng.normal(size=(n, 11)).astype(real)
    C, D = np.full((n, 5, 3), np.nan, real), np.full((n, 3, 4), np.nan, real)
    fn = lib.mat_batch
    fn.argtypes = [ctypes.c_longlong] + [ctypes.c_void_p] * 4
    assert fn(n, A.ctypes.data, b.ctypes.data, C.ctypes.data, D.ctypes.data) == 0
    ptr = ctypes.POINTER(ctypes.c_float if precision == "single" else ctypes.c_double)
    for i in range(n):
        a, bi = np.asfortranarray(A[i]), b[i].copy()
        c, d = np.empty((5, 3), real, order="F"), np.empty((3, 4), real, order="F")
        args = (ptr * 2)(a.ctypes.data_as(ptr), bi.ctypes.data_as(ptr))
        res = (ptr * 2)(c.ctypes.data_as(ptr), d.ctypes.data_as(ptr))
        assert lib.mat(args, res, None, None, 0) == 0
        assert np.array_equal(C[i], c) and np.array_equal(D[i], d), (lanes, i)
    assert not np.array_equal(C[0], C[0].T.reshape(5, 3))


@pytest.mark.parametrize("line, why", [
    ("  w[0]=a0;", "unknown statement"),
    ("  for (i=0; i<3; ++i) a0=a1;", "unknown statement"),
    ("  a0=erfinv(a1);", "no vector form"),
    ("  a0=my_helper(a1);", "no vector form"),
    ("  a0=sin(a1,a2);", "takes 1 argument"),
    ("  a9999=a0;", "undeclared"),
    ("  a0=a9999;", "unknown name"),
    ("  a0=arg[7]? arg[7][0] : 0;", "out of range"),
    ("  if (res[0]!=0) res[0][999]=a0;", "out of range"),
    ("  a0=(a1%a2);", "unknown token"),
    ("  a0=(a1+);", "unexpected"),
    ("  a0=(a1?a2);", "expected ':'"),
])
def test_unknown_constructs_fail_loudly(line, why):
    with pytest.raises(CompilerError, match=f"cannot vectorise line [0-9]+ .*{why}"):
        vectorise.vectorize(_body(line), 2, 1, [3, 1], [52])


def test_the_body_must_be_casadis():
    with pytest.raises(CompilerError, match="exactly one CasADi function body"):
        vectorise.vectorize("int main(void) { return 0; }", 1, 1, [1], [1])


# -- go1 4F3 ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def go1(out_dir):
    return cd.generate("go1", "4F3", "pv_osimr", out_dir=out_dir)


def configurations(robot, n, seed=0):
    rng = np.random.default_rng(seed)
    return np.array([robot.random_q(rng) for _ in range(n)])


def rel(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


def test_go1_batch_equals_single_calls(go1):
    Q = configurations(go1.robot, 37)
    D = go1(Q)
    assert D.shape == (37, 12, 12) and D.flags.c_contiguous
    single = np.array([go1(q) for q in Q])
    err = max(rel(D[i], single[i]) for i in range(len(Q)))
    print(f"go1 4F3 pv_osimr: batch vs single call, worst relative difference {err:.1e} "
          f"({go1.manifest['batch']['lanes']} lanes, {go1.manifest['batch']['isa']}, {go1.manifest['batch']['sincos']})")
    assert err <= 1e-14
    assert rel(D[0], ref.delassus(go1.robot, go1.constraints, Q[0])) <= 1e-12


def test_go1_bit_identical_across_threads_sizes_and_positions(go1):
    per_share = -(-batch.MIN_SHARE_INSTRUCTIONS // go1.manifest["op_count"]["instructions"])
    Q = configurations(go1.robot, 64, seed=1)[np.arange(3 * per_share + 1) % 64]
    D = go1(Q, threads=1)
    assert len(batch.shares(go1, len(Q), 3)) == 3          # three threads' shares really run
    for threads in (2, 3, None):
        assert np.array_equal(go1(Q, threads=threads), D)
    for start, stop in ((5, 6), (3, 10), (0, 1), (len(Q) - 3, len(Q)), (100, 233)):
        assert np.array_equal(go1(Q[start:stop]), D[start:stop])


def test_go1_batch_edges_and_out(go1):
    Q = configurations(go1.robot, 9, seed=2)
    assert go1(Q[:0]).shape == (0, 12, 12)
    assert np.array_equal(go1(Q[:1])[0], go1(Q[:3])[0])
    out = np.full((9, 12, 12), np.nan)
    assert go1(Q, out=out) is out and np.array_equal(out, go1(Q))
    outs = go1.outputs(Q, out={"delassus": out})
    assert outs["delassus"] is out
    assert np.array_equal(go1(np.asfortranarray(Q)), out)          # copied to C order, same values
    assert np.array_equal(go1(Q.tolist()), out)
    assert go1(Q[0]).shape == (12, 12)                              # one q stays a single call


def test_go1_streamed_outputs_at_every_alignment(go1):
    """Above CD_BATCH_STREAM_BYTES the output goes out with non-temporal stores: 32-byte aligned
    rows whole, 16-byte aligned ones (numpy's large arrays) in halves, others plainly; all
    three give the single thread's aligned result, bit for bit, and the single call's."""
    n = 3700                                    # 3700 x 144 doubles > 4 MiB
    Q = configurations(go1.robot, 64, seed=7)[np.arange(n) % 64]
    want = go1(Q, threads=1)
    assert want.ctypes.data % 32 == 0
    raw = batch.aligned_empty((n * 144 + 8,))
    for offset in (0, 2, 1, 4):                 # bytes mod 32: 0, 16, 8, 0
        out = raw[offset:offset + n * 144].reshape(n, 12, 12)
        out[...] = np.nan
        assert go1(Q, out=out, threads=2) is out and np.array_equal(out, want), offset
    assert max(rel(want[i], go1(Q[i])) for i in range(64)) <= 1e-14


def test_the_door_runs_batches_itself(go1, monkeypatch):
    """f(Q) of a function of q alone goes straight from door.c's call to the batch runtime
    (threads=None, 1, 2, 3; C or Fortran order): the same bits as the call through the Python
    path (runtime/batch.evaluate, which reaches the same runtime), out= filled and returned,
    threads calling it at once; a refused instance and inputs it does not take (float32)
    reach the Python path."""
    import threading
    if go1.door != "door.c":
        pytest.skip("no door here")
    Q = configurations(go1.robot, 64, seed=11)
    big = np.resize(Q, ((2 * batch.MIN_SHARE_INSTRUCTIONS) // batch.entry(go1).per_instance + 7, Q.shape[1]))
    assert len(batch.shares(go1, len(big), 2)) == 2
    python = {n: batch.evaluate(go1, (big[:n],), {}, threads=1, only_first=True)["delassus"]
              for n in (1, 3, 4, 5, 64, len(big))}
    # through the Python path (what functions of several inputs take) on two threads' shares
    assert np.array_equal(batch.evaluate(go1, (big,), {}, threads=2, only_first=True)["delassus"], python[len(big)])
    calls = []

    def python_path(*args):
        calls.append(args)
        return type(go1)._evaluate(go1, *args)
    monkeypatch.setattr(go1, "_evaluate", python_path)
    for n, want in python.items():
        got = go1(big[:n])
        assert got.shape == (n, 12, 12) and np.array_equal(got, want) and got.ctypes.data % 64 == 0, n
        for threads in (1, 2, 3):
            out = np.full((n, 12, 12), np.nan)
            assert go1(big[:n], out=out, threads=threads) is out and np.array_equal(out, want), (n, threads)
    assert calls == []
    results = [None] * 4
    workers = [threading.Thread(target=lambda k=k: results.__setitem__(k, go1(big))) for k in range(4)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert all(np.array_equal(r, python[len(big)]) for r in results) and calls == []
    assert np.array_equal(go1(np.asfortranarray(Q)), python[64]) and calls == []
    go1(Q.astype(np.float32))
    assert len(calls) == 1
    if hasattr(os, "fork"):                                     # a forked child starts workers of its own
        pid = os.fork()
        if pid == 0:
            os._exit(0 if np.array_equal(go1(big, threads=2), python[len(big)]) else 1)
        assert os.waitpid(pid, 0)[1] == 0
    bad = big.copy()
    bad[len(big) - 3, 3:7] *= 1.5                               # in the second share
    with pytest.raises(InputError, match=f"instance {len(big) - 3} of the batch: q\\[3:7\\], the quaternion"):
        go1(bad)
    with pytest.raises(InputError, match="threads must be a positive integer"):
        go1(Q, threads=0)


def test_shares_cover_the_batch_on_every_cpu_set(go1):
    """The runtime's shares (door.c, split and run_shares): every instance once, in order, at
    multiples of the lane count, whatever the number of threads asked for; with this thread
    allowed one CPU, two or every one, all shares run (on bound workers where there are
    several CPUs) and give the single thread's bits."""
    import threading
    e = batch.entry(go1)
    per_share = -(-batch.MIN_SHARE_INSTRUCTIONS // e.per_instance)
    for n in (0, 1, e.lanes + 1, 3 * per_share + 1):
        for threads in (1, 2, 3, 5, None):
            parts = batch.shares(go1, n, threads)
            assert [a for a, _ in parts[1:]] == [b for _, b in parts[:-1]] and all(a % e.lanes == 0 for a, _ in parts)
            assert (parts[0][0], parts[-1][1]) == (0, n) if n else parts == []
            assert len(parts) <= max(threads or batch.cores(), 1)
    Q = configurations(go1.robot, 64, seed=3)[np.arange(3 * per_share + 1) % 64]
    want = go1(Q, threads=1)
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    got = []

    def on(allowed):
        os.sched_setaffinity(0, allowed)                # this thread only
        got.append([np.array_equal(go1.outputs(Q, threads=t)["delassus"], want) for t in (2, 3)])
    for allowed in ({cpus[0]}, set(cpus[:2]), set(cpus)) if cpus else ():
        t = threading.Thread(target=on, args=(allowed,))
        t.start()
        t.join()
    assert all(all(g) for g in got) and len(got) == (3 if cpus else 0)


@pytest.mark.parametrize("instance, change, message", [
    (5, lambda q: q.__setitem__(8, np.nan), "instance 5 of the batch: input q has 1 non-finite entry"),
    (-1, lambda q: q.__setitem__(0, np.inf), "of the batch: input q has 1 non-finite entry .* value inf"),
    (7, lambda q: q.__setitem__(slice(3, 7), 1.5 * q[3:7]), r"instance 7 of the batch: q\[3:7\], the quaternion .* norm 1.5"),
    (2, lambda q: q.__setitem__(slice(3, 7), 0.0), r"instance 2 of the batch: q\[3:7\], the quaternion .* norm 0,"),
])
def test_batches_refuse_what_the_single_call_refuses(go1, instance, change, message):
    """The batched code checks every instance as the single call does (door.c, inputs.py) and
    names the first it refuses, in whichever thread's share it is."""
    per_share = -(-batch.MIN_SHARE_INSTRUCTIONS // go1.manifest["op_count"]["instructions"])
    Q = configurations(go1.robot, 64, seed=8)[np.arange(2 * per_share + 5) % 64]
    change(Q[instance])
    i = instance % len(Q)
    with pytest.raises(InputError) as single:
        go1(Q[i])
    for threads in (1, 2):
        with pytest.raises(InputError, match=message) as info:
            go1(Q, threads=threads)
        assert str(info.value) == f"instance {i} of the batch: {single.value}"


def test_batches_normalise_unit_blocks_as_the_single_call(out_dir):
    """A quaternion off norm 1 by less than the tolerance is normalised: ABA (gravity in the
    base frame: the orientation matters) on it equals ABA on the normalised q, and the
    single call; a unit norm left as it is would be 1e-7 off."""
    f = cd.generate("go1", "4F3", "aba", out_dir=out_dir)
    rng = np.random.default_rng(9)
    Q, V, T = configurations(f.robot, 9, seed=9), rng.normal(size=(9, 18)), rng.normal(size=(9, 18))
    scaled = Q.copy()
    scaled[:, 3:7] *= 1 + 3e-7
    got = f(scaled, v=V, tau=T)
    assert rel(got, f(Q, v=V, tau=T)) <= 1e-14
    for i in range(9):
        assert rel(got[i], f(scaled[i], v=V[i], tau=T[i])) <= 1e-14


@pytest.mark.parametrize("call, message", [
    (lambda f, Q: f(Q[:, :18]), r"input q has shape \(4, 18\); a batch of 4 needs 4 x 19 \(nq = 19\)"),
    (lambda f, Q: f(Q[None]), r"q has 76 entries, robot .go1. needs nq = 19"),
    (lambda f, Q: f(Q, out=np.empty((4, 12, 12), np.float32)), "out for delassus must be a writeable C-contiguous"),
    (lambda f, Q: f(Q, out=np.empty((3, 12, 12))), r"shape \(4, 12, 12\)"),
    (lambda f, Q: f(Q, out=np.empty((4, 12, 12)).transpose(0, 2, 1)), "C-contiguous"),
    (lambda f, Q: f(Q[0], out=np.empty((4, 12, 12))), r"out for delassus must be .* of shape \(12, 12\)"),
    (lambda f, Q: f(Q, threads=0), "threads must be a positive integer"),
    (lambda f, Q: f(Q, v=Q), r"unexpected inputs \['v'\]"),
    (lambda f, Q: f(Q.astype(str)), "holds <U32, not numbers"),
    (lambda f, Q: f.outputs(Q, out={"lam": np.empty(3)}), r"unknown outputs \['lam'\]"),
])
def test_wrong_batches_are_one_line_input_errors(go1, call, message):
    Q = configurations(go1.robot, 4)
    with pytest.raises(InputError, match=message) as info:
        call(go1, Q)
    assert "\n" not in str(info.value)


def test_header_manifest_and_library_agree(go1):
    m = go1.manifest
    header = go1.manifest_path.with_suffix(".h").read_text()
    assert f"int {m['function']}_batch(casadi_int n, const double* x0, double* y0);" in header
    lib = ctypes.CDLL(str(go1.so_path))
    assert getattr(lib, m["function"] + "_batch_lanes")() == m["batch"]["lanes"] >= 1
    isa = ctypes.cast(getattr(lib, m["function"] + "_batch_isa"), ctypes.CFUNCTYPE(ctypes.c_char_p))()
    assert isa.decode().startswith(m["batch"]["isa"])
    assert json.loads(go1.manifest_path.read_text())["batch"]["entry"] == m["function"] + "_batch"


def test_pv_early_batch_is_as_accurate_as_the_single_call(out_dir):
    """pv_early (if_else on its pivots, fmin, copysign) with vector inputs, one of them
    broadcast.  Its Householder pivots lose digits near some configurations (test_dynamics),
    and there the batch and the single call differ by that loss, not by 1e-14: both are
    compared with the dense reference, the batch within 10x of the single call's error."""
    f = cd.generate("go1", "4F3", "pv_early", out_dir=out_dir)
    rng = np.random.default_rng(4)
    n = 23
    Q = np.array([f.robot.perturbed_q(f.robot.neutral_q(), 0.3, rng) for _ in range(n)])
    V, T, k = rng.normal(size=(n, 18)), rng.normal(size=(n, 18)), rng.normal(size=12)
    out = f.outputs(Q, v=V, tau=T, k=k)
    assert out["vdot"].shape == (n, 18, 1) and out["lam"].shape == (n, 12, 1) and out["pivot"].shape == (n, 1, 1)
    same = 0
    for i in range(n):
        single = f.outputs(Q[i], v=V[i], tau=T[i], k=k)
        vd_ref, lam_ref = ref.constrained_dynamics(f.robot, f.constraints, Q[i], V[i], T[i], k, {})
        for name, want in (("vdot", vd_ref), ("lam", lam_ref)):
            e_batch, e_single = rel(out[name][i].ravel(), want), rel(single[name].ravel(), want)
            assert e_batch <= 10 * e_single + 1e-14 and e_batch <= 1e-9, (i, name, e_batch, e_single)
        same += rel(out["vdot"][i], single["vdot"]) <= 1e-14
    assert same >= n // 2
    assert np.array_equal(f.outputs(Q, v=V, tau=T, k=k, threads=2)["lam"], out["lam"])


# -- dask ---------------------------------------------------------------------------------
def test_dask_blocks_on_a_local_cluster(go1, tmp_path, monkeypatch):
    da = pytest.importorskip("dask.array")
    distributed = pytest.importorskip("distributed")
    Q = configurations(go1.robot, 203, seed=3)
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        D = go1.map_blocks(da.from_array(Q, chunks=(50, 10)))
        assert D.shape == (203, 12, 12) and D.chunks[0] == (50, 50, 50, 50, 3)
        assert np.array_equal(D.compute(), go1(Q))


def test_dask_names_the_refused_row_of_q(go1):
    """A refused instance is named by its row of the whole dask array, not of its block."""
    da = pytest.importorskip("dask.array")
    Q = configurations(go1.robot, 30, seed=5)
    Q[23, 3:7] *= 2.0
    with pytest.raises(InputError, match=r"^row 23 of Q: q\[3:7\], the quaternion .* has norm 2,") as info:
        go1.map_blocks(da.from_array(Q, chunks=(10, 19))).compute(scheduler="synchronous")
    assert "\n" not in str(info.value)


def test_dask_worker_rebuilds_from_the_manifest(go1, tmp_path, monkeypatch):
    """A worker that cannot see the .so regenerates it from the manifest into its cache."""
    from casadi_delassus.runtime import distributed
    monkeypatch.setenv("CASADI_DELASSUS_CACHE", str(tmp_path))
    f = distributed.worker_function(tmp_path / "elsewhere" / "pv_osimr.json", go1.manifest, cd.load)
    assert f.manifest_path.is_relative_to(tmp_path) and f.manifest["function"] == go1.manifest["function"]
    Q = configurations(go1.robot, 7, seed=4)
    assert np.array_equal(distributed.BlockEvaluator(tmp_path / "x.json", go1.manifest, "delassus", 1, {}, cd.load)(Q), f(Q))
    assert rel(f(Q), go1(Q)) <= 1e-14


def test_staged_function_in_batches(out_dir):
    """Stages chain their stored intermediates per instance (N x size x 1 feeds N x size)."""
    f = cd.generate("go1", "4F3", "delassus_apply", stages=True, out_dir=out_dir)
    robot = cd.load_robot("go1")
    rng = np.random.default_rng(6)
    Q, lam = configurations(robot, 6, seed=6), rng.normal(size=(6, 12))
    f.run("factor", q=Q)
    y = f.run("apply", lam=lam)["delassus_apply"]
    assert y.shape == (6, 12, 1)
    for i in range(6):
        f.run("factor", q=Q[i])
        assert rel(y[i], f.run("apply", lam=lam[i])["delassus_apply"]) <= 1e-14


def test_every_input_layout_gives_the_same_bits(go1, out_dir):
    """The batch runtime (door.c) takes inputs in any layout -- C or Fortran order, every other
    row, reversed rows, vectors as N x r x 1, one instance for all (stride 0) -- gathering
    what is not in the entry point's layout share by share: the bits of C-ordered inputs, on
    one thread or several, for a function of q alone (from the door's call) and one of q and
    a vector."""
    f = cd.generate("go1", "4F3", "delassus_apply", out_dir=out_dir)
    per_share = -(-batch.MIN_SHARE_INSTRUCTIONS // batch.entry(f).per_instance)
    n = 2 * per_share + 3                                   # two shares and a partial group
    rng = np.random.default_rng(9)
    Q, lam = configurations(go1.robot, n, seed=9), rng.normal(size=(n, 12))
    want = f.outputs(Q, lam=lam, threads=1)["delassus_apply"]
    D = go1(Q, threads=1)
    wide = np.zeros((2 * n, 2 * Q.shape[1]))
    wide[::2, ::2] = Q
    layouts = {"fortran": np.asfortranarray(Q), "every other": wide[::2, ::2], "reversed": Q[::-1].copy()[::-1]}
    for name, q in layouts.items():
        assert not q.flags.c_contiguous, name
        for threads in (1, 2, None):
            assert np.array_equal(go1(q, threads=threads), D), (name, threads)
            assert np.array_equal(f.outputs(q, lam=np.asfortranarray(lam), threads=threads)["delassus_apply"], want)
    assert np.array_equal(f(Q, lam=lam[:, :, None]), want)
    one = f(Q, lam=lam[0])                                  # one lam for every q, never copied n times
    assert np.array_equal(one, f(Q, lam=np.repeat(lam[:1], n, axis=0)))


def test_batch_bench_reports_every_contender_it_can_measure(go1, monkeypatch):
    """batch_bench (``bench --batch N``) end to end on a tiny batch, with Pinocchio's and
    MuJoCo's harnesses made unavailable: their absence is a note, the rest is measured
    (no timing assertions: only that the numbers are there and positive)."""
    from casadi_delassus.errors import DelassusError
    from casadi_delassus.timing import batch_bench

    def unavailable(*args, **kwargs):
        raise DelassusError("not here")
    monkeypatch.setattr(batch_bench, "PinocchioCppHarness", unavailable)
    monkeypatch.setitem(sys.modules, "casadi_delassus.timing.mujoco_harness", None)
    res = batch_bench.run(go1.robot, "4F3", "pv_osimr", reps=2, n_c=16, n_py=16, all_cpus={max(os.sched_getaffinity(0))},
                          python_calls=200, generate={"out_dir": go1.manifest_path.parents[2]})
    assert set(res["timings"]) == {batch_bench.SINGLE, batch_bench.BATCH_ONE, batch_bench.NO_OUTPUTS, "batch, 1 core (Python f(Q))",
                                   "batch, 1 cores (C)", "batch, 1 cores (Python f(Q))", batch_bench.PY_ONE_FP32,
                                   "batch FP32, 1 cores (Python f(Q))"}
    assert any(n.startswith("Single precision (FP32") and "error against double" in n for n in res["notes"])
    assert all(len(t.ns) == 2 * (batch_bench.BATCH_CALLS if k.startswith("batch") else 1) and min(t.ns) > 0
               for k, t in res["timings"].items())
    assert any("Pinocchio not measured: not here" in n for n in res["notes"])
    assert any(n.startswith("MuJoCo not measured") for n in res["notes"])
    assert any(n.startswith("Python single call (door.c)") for n in res["notes"])
    # the no-output contender passes NULL outputs: the harness prints no sample of them
    assert res["timings"][batch_bench.NO_OUTPUTS].output is None and res["timings"][batch_bench.BATCH_ONE].output is not None
    peaks = {"scalar_add_mul_ops_per_ns": {"best": 12.0}, "avx2_fma_flop_per_ns": {"best": 50.0}}
    text = batch_bench.markdown([res], peaks, "casadi-delassus bench go1 -s 4F3 --batch 16", 2)
    assert "| single call (C loop) | " in text and "## go1/4F3 (pv_osimr" in text
    assert "- Where the batch's time goes" in text and "sin/cos of the 12 angles" not in text   # no libmvec peak given
    peaks["libmvec_sin_cos_angles_per_ns"] = {"best": 0.5, "median": 0.5, "ns_best": 2.0, "ns_median": 2.0}
    lanes = res["manifest"]["batch"]["lanes"]
    if res["manifest"]["batch"]["sincos"] == "libmvec":     # 12 angles x lanes x 2 ns
        assert (f"sin/cos of the 12 angles take about {24 * lanes} ns in the {lanes}-lane call"
                in batch_bench.markdown([res], peaks, "", 2))


def test_the_ideal_batch_estimate_is_amdahls():
    """single 500 ns of which 28 sin/cos; 4 lanes: arithmetic 118 ns, sin/cos 24, outputs 38 per
    configuration: 500 / 180 with outputs, 500 / 142 without."""
    from casadi_delassus.timing.batch_bench import with_exact_lane_scaling
    text = with_exact_lane_scaling(500.0, 28.0, 24.0, 38.0, 4)
    assert f"would give {500 / 180:.2f}× the single call ({500 / 142:.2f}× with no outputs written)" in text


def test_big_functions_batch_as_a_loop_over_the_scalar_code(monkeypatch):
    """Above SCALAR_BATCH_ABOVE["value"] instructions "auto" compiles the batch entry point as a loop over
    the scalar function (the vector kernel took gcc minutes at -Og); below it the kernel stays."""
    from casadi_delassus.codegen.build import AUTO_LEVEL_ENV, SCALAR_BATCH, SCALAR_BATCH_ABOVE, resolve_cflags
    monkeypatch.delenv(AUTO_LEVEL_ENV, raising=False)
    SIMD_BATCH_LIMIT = SCALAR_BATCH_ABOVE["value"]
    assert SCALAR_BATCH not in resolve_cflags(("auto",), SIMD_BATCH_LIMIT, "gcc")
    for flags in (("auto",), ("auto-portable",)):
        big = resolve_cflags(flags, SIMD_BATCH_LIMIT + 1, "gcc")
        assert SCALAR_BATCH in big and "-Og" in big
    assert "-march=native" not in resolve_cflags(("auto-portable",), 1000, "gcc")


def test_random_q_gives_a_batch_of_configurations():
    """robot.random_q(rng, n): an n x nq array of valid configurations (unit quaternions,
    angles and positions in range) without a Python loop;
    without n, the one q it always gave (the same draws as before)."""
    robot = cd.load_robot("go1")
    Q = robot.random_q(np.random.default_rng(1), 1000)
    assert Q.shape == (1000, robot.nq) and len({tuple(r) for r in Q}) == 1000
    np.testing.assert_allclose(np.linalg.norm(Q[:, 3:7], axis=1), 1, rtol=0, atol=1e-15)
    assert np.all(np.abs(Q[:, :3]) <= 1) and np.all(np.abs(Q[:, 7:]) <= np.pi)
    assert np.array_equal(robot.random_q(np.random.default_rng(2), 1)[0], robot.random_q(np.random.default_rng(2)))
