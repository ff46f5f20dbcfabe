"""The end-to-end path: trace -> count -> C -> gcc -> load -> compare with the reference."""
import json
import os

import numpy as np
import pytest

import casadi_delassus as cd
from casadi_delassus.verify.check import check_delassus
from casadi_delassus.codegen.build import AUTO_LEVEL_ENV, AUTO_MATH, resolve_cflags
from casadi_delassus.runtime import artifact

TOL = 1e-10


@pytest.fixture(scope="module")
def go1():
    return cd.load_robot("go1")


def test_go1_feet_compiled_matches_reference(go1, out_dir):
    f = cd.generate(go1, "4F3", "naive", out_dir=out_dir)
    assert f(go1.random_q(np.random.default_rng(0))).shape == (12, 12)
    assert check_delassus(f, go1, f.constraints, samples=100) <= TOL


def test_casadi_external_backend_agrees_with_ctypes(go1, out_dir):
    f = cd.generate(go1, "4F3", "naive", out_dir=out_dir)
    g = cd.load(f.manifest_path, backend="casadi")
    q = go1.random_q(np.random.default_rng(3))
    assert np.abs(f(q) - g(q)).max() <= 1e-14 * np.abs(f(q)).max()


def test_manifest_describes_layout_counts_and_files(go1, out_dir):
    f = cd.generate(go1, "4F3", "naive", out_dir=out_dir)
    m = json.loads(f.manifest_path.read_text())
    assert [j["joint"] for j in m["q_layout"]] == go1.joint_names
    assert m["row_names"][:3] == ["FL_foot.x", "FL_foot.y", "FL_foot.z"]
    assert m["op_count"]["instructions"] > m["op_count"]["flops"] > 0
    assert m["outputs"][0]["shape"] == [12, 12] and m["inputs"][0]["shape"] == [go1.nq]
    for ext in ("c", "h", "so", "json"):
        assert f.manifest_path.with_suffix("." + ext).is_file()
    header = f.manifest_path.with_suffix(".h").read_text()
    assert "FL_hip_joint" in header and f"{m['function']}_eval" in header


def test_regeneration_is_skipped_when_nothing_changed(go1, out_dir):
    f = cd.generate(go1, "4F3", "naive", out_dir=out_dir)
    stamp = f.so_path.stat().st_mtime_ns
    g = cd.generate(go1, "4F3", "naive", out_dir=out_dir)
    assert g.so_path.stat().st_mtime_ns == stamp
    h = cd.generate(go1, "4F3", "naive", out_dir=out_dir, cflags=("-O0",))
    assert h.manifest["cflags"] == ["-O0"] and h.so_path.stat().st_mtime_ns != stamp


def test_runtime_input_K_on_a_fixed_base_arm(out_dir):
    panda = cd.load_robot("panda")
    f = cd.generate(panda, ["panda_hand_tcp:6d-input", "panda_link5:3d-input"], "naive", out_dir=out_dir)
    assert f.input_names == ["q", "K_panda_hand_tcp", "K_panda_link5"]
    assert check_delassus(f, panda, f.constraints, samples=100) <= TOL


# stem and ladder (15k-23k instructions to compile) are slow: the traced functions of both are
# checked in test_delassus.py, the compiled path on the chain and kchain here
@pytest.mark.parametrize("spec", ["chain:n=6,floating=1", pytest.param("stem:n=3,branches=2,length=3", marks=pytest.mark.slow),
                                  "kchain:k=3", pytest.param("ladder:rungs=2", marks=pytest.mark.slow)])
def test_synthetic_mechanisms(spec, out_dir):
    robot = cd.load_robot(spec)
    f = cd.generate(robot, None, "naive", out_dir=out_dir)
    assert check_delassus(f, robot, f.constraints, samples=100) <= TOL


def test_continuous_joints_use_cos_sin_pairs(out_dir, tmp_path):
    urdf = tmp_path / "wheel.urdf"
    urdf.write_text(_TWO_LINK_URDF.replace('type="revolute" name="j2"', 'type="continuous" name="j2"'))
    robot = cd.load_robot(str(urdf))
    assert robot.nq == robot.nv + 2 and robot.bodies[2].joint.kind == "continuous"
    f = cd.generate(robot, ["l2:3d@0.1,0,0"], "naive", out_dir=out_dir)
    assert check_delassus(f, robot, f.constraints, samples=50) <= TOL


