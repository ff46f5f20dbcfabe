"""contact/candidates.py: the one spec form LINK[@x,y,z][/r] of a contact candidate (issue 34, point 3), the same
point as the constraint LINK:3d-world[@x,y,z], refused in that form when wrong, and scenarios of points."""
import numpy as np
import pytest

import casadi_delassus as cd
from casadi_delassus.constraints import parse_constraint
from casadi_delassus.contact import candidates as cc
from casadi_delassus.simulation.simulate import Scene
from casadi_delassus.contact.step import check_contacts
from casadi_delassus.errors import ConstraintError, DelassusError, InputError


@pytest.fixture(scope="module")
def go1():
    return cd.load_robot("go1")


@pytest.mark.parametrize("text, point, radius", [("FL_foot", [0, 0, 0], 0.0), ("FL_foot@0.1,-0.2,0.3", [0.1, -0.2, 0.3], 0),
                                                 ("FL_foot@0,0,-0.02/0.02", [0, 0, -0.02], 0.02),
                                                 ("FL_foot:3d-world@0.1,0,0", [0.1, 0, 0], 0.0)])
def test_a_candidate_is_the_constraint_point(go1, text, point, radius):
    """The candidate's body point is the one constraints.py puts at LINK:3d-world@x,y,z (computed there, not here)."""
    c = cc.parse_candidate(go1, text)
    ref = parse_constraint(go1, "FL_foot:3d-world@" + ",".join(map(str, point)))
    assert c.body == ref.body and np.array_equal(c.point, ref.point) and c.radius == radius and c.link == "FL_foot"


def test_step_and_simulate_take_the_same_form(go1):
    """check_contacts (the compiled step's) and Scene (simulate's) read one list alike; the old spelling is the same
    point, so its specs and cache names do not move."""
    texts = ["FL_foot@0,0,-0.02", "FR_foot", "RL_foot:3d-world@0,0,-0.02"]
    assert check_contacts(go1, texts).specs == ["FL_foot:3d-world@0,0,-0.02", "FR_foot:3d-world",
                                                "RL_foot:3d-world@0,0,-0.02"]
    scene, cs = Scene(go1, texts), check_contacts(go1, texts)
    assert [c.body for c in scene.candidates] == [c.body for c in cs.constraints]
    assert all(np.array_equal(a.point, b.point) for a, b in zip(scene.candidates, cs.constraints))


@pytest.mark.parametrize("text, words", [
    ("FL_toe", "bad contact candidate 'FL_toe': unknown link or frame"),
    ("FL_foot:6d", "not a world-aligned point contact LINK[@x,y,z][/r]"),
    ("FL_foot:3d", "not a world-aligned point contact"),
    ("FL_foot@0,0", "'FL_foot@0,0': the offset after '@' must be three numbers x,y,z"),
    ("FL_foot@", "the offset after '@' must be three numbers"),
    ("FL_foot@0,0,1e400", "the offset after '@' must be three numbers"),
    ("@0,0,0", "expected LINK[@x,y,z][/r]"),
    ("A|B", "expected LINK[@x,y,z][/r]"),
])
def test_errors_name_the_one_form(go1, text, words):
    """Every refusal is said of what the user wrote, in the one form: never the constraint spelling
    (LINK:3d-world) and never a kind the step refuses (6d, random6)."""
    for parse in (lambda t: check_contacts(go1, [t]), lambda t: Scene(go1, [t])):
        with pytest.raises(ConstraintError) as e:
            parse(text)
        msg = str(e.value)
        assert words in msg and "3d-world" not in msg and "random6" not in msg, msg


def test_a_slash_in_a_link_name_is_no_radius():
    """A model's link may be named 'b*/ox' (tests/stepping/test_contact_physics.py escapes such names into C): the '/' before
    an offset or a kind is part of the name; only a last '/' with a number after it is a radius."""
    assert cc.point_spec("b*/ox:3d-world@0.1,0.1,-0.05") == "b*/ox:3d-world@0.1,0.1,-0.05"
    assert cc.point_spec("b*/ox@0,0,0") == "b*/ox:3d-world@0,0,0"
    with pytest.raises(ConstraintError, match="is a sphere"):
        cc.point_spec("b*/ox@0,0,0/0.1")


def test_a_bad_radius_and_a_sphere_in_the_step(go1):
    with pytest.raises(InputError, match="radius after '/' must be a number ≥ 0"):
        cc.parse_candidate(go1, "FL_foot/-1")
    with pytest.raises(ConstraintError, match="is a sphere: the contact step takes points LINK\\[@x,y,z\\]"):
        check_contacts(go1, ["FL_foot/0.02"])


def test_scenarios_name_candidates(go1):
    assert cc.candidate_list(go1, "4F3") == ["FL_foot", "FR_foot", "RL_foot", "RR_foot"]
    assert check_contacts(go1, "4F3").specs == check_contacts(go1, ["FL_foot", "FR_foot", "RL_foot", "RR_foot"]).specs
    talos = cd.load_robot("talos")
    assert cc.scenario_candidates(talos, "2F4x3")[0] == "left_sole_link@0.1,0.05,0"
    with pytest.raises(DelassusError, match=r"'left_sole_link:6d', not a point.*scenarios of points: 2F4x3"):
        cc.scenario_candidates(talos, "2F")
    with pytest.raises(DelassusError, match="unknown scenario 'nope'"):
        cc.scenario_candidates(go1, "nope")


def test_contact_step_and_simulate_default_to_auto():
    """Issue 34 point 4: one default, auto, as for algorithms."""
    import inspect
    for f in (cd.contact_step, cd.ContactStep, cd.simulate):
        assert inspect.signature(f).parameters["solver"].default == "auto"
