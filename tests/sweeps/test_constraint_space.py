"""sweeps/constraint_space.py on small trees: PV-OSIM's backward sweep of the rows
(``rows_to_bases``) and the update at a free joint (``free_update``, PV eq. 48) give Λ⁻¹ of
the NumPy reference; ``support`` and ``cca`` read the tree."""
import casadi as ca
import numpy as np
import pytest

from casadi_delassus.sweeps.articulated import articulated_inertias
from casadi_delassus.sweeps.constraint_space import cca, free_update, lead_rows, rows_to_bases, support
from casadi_delassus.symbolic import linalg
from casadi_delassus.symbolic.frames import slid_transforms
from casadi_delassus.verify import reference as ref

from conftest import SMALL_TREES, case, evaluate


@pytest.mark.parametrize("name", SMALL_TREES)
def test_rows_to_bases_and_free_update_give_the_delassus_matrix(name):
    robot, cs = case(name)
    q = ca.SX.sym("q", robot.nq)
    T = slid_transforms(robot, cs, q)
    abi = articulated_inertias(robot, T)
    L, stack, via = rows_to_bases(robot, cs, T, abi, cs.K_body())
    for b in (b for b, (rows, _) in enumerate(stack) if rows and abi[b].free):
        free_update(L, stack[b][0], abi[b], stack[b][1], lead_rows(T, abi, via[b]))
    D = linalg.to_sx(L, cs.m)
    rng = np.random.default_rng(4)
    for _ in range(3):
        qv = robot.random_q(rng)
        expected = ref.delassus(robot, cs, qv)
        np.testing.assert_allclose(evaluate([q], [D], [qv])[0], expected, rtol=0, atol=1e-10 * np.abs(expected).max())


def test_support_and_closest_common_ancestor():
    """tilted: t5 and t7 hang from the base t0 through different children (t1.., t6..)."""
    robot, cs = case("tilted-small")
    ES = support(robot, cs)
    assert ES[0] == [0, 1] and ES[5] == [0] and ES[7] == [1] and ES[6] == [1]
    assert cca(robot, 5, 7) == 0 and cca(robot, 3, 5) == 3