def test_auto_optimisation_level_drops_for_huge_functions(monkeypatch):
    monkeypatch.delenv(AUTO_LEVEL_ENV, raising=False)
    assert resolve_cflags(("auto", "-g"), 1_000) == ("-O2", *AUTO_MATH, "-g")
    assert resolve_cflags(("auto",), 10**6) == ("-O0", *AUTO_MATH, "-DCD_BATCH_LANES=1")   # no vector kernel
    assert resolve_cflags(("auto",), 30_000, kind="derivative") == ("-O1", *AUTO_MATH, "-DCD_BATCH_LANES=1")
    assert resolve_cflags(("auto",), 10**5) == ("-Og", *AUTO_MATH, "-DCD_BATCH_LANES=1")   # above 40k: none either
    assert resolve_cflags(("auto",), 30_000) == ("-O1", *AUTO_MATH)
    assert resolve_cflags(("-O3",), 10**6) == ("-O3",)


def test_the_environment_fixes_the_auto_level_and_the_cache_key(monkeypatch, tmp_path):
    """$CASADI_DELASSUS_AUTO_LEVEL replaces the level "auto" picks by size (explicit flags keep theirs); the build's
    recorded flags and so its cache key follow it; a value that is no -O level is one line."""
    monkeypatch.delenv(AUTO_LEVEL_ENV, raising=False)
    robot = cd.load_robot("chain:n=3")
    first = cd.generate(robot, None, "naive", out_dir=tmp_path)
    assert "-O2" in first.manifest["cflags"]
    q = robot.random_q(np.random.default_rng(0))
    want = first(q)
    monkeypatch.setenv(AUTO_LEVEL_ENV, "-O0")
    assert resolve_cflags(("auto", "-g"), 1_000) == ("-O0", *AUTO_MATH, "-g")
    assert resolve_cflags(("auto",), 10**6)[0] == "-O0" and resolve_cflags(("-O3",), 1_000) == ("-O3",)
    second = cd.generate(robot, None, "naive", out_dir=tmp_path)
    assert "-O0" in second.manifest["cflags"] and "-O2" not in second.manifest["cflags"]
    np.testing.assert_allclose(second(q), want, rtol=1e-12, atol=1e-12 * np.abs(want).max())
    for bad in ("-O9", "fast", "-O2 -fno-x"):
        monkeypatch.setenv(AUTO_LEVEL_ENV, bad)
        with pytest.raises(cd.CompilerError, match=f"^{AUTO_LEVEL_ENV}=.*expected one of -O0, "):
            resolve_cflags(("auto",), 1_000)


def test_auto_targets_the_host_cpu_and_keys_the_cache_on_it(monkeypatch):
    """auto adds -march=native where the compiler takes it; the cache key then changes with
    the host CPU (a copied codegen_out/ is rebuilt, not loaded), an explicit portable flag set not."""
    from casadi_delassus.codegen import build
    cc = build.find_compiler()
    flags = resolve_cflags(("auto",), 1_000, cc)
    assert (build.NATIVE in flags) == build.accepts_native(cc)
    assert not build.accepts_native("/nonexistent/cc")
    from casadi_delassus.constraints import ConstraintSet
    robot = cd.load_robot("chain:n=3")
    cs = ConstraintSet.parse(robot, [robot.bodies[-1].name + ":6d"])
    keys = {}
    for cpu in ("cpu A", "cpu B"):
        monkeypatch.setattr(build, "host_cpu", lambda cpu=cpu: cpu)
        keys[cpu] = (build.content_hash(robot, cs, "naive", ("auto",), True, cc, False),
                     build.content_hash(robot, cs, "naive", ("-O2",), True, cc, False))
    assert keys["cpu A"][0] != keys["cpu B"][0] and keys["cpu A"][1] == keys["cpu B"][1]


def test_symmetric_positive_definite_and_base_pose_invariant(go1, out_dir):
    robot = go1
    f = cd.generate(robot, "4F3", "naive", out_dir=out_dir)
    rng = np.random.default_rng(7)
    q = robot.random_q(rng)
    D = f(q)
    assert np.abs(D - D.T).max() == 0.0
    assert np.linalg.eigvalsh(D).min() > 0
    q2 = q.copy()
    q2[:3] += rng.normal(size=3)
    quat = rng.normal(size=4)
    q2[3:7] = quat / np.linalg.norm(quat)
    assert np.abs(f(q2) - D).max() <= 1e-12 * np.abs(D).max()


