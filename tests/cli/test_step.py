"""`step` and `simulate` take one contact form, LINK[@x,y,z][/r], or -s SCENARIO, and --solver auto by default
(issue 34 points 3 and 4); their refusals are one line in that form."""
import pytest

from cli.test_cli import in_process


@pytest.mark.parametrize("command", ["step", "simulate"])
@pytest.mark.parametrize("args, words", [
    (["-c", "FL_toe"], "bad contact candidate 'FL_toe': unknown link or frame of robot 'go1' 'FL_toe'; did you mean"),
    (["-c", "FL_foot:6d"], "'FL_foot:6d': not a world-aligned point contact LINK[@x,y,z][/r]"),
    (["-c", "FL_foot@0,0"], "the offset after '@' must be three numbers x,y,z"),
    ([], "give contact candidates: -c LINK[@x,y,z][/r] (repeatable) or -s SCENARIO"),
    (["-s", "4F3", "-c", "FL_foot"], "give either -s SCENARIO or -c candidates, not both"),
    (["-s", "nope"], "unknown scenario 'nope' of robot 'go1' (scenarios of points: 4F3, 2F3)"),
])
def test_refusals_print_the_one_form(tmp_path, command, args, words):
    """`step -c FL_toe` once suggested 6d and random6, which step refuses; simulate's errors printed LINK:3d-world."""
    code, out, err = in_process(command, "go1", *args, "-o", str(tmp_path))
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1, err
    assert "random6" not in err and "3d-world" not in err


def test_step_refuses_a_sphere_and_a_scenario_of_welds(tmp_path):
    code, _, err = in_process("step", "go1", "-c", "FL_foot/0.02", "-o", str(tmp_path))
    assert code == 2 and "is a sphere: the contact step takes points LINK[@x,y,z]" in err
    code, _, err = in_process("step", "talos", "-s", "2F", "-o", str(tmp_path))
    assert code == 2 and "scenario '2F' of talos has 'left_sole_link:6d', not a point" in err


def test_step_takes_a_scenario_and_defaults_to_auto(tmp_path):
    """-s 4F3 builds the step of -c on the four feet (the same .so: the same specs), and auto picks PGS there
    (contact/step.py auto_solver: no body carries more than two contacts)."""
    code, out, err = in_process("step", "go1", "-s", "4F3", "--samples", "6", "-o", str(tmp_path))
    assert code == 0 and ", pgs -> " in out and "PASS" in out, (out, err)
    code, out_c, _ = in_process("step", "go1", *[x for f in ("FL", "FR", "RL", "RR") for x in ("-c", f"{f}_foot")],
                                "--samples", "6", "-o", str(tmp_path))
    assert code == 0 and out_c.splitlines()[0].split(" -> ")[1] == out.splitlines()[0].split(" -> ")[1]


@pytest.mark.parametrize("command", ["step", "simulate"])
def test_help_says_the_form_and_auto(command):
    code, out, _ = in_process(command, "--help")
    assert code == 0 and "-c, --contact LINK[@x,y,z][/r]" in out and "-s, --scenario" in out
    assert "[default: auto]" in " ".join(out.split())
