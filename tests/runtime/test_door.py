"""The thin Python door (runtime/door.c, door.py): single calls through the C extension.
Its fast path refuses every input the Python path refuses (and hands it to it, so the
message is the same one line), both paths compute the same bits, ``out=`` and the reused
output arrays never alias an array a caller holds, staged functions go through it, and
where the extension cannot be built calls fall back to ctypes."""
import os
import subprocess
import sys
import textwrap
import threading
import tracemalloc
import weakref

import numpy as np
import pytest

import casadi_delassus as cd
from casadi_delassus.runtime import door
from casadi_delassus.runtime.inputs import UNIT_TOL
from casadi_delassus.errors import DelassusError, InputError

from conftest import model_for
from robustness.test_bad_inputs import BAD_Q, K, WORDS

pytestmark = pytest.mark.skipif(door.extension() is None, reason=f"the door cannot be built here: {door.why()}")


@pytest.fixture(scope="module")
def go1_k(out_dir):
    """Go1 with a runtime K on one foot (the same function as test_bad_inputs)."""
    return cd.generate("go1", ["FL_foot:3d-input", "FR_foot:3d", "RL_foot:3d", "RR_foot:3d"], "pv_osimr",
                       out_dir=out_dir)


@pytest.fixture(scope="module")
def go1_ctypes(go1_k, monkeymodule):
    monkeymodule.setenv(door.ENV, "ctypes")
    f = cd.load(go1_k.manifest_path)
    monkeymodule.delenv(door.ENV)
    assert f.door == "ctypes" and go1_k.door == "door.c"
    return f


@pytest.fixture(scope="module")
def monkeymodule():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


@pytest.fixture(scope="module")
def qs(go1_k):
    rng = np.random.default_rng(11)
    return [go1_k.robot.random_q(rng) for _ in range(8)]


def _fast(f, q, **inputs):
    """What the door's fast path makes of the call: NotImplemented when it hands it on."""
    return f._door_call((q,), inputs, None, False)


@pytest.mark.parametrize("name", list(BAD_Q))
def test_fast_path_hands_every_bad_q_on_and_the_error_is_the_python_paths(go1_k, go1_ctypes, qs, name):
    bad = BAD_Q[name](qs[0])
    assert _fast(go1_k, bad, K_FL_foot=K) is NotImplemented
    messages = []
    for f in (go1_k, go1_ctypes):
        with pytest.raises(InputError) as err:
            f(bad, K_FL_foot=K)
        messages.append(str(err.value))
    assert messages[0] == messages[1] and "\n" not in messages[0] and WORDS[name] in messages[0]


@pytest.mark.parametrize("value", [np.full((3, 6), np.nan), np.where(K == 1, np.inf, 0.0), K.astype(complex), K[:2],
                                   K.astype(np.float32), K.T, object()],
                         ids=["NaN", "inf", "complex", "shape", "float32", "transposed", "object"])
def test_fast_path_hands_bad_runtime_K_on(go1_k, qs, value):
    assert _fast(go1_k, qs[0], K_FL_foot=value) is NotImplemented
    if not (isinstance(value, np.ndarray) and value.dtype == np.float32):
        with pytest.raises(InputError):
            go1_k(qs[0], K_FL_foot=value)


@pytest.mark.parametrize("scale", [3.0, 1 + 2 * UNIT_TOL, 0.0, np.nan])
def test_fast_path_hands_unnormalised_quaternions_on(go1_k, qs, scale):
    q = qs[0].copy()
    q[3:7] *= scale
    assert _fast(go1_k, q, K_FL_foot=K) is NotImplemented
    with pytest.raises(InputError, match="q\\[3:7\\]|non-finite"):
        go1_k(q, K_FL_foot=K)


def test_fast_and_python_paths_compute_the_same_bits(go1_k, go1_ctypes, qs):
    for q in qs:
        for scale in (1.0, 1 + 0.7 * UNIT_TOL, 1 - 0.3 * UNIT_TOL):   # normalised alike on both paths
            x = q.copy()
            x[3:7] *= scale
            fast = _fast(go1_k, x, K_FL_foot=K)
            assert fast is not NotImplemented
            assert np.array_equal(fast, go1_k(x.tolist(), K_FL_foot=K.tolist()))       # converted, then raw
            assert np.array_equal(fast, go1_ctypes(x, K_FL_foot=K))
            assert np.array_equal(fast, go1_k(x[:, None], K_FL_foot=np.asfortranarray(K)))
    assert np.array_equal(go1_k.outputs(qs[0], K_FL_foot=K)["delassus"], go1_ctypes.outputs(qs[0], K_FL_foot=K)["delassus"])


def test_the_callers_arrays_are_never_written(go1_k, qs):
    q, k = qs[0].copy(), K.copy()
    q[3:7] *= 1 + 0.5 * UNIT_TOL
    given_q, given_k = q.copy(), k.copy()
    go1_k(q, K_FL_foot=k)
    assert np.array_equal(q, given_q) and np.array_equal(k, given_k)