_TWO_LINK_URDF = """<robot name="two">
  <link name="base"><inertial><mass value="2"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="l1"><inertial><origin xyz="0.1 0 0"/><mass value="1"/><inertia ixx="0.01" iyy="0.02" izz="0.02" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="l2"><inertial><origin xyz="0.1 0.01 0"/><mass value="0.5"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0.001" ixz="0" iyz="0"/></inertial></link>
  <joint type="revolute" name="j1"><parent link="base"/><child link="l1"/><origin xyz="0 0 0.1"/><axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
  <joint type="revolute" name="j2"><parent link="l1"/><child link="l2"/><origin xyz="0.2 0 0" rpy="0.3 0 0"/><axis xyz="0 1 0"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
</robot>
"""


def test_auto_picks_the_fewest_instructions_and_says_why(go1, out_dir):
    from casadi_delassus.registry import delassus_algorithms
    from casadi_delassus.opcount import count_ops
    from casadi_delassus.codegen.trace import trace
    f = cd.generate(go1, "4F3", "auto", out_dir=out_dir)
    counts = {a: count_ops(trace(go1, f.constraints, a)[0])["instructions"] for a in delassus_algorithms()}
    auto = f.manifest["auto"]
    assert auto["chosen"] == min(counts, key=counts.get) and auto["instructions"] == counts
    assert f.op_count["instructions"] == counts[auto["chosen"]] and auto["chosen"] in auto["reason"]
    assert check_delassus(f, go1, f.constraints, samples=20) <= TOL


def test_a_trace_is_kept_for_the_next_command(tmp_path, monkeypatch):
    """A traced function is kept on disk by what determines it: the next trace of the same
    algorithm, robot and constraints (count, then generate, in another process) reads it back
    under its own name, with the same instructions and values, without tracing again; another
    cse setting is another trace."""
    import casadi as ca
    from casadi_delassus.codegen import trace as trace_module
    from casadi_delassus.codegen import trace_cache
    from casadi_delassus.opcount import count_ops
    monkeypatch.setenv("CASADI_DELASSUS_CACHE", str(tmp_path))
    monkeypatch.setattr(trace_cache, "KEEP_AFTER_S", -1.0)
    robot = cd.load_robot("go1")
    cs, _ = cd.constraint_set(robot, "4F3")
    f = trace_module.trace(robot, cs, "pv_osim", name="counted")[0]
    monkeypatch.setattr(trace_module, "traced_outputs", lambda *a: pytest.fail("traced again"))
    g, inputs, outputs = trace_module.trace(robot, cs, "pv_osim", name="cd_go1_4F3_pv_osim")
    assert g.name() == "cd_go1_4F3_pv_osim" and inputs[0]["name"] == "q" and outputs[0]["name"] == "delassus"
    assert count_ops(g) == count_ops(f)
    q = robot.random_q(np.random.default_rng(0))
    assert np.array_equal(np.array(g(q)), np.array(f(q)))
    with pytest.raises(BaseException, match="traced again"):
        trace_module.trace(robot, cs, "pv_osim", cse=False)


def test_the_trace_cache_keeps_the_recently_used_within_its_size(tmp_path, monkeypatch):
    """Beyond MAX_BYTES the least recently used traces go; the newest stays."""
    import os
    import time
    from casadi_delassus.codegen import trace as trace_module
    from casadi_delassus.codegen import trace_cache
    monkeypatch.setenv("CASADI_DELASSUS_CACHE", str(tmp_path))
    monkeypatch.setattr(trace_cache, "KEEP_AFTER_S", -1.0)
    robot = cd.load_robot("chain:n=3")
    cs, _ = cd.constraint_set(robot, "default")
    trace_module.trace(robot, cs, "naive")
    old = next((tmp_path / "traces").glob("*.casadi"))
    os.utime(old, (time.time() - 100, time.time() - 100))
    monkeypatch.setattr(trace_cache, "MAX_BYTES", old.stat().st_size + 1)
    trace_module.trace(robot, cs, "aba")
    kept = list((tmp_path / "traces").glob("*.casadi"))
    assert len(kept) == 1 and kept[0] != old


