"""verify/step_check.py: the compiled step against the NumPy reference, and a check that compares nothing does not pass."""
from casadi_delassus import contact_step
from casadi_delassus.verify.step_check import check_step


def test_a_check_of_separating_states_alone_does_not_pass(out_dir):
    """go1's first three random states (seed 0) leave every foot in the air: λ = 0 on both sides, and `step --samples 3`
    printed PASS at 0 iterations.  Now it says none pressed and fails; the fourth state presses and the check passes."""
    s = contact_step("go1", "4F3", out_dir=out_dir, quiet=True)
    vacuous = check_step(s, samples=3)
    assert vacuous.pressed == 0 and vacuous.iterations == 0 and not vacuous.passed
    real = check_step(s, samples=4)
    assert real.pressed == 1 and real.iterations > 0 and real.passed
