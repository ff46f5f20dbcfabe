"""The matrix-free operators (delassus_apply, damped_inverse_apply) against the NumPy oracle
(the traced SX Function evaluated numerically), the contact scenarios of the matrix-free paper
(swimmer, boxes), and the linear growth of the operators' operation counts."""
import functools

import numpy as np
import pytest

from casadi_delassus.verify.check import ORACLES, relative_error
from casadi_delassus.opcount import count_ops
from casadi_delassus.codegen.trace import trace
from casadi_delassus.constraints import ConstraintSet
from casadi_delassus.errors import ModelError
from casadi_delassus.model import load_robot
from casadi_delassus.model.registry import is_available

N_SAMPLES = 20
CASES = {"go2-4F3": ("go2", "4F3"), "g1-8F3": ("g1", "8F3"), "talos-2F": ("talos", "2F"),
         "swimmer5": ("swimmer:n=5", "default"), "boxes3": ("boxes:n=3", "default")}
ALGOS = ("delassus_apply", "damped_inverse_apply")


@functools.lru_cache(maxsize=None)
def _case(case):
    spec, sc = CASES[case]
    if ":" not in spec and not is_available(spec):
        pytest.skip(f"{spec} model not installed")
    robot = load_robot(spec)
    return robot, ConstraintSet.parse(robot, robot.scenarios[sc])


def _worst(robot, cs, algo, seed=0):
    f, _, _ = trace(robot, cs, algo)
    rng = np.random.default_rng(seed)
    worst = 0.0
    for _ in range(N_SAMPLES):
        x = {"q": robot.random_q(rng), "K": {}, "lam": rng.normal(size=cs.m), "R": rng.uniform(0.1, 10.0, cs.m)}
        y = np.asarray(f(**{k: x[k] for k in f.name_in()})[algo]).ravel()
        worst = max(worst, relative_error(y, ORACLES[algo](robot, cs, x)))
    return worst


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("case", CASES)
def test_matches_reference(case, algo):
    robot, cs = _case(case)
    err = _worst(robot, cs, algo)
    print(f"{case} {algo}: max relative error {err:.2e}")
    assert err <= 1e-9


def test_damped_inverse_inverts_regularized_delassus():
    """Λ_R (R⁻¹ + Λ⁻¹) a = a through both operators, where Λ⁻¹ is rank-deficient (g1, 24 rows
    on 12 foot DoFs)."""
    robot, cs = _case("g1-8F3")
    fa = trace(robot, cs, "delassus_apply")[0]
    fd = trace(robot, cs, "damped_inverse_apply")[0]
    rng = np.random.default_rng(3)
    q, a, R = robot.random_q(rng), rng.normal(size=cs.m), rng.uniform(0.5, 2.0, cs.m)
    lam = np.asarray(fd(q=q, R=R, lam=a)["damped_inverse_apply"]).ravel()
    back = lam / R + np.asarray(fa(q=q, lam=lam)["delassus_apply"]).ravel()
    assert np.allclose(back, a, rtol=1e-9, atol=1e-9)


def test_synthetic_contact_scenarios():
    sw = load_robot("swimmer:n=10")
    assert (sw.nv, sw.n_bodies, len(sw.scenarios["default"])) == (15, 10, 20)
    assert ConstraintSet.parse(sw, sw.scenarios["default"]).m == 60
    bx = load_robot("boxes:n=5")
    assert bx.nv == 30 and all(b.parent == -1 for b in bx.bodies)
    assert ConstraintSet.parse(bx, bx.scenarios["default"]).m == 60     # ground + 4 stacked pairs, 4 points each
    assert load_robot("swimmer").n_bodies == 10
    with pytest.raises(ModelError):
        load_robot("swimmer:n=0")
    with pytest.raises(ModelError):
        load_robot("boxes:m=3")


def test_operators_grow_linearly():
    """Matrix-free paper Fig. 2: instructions grow linearly with the swimmer's links
    (the per-link increment is constant)."""
    counts = {a: [] for a in ALGOS}
    for n in (8, 16, 32):
        robot = load_robot(f"swimmer:n={n}")
        cs = ConstraintSet.parse(robot, robot.scenarios["default"])
        for a in ALGOS:
            counts[a].append(count_ops(trace(robot, cs, a)[0])["instructions"])
    for a, c in counts.items():
        slope = np.polyfit(np.log([8, 16, 32]), np.log(c), 1)[0]
        assert slope <= 1.1, (a, c)
        assert abs((c[2] - c[1]) / 16 - (c[1] - c[0]) / 8) <= 2, (a, c)