def test_auto_reads_the_kept_counts_and_traces_the_winner_alone(tmp_path, monkeypatch):
    """-a auto keeps each candidate's instruction count: the next choice (another process) traces only the
    winner, picks the same algorithm with the same counts and the same function; a damaged count is traced again."""
    from casadi_delassus.codegen import trace as trace_module
    from casadi_delassus.codegen import trace_cache
    from casadi_delassus.opcount import count_ops
    monkeypatch.setenv("CASADI_DELASSUS_CACHE", str(tmp_path))
    robot = cd.load_robot("chain:n=4,floating=1")
    cs, _ = cd.constraint_set(robot, "default")
    first = trace_module.cheapest_traced(robot, cs, name="f")
    assert len(list((tmp_path / "traces").glob("*.count"))) == len(first[1]) > 1
    traced = []
    real_trace = trace_module.trace
    monkeypatch.setattr(trace_module, "trace", lambda r, c, a, **kw: traced.append(a) or real_trace(r, c, a, **kw))
    again = trace_module.cheapest_traced(robot, cs, name="f")
    assert traced == [first[0]] and again[:3] == first[:3] and count_ops(again[3][0]) == count_ops(first[3][0])
    loser = next(a for a in first[1] if a != first[0])
    path = tmp_path / "traces" / (trace_cache.key(robot, cs, loser, True, False) + ".count")
    path.write_bytes(path.read_bytes().replace(str(first[1][loser]).encode(), b"1"))
    traced.clear()
    assert trace_module.cheapest_traced(robot, cs, name="f")[:3] == first[:3] and loser in traced


# Each case: trace naive on chain:n=3 with its cache entry replaced by a damaged one, then trace
# again (the entry the first trace wrote back), comparing both with a trace that skips the cache.
_DAMAGED_TRACES = r"""
import json, sys
import numpy as np
import casadi_delassus as cd
from casadi_delassus.codegen import trace as trace_module, trace_cache
trace_cache.KEEP_AFTER_S = -1.0             # every trace is kept, a retraced one written back
robot = cd.load_robot("chain:n=3")
cs, _ = cd.constraint_set(robot, "default")
symbols, outputs, _ = trace_module.traced_outputs(robot, cs, "naive")
fresh = trace_module.function_of("naive", symbols, outputs, True, "naive")
path = trace_cache.cache_dir("traces") / (trace_cache.key(robot, cs, "naive", True, False) + ".casadi")
rng = np.random.default_rng(1)
qs = [robot.random_q(rng) for _ in range(5)]
want = [np.array(fresh(q)) for q in qs]
wrong = []
for k, damaged in enumerate(json.loads(sys.stdin.read())):
    path.write_bytes(bytes.fromhex(damaged))
    for attempt in range(2):
        f = trace_module.trace(robot, cs, "naive")[0]
        if f.name() != "naive" or any(not np.array_equal(np.array(f(q)), w) for q, w in zip(qs, want)):
            wrong.append([k, attempt])
print(json.dumps(wrong))
"""


