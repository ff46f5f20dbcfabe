"""Staged (re-evaluation) functions (codegen/staging.py) against the monolithic function and
the NumPy oracle, the explicit damped inverse against the oracle, the compiled stages, and
the Table I scenarios of the matrix-free paper."""
import functools
import json

import casadi as ca
import numpy as np
import pytest

import casadi_delassus as cd
from casadi_delassus.verify.check import ORACLES, relative_error
from casadi_delassus.codegen import staging
from casadi_delassus.opcount import count_ops
from casadi_delassus.codegen.trace import trace
from casadi_delassus.constraints import ConstraintSet
from casadi_delassus.errors import DelassusError, InputError
from casadi_delassus.model import load_robot
from conftest import case, model_for

N_SAMPLES = 20
STAGED = ("delassus_apply", "damped_inverse_apply", "damped_inverse_explicit")


@functools.lru_cache(maxsize=None)
def _traced(name, algorithm):
    robot, cs = case(name)
    f, inputs, outputs = trace(robot, cs, algorithm)
    return robot, cs, f, staging.split(f, staging.algorithm_stages(algorithm, list(f.name_in())))


def _samples(robot, cs, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(N_SAMPLES):
        yield {"q": robot.random_q(rng), "K": {}, "lam": rng.normal(size=cs.m), "R": rng.uniform(0.1, 10.0, cs.m)}


def _boundary_sizes(f, stage_of_input):
    """Independent of extract_parametric: walk f's instructions, give every node the latest
    stage among its inputs (constants none) and count, per cut after stage s, the nodes of
    stages <= s that a node of a later stage reads or that f outputs."""
    slot, level, reads, outputs = {}, {}, {}, []
    for k in range(f.n_instructions()):
        op, ins, out = f.instruction_id(k), f.instruction_input(k), f.instruction_output(k)
        if op == ca.OP_OUTPUT:
            outputs.append(slot[ins[0]])
            continue
        if op == ca.OP_INPUT:
            level[k] = stage_of_input[ins[0]]
        elif op == ca.OP_CONST:
            level[k] = -1
        else:
            reads[k] = [slot[i] for i in ins]
            level[k] = max(level[p] for p in reads[k])
        slot[out[0]] = k                # work slots are reused: the latest writer owns the slot
    sizes = []
    for s in range(max(stage_of_input.values())):
        stored = {p for k, ps in reads.items() if level[k] > s for p in ps if 0 <= level[p] <= s}
        sizes.append(len(stored | {p for p in outputs if 0 <= level[p] <= s}))
    return sizes


@pytest.mark.parametrize("algorithm", STAGED)
def test_staged_equals_monolithic(algorithm):
    robot, cs, f, stages = _traced("tilted-points", algorithm)
    assert [s.name for s in stages] == (["factor", "damping", "apply"] if "damped" in algorithm else ["factor", "apply"])
    worst = 0.0
    for x in _samples(robot, cs):
        whole = np.asarray(f(**{k: x[k] for k in f.name_in()})[algorithm]).ravel()
        staged = staging.evaluate(stages, x)["apply"][algorithm].ravel()
        worst = max(worst, relative_error(staged, whole))
    assert worst <= 1e-13, worst


@pytest.mark.parametrize("algorithm", STAGED)
def test_stored_intermediates_are_the_boundary_nodes(algorithm):
    robot, cs, f, stages = _traced("tilted-points", algorithm)
    groups = staging.algorithm_stages(algorithm, list(f.name_in()))
    stage_of = {i: s for s, (_, names) in enumerate(groups) for i, n in enumerate(f.name_in()) if n in names}
    stored = [int(s.function.size1_out(0)) for s in stages[:-1]]
    assert stored == _boundary_sizes(f, stage_of)
    counts = [count_ops(s.function) for s in stages]
    total = count_ops(f)
    # the stages together do the monolithic work; only constants used on both sides of a cut repeat
    assert total["flops"] == sum(c["flops"] for c in counts)
    assert total["instructions"] <= sum(c["instructions"] for c in counts) <= total["instructions"] + total["ops"]["const"]


def test_new_vector_costs_only_the_last_stage():
    """Matrix-free paper Table I: a new vector re-runs the apply stage, which reads the stored
    kinematics/inertias; it is cheaper than the whole operator."""
    for algorithm in ("delassus_apply", "damped_inverse_apply"):
        _, _, f, stages = _traced("tilted-points", algorithm)
        assert count_ops(stages[-1].function)["instructions"] < 0.8 * count_ops(f)["instructions"]
        assert stages[-1].function.name_in() == ["lam", stages[-2].work_out]


@pytest.mark.parametrize("name", ["go2-4F3", "swimmer5"])
@pytest.mark.parametrize("algorithm", ["damped_inverse_explicit", "delassus_explicit_apply"])
def test_explicit_operators_match_reference(name, algorithm):
    robot, cs, f, stages = _traced(name, algorithm)
    worst = 0.0
    for x in _samples(robot, cs, seed=1):
        expected = ORACLES[algorithm](robot, cs, x)
        whole = np.asarray(f(**{k: x[k] for k in f.name_in()})[algorithm])
        staged = staging.evaluate(stages, x)["apply"][algorithm]
        worst = max(worst, relative_error(whole, expected), relative_error(staged, expected))
    print(f"{name} {algorithm}: max relative error {worst:.2e}")
    assert worst <= 1e-9


def test_damping_input_meanings():
    """R is a stiffness for the matrix-free paper's damped inverses, a compliance for PV-soft."""
    robot, cs = case("tilted-points")
    meaning = {a: next(i["meaning"] for i in trace(robot, cs, a)[1] if i["name"] == "R")
               for a in ("damped_inverse_apply", "damped_inverse_explicit", "pv_soft")}
    assert meaning["damped_inverse_apply"].startswith("constraint stiffness")
    assert meaning["damped_inverse_explicit"] == meaning["damped_inverse_apply"]
    assert meaning["pv_soft"].startswith("constraint compliance")


def test_compiled_stages_load_and_agree(out_dir):
    robot, cs = case("tilted-points")
    f = cd.generate(robot, cs.specs, "damped_inverse_apply", out_dir=out_dir, stages=True)
    assert f.names == ["factor", "damping", "apply"]
    cs = f.constraints
    x = next(_samples(robot, cs, seed=2))
    f.run("factor", q=x["q"])
    f.run("damping", R=x["R"])
    for lam in np.random.default_rng(3).normal(size=(3, cs.m)):       # new vectors: the last stage only
        got = f.run("apply", lam=lam)["damped_inverse_apply"]
        assert relative_error(got, ORACLES["damped_inverse_apply"](robot, cs, x | {"lam": lam})) <= 1e-10
    f.run("factor", q=x["q"])              # a new q: what the damping stage stored is stale
    with pytest.raises(DelassusError, match="run stage 'damping' before 'apply'"):
        f.run("apply", lam=x["lam"])
    R2 = x["R"] * 2                          # new damping: the last two stages
    f.run("damping", R=R2)
    expected = ORACLES["damped_inverse_apply"](robot, cs, x | {"R": R2})
    assert relative_error(f.run("apply", lam=x["lam"])["damped_inverse_apply"], expected) <= 1e-10
    assert relative_error(f(x["q"], R=R2, lam=x["lam"]), expected) <= 1e-10
    with pytest.raises(InputError, match="unexpected inputs"):
        f(x["q"], R=R2, lam=x["lam"], tau=x["lam"])
    for g in f.stages:
        m = json.loads(g.manifest_path.read_text())
        assert m["sz_w"] == g.manifest["sz_w"] >= 0 and m["work_bytes"]["w"] == 8 * m["sz_w"]
        assert {"sz_arg", "sz_res", "sz_iw"} <= set(m) and set(m["work_bytes"]) == {"arg", "res", "iw", "w"}
        assert m["stage"]["of"] == ["factor", "damping", "apply"]
    damping = f.stages[1].manifest
    assert [i["name"] for i in damping["inputs"]] == ["R", "w_factor"]
    assert damping["inputs"][1]["shape"] == [damping["stage"]["work_sizes"]["w_factor"]]
    assert damping["outputs"][0]["name"] == "w_damping"


def test_bad_stages():
    _, _, f, _ = _traced("tilted-points", "damped_inverse_apply")
    with pytest.raises(DelassusError, match="unknown inputs"):
        staging.split(f, [("factor", ["q"]), ("apply", ["R", "lam", "x"])])
    with pytest.raises(DelassusError, match="missing"):
        staging.split(f, [("factor", ["q"]), ("apply", ["lam"])])
    with pytest.raises(DelassusError, match="nothing to stage"):
        staging.algorithm_stages("pv_osim", ["q"])


def test_table1_scenarios():
    g1 = model_for("g1")
    fallen = ConstraintSet.parse(g1, g1.scenarios["fallen"])
    assert len(fallen.constraints) >= 12 and len({c.body for c in fallen.constraints}) >= 12
    p = load_robot("pyramid:layers=3")
    assert p.nv == 6 * (9 + 4 + 1) and all(b.parent == -1 for b in p.bodies)
    assert ConstraintSet.parse(p, p.scenarios["default"]).m == 3 * (4 * 9 + 16 * (4 + 1))
    paper = load_robot("pyramid")
    assert (paper.n_bodies, len(paper.scenarios["default"])) == (30, 288)       # matrix-free paper, Table I
    with pytest.raises(DelassusError, match="layers"):
        load_robot("pyramid:layers=0")


def test_pyramid_contact_points_coincide():
    """With box (k, i, j) at ((i + k/2) s, (j + k/2) s, (k + 1/2) s), s = 0.2, unrotated, both
    points of every box-to-box contact are one world point, on the lower box's top face, and
    every ground contact is at height 0."""
    s = 0.2
    centre = {f"box{k}_{i}_{j}": np.array([(i + k / 2) * s, (j + k / 2) * s, (k + 0.5) * s])
              for k in range(3) for i in range(3 - k) for j in range(3 - k)}
    robot = load_robot("pyramid:layers=3")
    assert set(centre) == {b.name for b in robot.bodies}
    for spec in robot.scenarios["default"]:
        links, _, points = spec.partition(":3d@")
        a, _, b = links.partition("|")
        pa, _, pb = points.partition(";")
        world_a = centre[a] + np.array(pa.split(","), float)
        if not b:
            assert abs(world_a[2]) < 1e-12 and np.all(np.abs(world_a[:2] - centre[a][:2]) <= s / 2 + 1e-12)
            continue
        world_b = centre[b] + np.array(pb.split(","), float)
        assert np.allclose(world_a, world_b, atol=1e-12), spec
        assert np.isclose(world_b[2], centre[b][2] + s / 2) and np.all(np.abs(world_b[:2] - centre[b][:2]) <= s / 2 + 1e-12)