def test_returned_arrays_are_new_while_held_and_reused_once_released(go1_k, qs):
    expected = [go1_k(q, K_FL_foot=K).copy() for q in qs]
    held = [go1_k(q, K_FL_foot=K) for q in qs]                   # each held: never written again
    views = [go1_k(q, K_FL_foot=K)[2] for q in qs]               # a view keeps its base
    for _ in range(5):
        for q in qs:
            go1_k(q, K_FL_foot=K)
    assert all(np.array_equal(h, e) for h, e in zip(held, expected))
    assert all(np.array_equal(v, e[2]) for v, e in zip(views, expected))
    assert len({id(h) for h in held}) == len(held) and all(h.flags.owndata and h.flags.writeable for h in held)
    reshaped = go1_k(qs[0], K_FL_foot=K)
    reshaped.shape = (144,)                                       # changed in place, then dropped
    del reshaped
    for q, e in zip(qs, expected):
        D = go1_k(q, K_FL_foot=K)
        assert D.shape == (12, 12) and np.array_equal(D, e)


@pytest.fixture(scope="module")
def go1_q(out_dir):
    """A function of q alone: f(Q) goes through the door's batch call."""
    return cd.generate("go1", "4F3", "pv_osim", out_dir=out_dir)


def test_a_batch_loop_reuses_released_outputs_and_never_a_held_one(go1_q):
    """Issue 34 point 10: ``D = f(Q)`` in a loop writes into an output it returned before once
    the caller dropped it (no new output allocated: tracemalloc sees numpy's allocations), and
    never into one still held, the base of a view, one with a weak reference or whose base the
    caller took."""
    rng = np.random.default_rng(3)
    Qs = [go1_q.robot.random_q(rng, 2000) for _ in range(3)]
    want = [go1_q(Q, out=np.empty((2000, 12, 12))) for Q in Qs]
    D = go1_q(Qs[0])
    D = go1_q(Qs[1])
    tracemalloc.start()
    try:
        for k in range(6):
            D = go1_q(Qs[k % 3])
            assert np.array_equal(D, want[k % 3])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < D.nbytes / 2, (peak, D.nbytes)
    held, view, weak = go1_q(Qs[0]), go1_q(Qs[1])[5], go1_q(Qs[2])
    ref, base = weakref.ref(weak), go1_q(Qs[0]).base
    base_before = base.copy()
    for _ in range(6):
        for Q in Qs:
            go1_q(Q)
    assert np.array_equal(held, want[0]) and np.array_equal(view, want[1][5]) and np.array_equal(weak, want[2])
    assert ref() is weak and np.array_equal(base, base_before)
    assert held.ctypes.data % 64 == 0 and held.flags.c_contiguous and held.flags.writeable


def test_out_fills_the_given_array(go1_k, qs):
    D = np.full((12, 12), np.nan)
    assert go1_k(qs[1], K_FL_foot=K, out=D) is D and np.array_equal(D, go1_k(qs[1], K_FL_foot=K))
    F = np.asfortranarray(np.full((12, 12), np.nan))             # written column-major, no transpose
    assert go1_k(qs[1], K_FL_foot=K, out=F) is F and np.array_equal(F, D)
    L = np.full((12, 12), np.nan)
    assert go1_k(qs[1].tolist(), K_FL_foot=K, out=L) is L and np.array_equal(L, D)   # the Python path too
    outs = go1_k.outputs(qs[2], K_FL_foot=K, out={"delassus": D})
    assert outs["delassus"] is D and np.array_equal(D, go1_k(qs[2], K_FL_foot=K))


@pytest.mark.parametrize("out, words", [
    (np.empty((12, 12), np.float32), "float32"), (np.empty((12, 13)), "(12, 13)"), (np.empty(144), "(144,)"),
    (np.empty((24, 24))[::2, ::2], "C- or Fortran-contiguous"), ([[0.0] * 12] * 12, "list"),
])
def test_bad_out_is_one_line_input_error(go1_k, qs, out, words):
    with pytest.raises(InputError) as err:
        go1_k(qs[0], K_FL_foot=K, out=out)
    assert "\n" not in str(err.value) and words in str(err.value)


def test_read_only_out_and_unknown_names_are_refused(go1_k, qs):
    D = np.empty((12, 12))
    D.flags.writeable = False
    with pytest.raises(InputError, match="not writeable"):
        go1_k(qs[0], K_FL_foot=K, out=D)
    with pytest.raises(InputError, match=r"unknown outputs \['lam'\]"):
        go1_k.outputs(qs[0], K_FL_foot=K, out={"lam": np.empty(3)})
    with pytest.raises(InputError, match="2 positional inputs"):
        go1_k(qs[0], K)


def test_threads_share_one_door(go1_k, qs):
    expected = [go1_k(q, K_FL_foot=K).copy() for q in qs]
    wrong = []

    def work(k):
        D = np.empty((12, 12))
        for i in range(300):
            j = (i + k) % len(qs)
            got = go1_k(qs[j], K_FL_foot=K) if i % 2 else go1_k(qs[j], K_FL_foot=K, out=D)
            wrong.append(not np.array_equal(got, expected[j]))
    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wrong) == 1800 and not any(wrong)


