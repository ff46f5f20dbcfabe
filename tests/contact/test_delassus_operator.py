"""contact/delassus_operator.py: each Delassus operator's damped inverse (G + d I)⁻¹ b, evaluated from its own SX
(factor, then solve; the matrix-free one from its prep output ``wd``), equals NumPy's solve with Pinocchio 4's G
(verify/contact_problems.py) on go1 and Talos, at small and large damping, to a tolerance scaled by the
conditioning of G + d I; the operators are named by route and only the matrix-free one adds to prep."""
import casadi as ca
import numpy as np
import pytest

from casadi_delassus.contact.delassus_operator import OPERATORS, DenseDelassus, MatrixFreeDelassus
from casadi_delassus.contact.step import check_contacts
from casadi_delassus.model import load_robot

pytest.importorskip("pinocchio")
from casadi_delassus.verify import contact_problems as cp  # noqa: E402


def damped_inverse(op, q, G, d, b):
    """(G + d I)⁻¹ b by ``op``'s own factor and solve, as the step's C calls them."""
    if isinstance(op, DenseDelassus):
        return np.asarray(op.solve(op.factor(G, d), b)).ravel()
    q_sx = ca.SX.sym("q", len(q))
    wd = ca.Function("wd", [q_sx], [op.prep_outputs(q_sx)["wd"]])(q)
    return np.asarray(op.solve(b, op.factor(np.full(len(b), 1.0 / d), wd))).ravel()


def scale(op, A, G, d):
    """The error scale of ``op``'s (G + d I)⁻¹ b: κ(G + d I); the matrix-free one's R - R a_R with R = 1/d cancels
    digits as ‖G‖/d grows (measured on go1 at d = 1e-4: 1.8e4 ε against κ ‖G‖/d = 1.9e5)."""
    grows = max(1.0, np.abs(G).max() / d) if isinstance(op, MatrixFreeDelassus) else 1.0
    return np.linalg.cond(A) * grows


@pytest.mark.parametrize("name", ["go1_stand", "talos_stand"])
@pytest.mark.parametrize("route", list(OPERATORS))
def test_the_damped_inverse_is_numpys_with_pinocchios_g(name, route):
    p = cp.build(name)
    robot = load_robot(p.robot)
    op = OPERATORS[route](robot, check_contacts(robot, p.specs), "t")
    rng = np.random.default_rng(0)
    for d in (1e-4, 1e-1, 10.0):
        A = p.G + d * np.eye(len(p.G))
        for _ in range(3):
            b = rng.normal(size=len(p.G))
            want = np.linalg.solve(A, b)
            got = damped_inverse(op, p.q, p.G, d, b)
            assert np.linalg.norm(got - want) <= 10 * np.finfo(float).eps * scale(op, A, p.G, d) * np.linalg.norm(want)


def test_only_the_matrix_free_operator_adds_to_prep():
    robot = load_robot("go1")
    cs = check_contacts(robot, "4F3")
    q = ca.SX.sym("q", robot.nq)
    assert DenseDelassus(robot, cs, "t").prep_outputs(q) == {} and DenseDelassus.stored == ()
    assert list(MatrixFreeDelassus(robot, cs, "t").prep_outputs(q)) == list(MatrixFreeDelassus.stored) == ["wd"]
    assert list(OPERATORS) == ["dense", "matrix_free"]
