"""symbolic/passes.py: passes are recorded only inside ``recording()``, in order, and a traced
algorithm records the same passes whether or not anyone listens (the traced function is unchanged)."""
import casadi as ca

from casadi_delassus.delassus import pv_osim
from casadi_delassus.symbolic import passes

from conftest import case


def test_passes_are_recorded_only_inside_recording():
    passes.done("outside", 1)
    with passes.recording() as recorded:
        passes.done("first", 1)
        passes.done("second", 2, 3)
    passes.done("after", 4)
    assert recorded == [("first", (1,)), ("second", (2, 3))]


def test_an_algorithm_names_its_sweeps_and_is_unchanged():
    robot, cs = case("tilted-small")
    q = ca.SX.sym("q", robot.nq)
    with passes.recording() as recorded:
        inside = pv_osim.delassus(robot, cs, q, cs.K_body())["delassus"]
    outside = pv_osim.delassus(robot, cs, q, cs.K_body())["delassus"]
    assert [name for name, _ in recorded][0] == "articulated inertias H^A" and len(recorded) == 3
    assert ca.Function("a", [q], [inside]).n_instructions() == ca.Function("b", [q], [outside]).n_instructions()