def _damaged_entries(entry, other, rng):
    """Damaged forms of the trace cache entry ``entry`` (bytes): single characters changed at
    random positions (a digit, a letter, a space), truncations, an empty file, binary noise, and
    ``other``, the intact entry of another key, swapped in."""
    out = []
    for pos in sorted(rng.choice(len(entry), size=120, replace=False)):
        for c in (b"7", b"x", b" ")[pos % 3:pos % 3 + 1]:
            if entry[pos:pos + 1] != c:
                out.append(entry[:pos] + c + entry[pos + 1:])
    out += [entry[:n] for n in (1, 10, len(entry) // 3, len(entry) // 2, len(entry) - 1)]
    return out + [b"", bytes(rng.integers(0, 256, 400, dtype=np.uint8)), other, entry + b"\n"]


def test_a_damaged_trace_cache_entry_is_traced_again_never_trusted(tmp_path, monkeypatch):
    """Issue 31 point 5: a trace cache entry changed by one character (at 120 positions), truncated,
    empty, noise or another key's intact entry gives, in the trace that reads it and the one after,
    exactly the values of a trace that skips the cache, and never crashes the process (CasADi's
    deserialize segfaulted on some: the loads run in a subprocess)."""
    import subprocess
    import sys
    from casadi_delassus.codegen import trace as trace_module
    from casadi_delassus.codegen import trace_cache
    monkeypatch.setenv("CASADI_DELASSUS_CACHE", str(tmp_path))
    monkeypatch.setattr(trace_cache, "KEEP_AFTER_S", -1.0)
    robot = cd.load_robot("chain:n=3")
    cs, _ = cd.constraint_set(robot, "default")
    folder = tmp_path / "traces"
    entries = {}
    for algorithm in ("naive", "ltl_osim"):
        trace_module.trace(robot, cs, algorithm)
        entries[algorithm] = (folder / f"{trace_cache.key(robot, cs, algorithm, True, False)}.casadi").read_bytes()
    damaged = _damaged_entries(entries["naive"], entries["ltl_osim"], np.random.default_rng(5))
    r = subprocess.run([sys.executable, "-c", _DAMAGED_TRACES], input=json.dumps([d.hex() for d in damaged]),
                       capture_output=True, text=True, env={**os.environ, "CASADI_DELASSUS_CACHE": str(tmp_path)})
    assert r.returncode == 0, f"the process died (status {r.returncode}): {r.stderr[-500:]}"
    assert json.loads(r.stdout) == [], f"{len(json.loads(r.stdout))} traces of {2 * len(damaged)} differ from a fresh one"


def test_build_cached_builds_once_and_leaves_nothing_half_written(tmp_path):
    """codegen/build.build_cached (the contact step, rollout, derivatives and MuJoCo step): a build moves in the .c,
    the .so and the sealed manifest; a second call for the same key takes them without making anything, another key
    builds again; a compile that fails leaves no file, manifest or temporary folder."""
    from casadi_delassus.codegen.build import build_cached
    from casadi_delassus.errors import CompilerError
    made = []

    def make(source="double twice(double x) { return 2 * x; }\n"):
        made.append(source)
        return source, ["-O1"], {"what": "twice"}
    path = build_cached(tmp_path / "a", "twice", make, "gcc", "key1", "step")
    manifest = artifact.verify(path, ("c", "so"), "step")
    assert manifest["what"] == "twice" and manifest["hash"] == "key1" and manifest["artifact"] == "step"
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["twice.c", "twice.json", "twice.so"]
    assert build_cached(tmp_path / "a", "twice", make, "gcc", "key1", "step") == path and len(made) == 1
    build_cached(tmp_path / "a", "twice", make, "gcc", "key2", "step", timed=True)
    assert len(made) == 2 and artifact.verify(path, ("c", "so"), "step")["compile_s"] >= 0
    with pytest.raises(CompilerError):
        build_cached(tmp_path / "c", "broken", lambda: make("this is not C"), "gcc", "key1", "step")
    assert not (tmp_path / "c").exists()


def test_units_compile_each_part_of_one_file_at_its_own_level(tmp_path):
    """build.Units (the MuJoCo rollout's CasADi code and solver): each -DCD_UNIT part of the one .c is compiled with its
    own flags and linked into one .so whose functions call across the parts; a failing unit is one CompilerError and
    leaves nothing."""
    import ctypes
    from casadi_delassus.codegen.build import Units, build_cached
    from casadi_delassus.errors import CompilerError
    source = ("#if CD_UNIT == 1\n#ifdef __OPTIMIZE__\nint level1(void) { return 1; }\n#else\nint level1(void) { return 0; }\n"
              "#endif\ndouble twice(double x) { return 2 * x; }\n#else\ndouble twice(double x);\n"
              "double four(double x) { return twice(twice(x)); }\n#endif\n")
    path = build_cached(tmp_path / "a", "split", lambda: (source, Units((("-O0",), ("-O2",))), {}), "gcc", "k", "step")
    lib = ctypes.CDLL(str(path.with_suffix(".so")))
    lib.four.restype, lib.four.argtypes = ctypes.c_double, [ctypes.c_double]
    assert lib.four(1.5) == 6.0 and lib.level1() == 0, "unit 1 is compiled at its own -O0, unit 2 calls into it"
    assert str(Units((("-O1", "-x"), ("-O2",)))) == "-O1 -x | -O2"
    with pytest.raises(CompilerError, match="failed"):
        build_cached(tmp_path / "c", "broken", lambda: (source + "#if CD_UNIT == 2\nnot C\n#endif\n",
                                                        Units((("-O1",), ("-O2",))), {}), "gcc", "k", "step")
    assert not (tmp_path / "c").exists()
