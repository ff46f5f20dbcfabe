"""The algorithm registry: the algorithms that handle constraints between one link and the world
only reject link-to-link and joint rows with one line naming those that take them, and
``-a auto`` chooses among the algorithms that accept the constraints."""
import pytest

from casadi_delassus.codegen.trace import choose_cheapest, trace
from casadi_delassus.errors import ConstraintError
from casadi_delassus.registry import ALGORITHMS, loop_algorithms
from conftest import case


@pytest.mark.parametrize("algo", [a for a in ALGORITHMS if a not in loop_algorithms()])
def test_other_algorithms_reject_link_to_link_and_joint_rows(algo):
    robot, cs = case("go2-foot-to-foot")
    with pytest.raises(ConstraintError) as err:
        trace(robot, cs, algo)
    msg = str(err.value)
    assert f"algorithm {algo!r}" in msg and "FL_foot|RR_foot" in msg and "\n" not in msg
    assert all(a in msg for a in ("naive", "ltl_osim", "delassus_apply", "damped_inverse_apply", *loop_algorithms()))


def test_auto_chooses_among_the_algorithms_that_accept_them():
    robot, cs = case("go2-foot-to-foot")
    best, counts, _ = choose_cheapest(robot, cs)
    assert set(counts) == {"naive", "ltl_osim"} and best in counts