def test_casadi_backend_keeps_its_own_path(go1_k, qs):
    g = cd.load(go1_k.manifest_path, backend="casadi")
    assert g.door == "casadi"
    D = np.empty((12, 12))
    assert g(qs[0], K_FL_foot=K, out=D) is D
    assert np.abs(D - go1_k(qs[0], K_FL_foot=K)).max() <= 1e-14 * np.abs(D).max()


def test_staged_functions_go_through_the_door(out_dir):
    robot = model_for("tilted")
    f = cd.generate(robot, ["t5:3d", "t7:3d"], "damped_inverse_apply", out_dir=out_dir, stages=True)
    assert [g.door for g in f.stages] == ["door.c"] * 3
    rng = np.random.default_rng(2)
    q, R = robot.random_q(rng), rng.uniform(0.5, 2.0, 6)
    f.run("factor", q=q)
    f.run("damping", R=R)
    apply = f.stages[2]
    for lam in rng.normal(size=(4, 6)):
        got = f.run("apply", lam=lam)["damped_inverse_apply"]
        assert np.array_equal(got, f(q, R=R, lam=lam))
        assert np.array_equal(got, apply.outputs(lam=lam.tolist(), w_damping=f._work["w_damping"].tolist())
                              ["damped_inverse_apply"])
    assert apply._door_call((), {"lam": np.r_[np.nan, lam[1:]], "w_damping": f._work["w_damping"]}, None, True) \
        is NotImplemented
    with pytest.raises(InputError, match="non-finite"):
        f.run("apply", lam=np.r_[np.nan, lam[1:]])
    with pytest.raises(InputError, match="R must be positive"):
        f.run("damping", R=-R)


def test_a_function_that_fails_is_an_error_not_a_result(go1_k):
    """The door raises when the C function returns non-zero (a Door on a function that does)."""
    import ctypes
    lib = ctypes.CDLL(None)
    failing = ctypes.cast(lib.getpid, ctypes.c_void_p).value    # getpid() != 0: "returns an error"
    d = door.extension().Door(failing, lib, DelassusError, "failing", [("x", 1, 1, True, 0)], [("y", (1, 1))], -1,
                              [], UNIT_TOL, (1, 1, 0, 0), True)
    with pytest.raises(DelassusError, match="failing returned an error"):
        d(np.ones(1))


def test_without_the_extension_calls_go_through_ctypes(tmp_path, go1_k):
    """No compiler for the door (CC=false, an empty cache): one warning, then ctypes."""
    script = textwrap.dedent(f"""
        import warnings
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            import numpy as np, casadi_delassus as cd
            f = cd.load({str(go1_k.manifest_path)!r})
        print(f.door, len(w), str(w[0].message) if w else "")
        K = np.hstack([np.eye(3), np.zeros((3, 3))])
        print(f(np.r_[np.zeros(6), 1, np.zeros(12)], K_FL_foot=K).shape)
    """)
    env = dict(os.environ, CC="false", CASADI_DELASSUS_CACHE=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.splitlines()
    assert first.startswith("ctypes 1 casadi_delassus: single calls go through ctypes") and second == "(12, 12)"


def test_importing_compiles_nothing_and_batches_run_without_the_extension(tmp_path, go1_k):
    """Importing the package builds no door (CompiledFunction's base is chosen at the first
    load, door.callable_class); without the extension a batch is one call of the entry point
    in this thread, and gives the bits of the extension's batch runtime (Fortran-ordered Q,
    one K for every instance)."""
    rng = np.random.default_rng(5)
    Q = np.asfortranarray([go1_k.robot.random_q(rng) for _ in range(13)])
    K = np.hstack([np.eye(3), np.zeros((3, 3))])
    np.save(tmp_path / "Q.npy", Q)
    script = textwrap.dedent(f"""
        import warnings
        import numpy as np, casadi_delassus as cd
        from casadi_delassus.runtime import door
        print(door._state["module"] is None and not door.cache_dir("door").exists())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            f = cd.load({str(go1_k.manifest_path)!r})
        K = np.hstack([np.eye(3), np.zeros((3, 3))])
        np.save({str(tmp_path / "D.npy")!r}, f(np.load({str(tmp_path / "Q.npy")!r}), K_FL_foot=K))
        print(f.door)
    """)
    env = dict(os.environ, CC="false", CASADI_DELASSUS_CACHE=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and r.stdout.split() == ["True", "ctypes"], r.stderr
    assert np.array_equal(np.load(tmp_path / "D.npy"), go1_k(Q, K_FL_foot=K))


def test_a_cache_folder_others_can_write_is_not_used(tmp_path, go1_k):
    """A door cache folder writable by others (where someone could plant a module) is left
    alone: the door is built for this process in a private temporary folder, removed once
    loaded."""
    shared = tmp_path / "door"
    shared.mkdir()
    shared.chmod(0o777)
    script = f"import casadi_delassus as cd; print(cd.load({str(go1_k.manifest_path)!r}).door)"
    env = dict(os.environ, CASADI_DELASSUS_CACHE=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "door.c", r.stderr
    assert not list(shared.iterdir())
