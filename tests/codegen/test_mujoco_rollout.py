"""codegen/mujoco_rollout.py: the compiled MuJoCo rollout's C in two compilation units (CasADi's code at its own
level, the hand-written solver at -O2) equals the one-unit build's physics: mujoco.rollout's states to the issue's
tolerances."""
import json

import numpy as np
import pytest

import casadi_delassus as cd
from casadi_delassus.codegen import mujoco_rollout as codegen
from casadi_delassus.codegen.build import AUTO_LEVEL_ENV, Units

mujoco = pytest.importorskip("mujoco")
from mujoco import rollout as mj_rollout  # noqa: E402

from mujoco_model.mj_scenes import gymnasium_model  # noqa: E402


def test_one_compile_where_both_parts_take_the_same_flags():
    assert codegen.compile_flags(("-O2", "-x"), ("-O2", "-x")) == ["-O2", "-x", "-pthread"]
    split = codegen.compile_flags(("-Og",), ("-O2",))
    assert isinstance(split, Units) and split == (("-Og", "-pthread"), ("-O2", "-pthread"))
    assert [lvl for limit, lvl in codegen.CASADI_LEVELS if limit >= 27_068][0] == "-O2", "humanoid's forward keeps -O2"


def test_the_cache_key_follows_what_auto_resolves_by(monkeypatch):
    """An "auto" build's key changes with a forced -O level (and carries the host CPU), an explicit flag set's not."""
    m = gymnasium_model("hopper")
    monkeypatch.delenv(AUTO_LEVEL_ENV, raising=False)
    auto, explicit = codegen.model_key(m, ("auto",), "gcc"), codegen.model_key(m, ("-O2",), "gcc")
    monkeypatch.setenv(AUTO_LEVEL_ENV, "-O0")
    assert codegen.model_key(m, ("auto",), "gcc") != auto and codegen.model_key(m, ("-O2",), "gcc") == explicit
    monkeypatch.delenv(AUTO_LEVEL_ENV)
    assert codegen.model_key(m, ("auto",), "gcc") == auto
    monkeypatch.setattr(codegen, "auto_context", lambda: "another cpu")
    assert codegen.model_key(m, ("auto",), "gcc") != auto


def test_split_build_equals_mujoco_rollout(tmp_path, monkeypatch):
    """hopper with its CasADi unit forced to -O0 (the solver's unit stays -O2): the manifest records both levels and
    the states equal MuJoCo's Newton at 1e-15 over 300 steps."""
    monkeypatch.setattr(codegen, "CASADI_LEVELS", ((float("inf"), "-O0"),))
    monkeypatch.delenv(AUTO_LEVEL_ENV, raising=False)
    m = gymnasium_model("hopper")
    m.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    m.opt.tolerance, m.opt.iterations, m.opt.ls_iterations = 1e-15, 1000, 200
    d, rng = mujoco.MjData(m), np.random.default_rng(3)
    x0 = np.zeros((4, mujoco.mj_stateSize(m, mujoco.mjtState.mjSTATE_FULLPHYSICS)))
    for b in range(4):
        mujoco.mj_resetData(m, d)
        d.qvel[:] = rng.normal(size=m.nv) * 0.1
        mujoco.mj_getState(m, d, x0[b], mujoco.mjtState.mjSTATE_FULLPHYSICS)
    u = 0.5 * np.sin(0.05 * np.arange(300)[None, :, None] + np.arange(m.nu) + np.arange(4)[:, None, None])
    ours, _ = cd.mujoco_rollout(m, d, x0, u, out_dir=tmp_path)
    ref, _ = mj_rollout.rollout(m, d, x0, u)
    manifest = json.loads(next(tmp_path.rglob("mjrollout_*.json")).read_text())
    assert "-O0" in manifest["cflags_casadi"] and "-O2" in manifest["cflags"]
    q, v = slice(1, 1 + m.nq), slice(1 + m.nq, None)
    assert np.abs(ours[..., q] - ref[..., q]).max() <= 1e-6
    assert (np.abs(ours[..., v] - ref[..., v]) / np.maximum(1, np.abs(ref[..., v]))).max() <= 1e-5


def test_the_generated_status_codes_are_the_runtime_ones():
    """The C rollout's ST_* codes (each trajectory's status) are rendered from runtime/mujoco_rollout.py STATUS_CODES,
    by which cd.mujoco_rollout and cd.simulate read the status: every code the C can write has its Python name."""
    import re
    from casadi_delassus.mujoco_model.model import MujocoModel
    from casadi_delassus.mujoco_model.rollout_parts import rollout_parts
    from casadi_delassus.runtime.mujoco_rollout import STATUS, STATUS_CODES
    m = mujoco.MjModel.from_xml_string('<mujoco><worldbody><geom type="plane" size="1 1 0.1"/><body pos="0 0 0.5">'
                                       '<joint type="slide" axis="0 0 1"/><geom type="sphere" size="0.1"/></body>'
                                       '</worldbody></mujoco>')
    model = MujocoModel(m)
    source, _ = codegen.render(model, rollout_parts(model, "status_fwd"), "status")
    codes = dict(re.findall(r"\bST_(\w+) = (\d+),", source))
    assert {name: int(code) for name, code in codes.items()} == STATUS_CODES
    assert sorted(STATUS_CODES.values()) == list(range(len(STATUS)))
    for name in STATUS_CODES:
        assert re.search(rf"(return|=) ST_{name};", source), f"ST_{name} never written"
