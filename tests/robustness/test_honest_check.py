"""`check` tells the truth (issue 11, "Honest checks"): NaN or inf anywhere fails, the row
shows the failing output, and the tolerance follows the problem's conditioning so that a
well-posed but ill-conditioned case passes while a wrong result still fails."""
import numpy as np
import pytest
from click.testing import CliRunner

from casadi_delassus import cli
from casadi_delassus.verify.check import DEFAULT_TOL, allowed_error, compare, relative_error
from casadi_delassus.codegen.trace import TracedFunction
from casadi_delassus.constraints import ConstraintSet

from cli_runner import run_cli
from conftest import model_for


class Traced(TracedFunction):
    """A traced function with the interface `compare` uses, optionally corrupted by ``corrupt(name, array) -> array``."""

    def __init__(self, robot, cs, algorithm, corrupt=None, **kw):
        super().__init__(robot, cs, algorithm, **kw)
        self.corrupt = corrupt or (lambda name, a: a)

    def outputs(self, q, **inputs):
        return {k: self.corrupt(k, a) for k, a in super().outputs(q, **inputs).items()}


@pytest.fixture(scope="module")
def go1():
    robot = model_for("go1")
    return robot, ConstraintSet.parse(robot, robot.scenarios["4F3"])


def test_relative_error_of_nan_or_inf_is_inf():
    assert relative_error([1.0, np.nan], [1.0, 2.0]) == np.inf
    assert relative_error([1.0, 2.0], [np.inf, 2.0]) == np.inf
    assert max(0.0, relative_error([np.nan], [1.0])) == np.inf      # max(0.0, nan) was 0.0: "ok"


def test_nan_output_fails(go1):
    robot, cs = go1
    f = Traced(robot, cs, "pv_osimr", corrupt=lambda name, a: np.full_like(a, np.nan))
    res = compare(f, robot, cs, samples=3)
    assert not res["delassus"].passed and res["delassus"].error == np.inf


def test_one_nan_entry_at_one_sample_fails(go1):
    robot, cs = go1
    calls = []

    def corrupt(name, a):
        calls.append(name)
        if len(calls) == 2:
            a = a.copy()
            a[0, 1] = np.nan
        return a
    res = compare(Traced(robot, cs, "pv_osimr", corrupt=corrupt), robot, cs, samples=4)
    assert not res["delassus"].passed


def fake_generate(corrupt):
    """api.generate as the CLI calls it, with the function's outputs corrupted."""
    from casadi_delassus import api
    real = api.generate

    def generate(*args, **kwargs):
        f = real(*args, **kwargs)
        outputs = f.outputs
        f.outputs = lambda *a, **k: {n: corrupt(n, v) for n, v in outputs(*a, **k).items()}
        return f
    return generate


def run_check(monkeypatch, tmp_path, corrupt, *args):
    monkeypatch.setattr(cli.api, "generate", fake_generate(corrupt))
    return CliRunner().invoke(cli.cli, ["check", "go1", "-s", "4F3", "-o", str(tmp_path), "--samples", "5", *args])


def test_cli_check_fails_on_nan(monkeypatch, tmp_path, go1):
    r = run_check(monkeypatch, tmp_path, lambda n, v: np.full_like(v, np.nan), "-a", "pv_osimr")
    assert r.exit_code == 1, r.output
    rows = [line for line in r.stdout.splitlines() if line.startswith("go1 ")]   # not the base line "go1: …"
    assert rows and all("delassus" in row and "inf" in row and "FAIL" in row for row in rows)     # every oracle


def test_cli_check_prints_the_failing_output(monkeypatch, tmp_path, go1):
    """Λ⁻¹ exact, Λ off by 1e-6: the row names osim and shows its error, not Λ⁻¹'s 1e-16."""
    def corrupt(name, v):
        return v * (1 + 1e-6) if name == "osim" else v
    r = run_check(monkeypatch, tmp_path, corrupt, "-a", "pv_osimr", "--osim")
    assert r.exit_code == 1, r.output
    row = next(line for line in r.stdout.splitlines() if line.startswith("go1") and " numpy " in line)
    cells = row.split()
    assert cells[cells.index("pv_osimr") + 4] == "osim" and "FAIL" in row
    assert 9e-7 < float(cells[cells.index("osim") + 1]) < 2e-6


def test_ill_conditioned_passes_and_a_perturbed_result_fails():
    """Bolt on 6D soles (3-DoF legs): cond(Λ⁻¹) up to ~1e8 at random q.  LTL's hard dynamics lose digits
    in proportion (above the fixed 1e-10) but stay within the conditioning rule; the same
    result with one multiplier off by 1e-6 of the largest fails."""
    robot = model_for("erd:bolt_description/robots/bolt.urdf")
    cs = ConstraintSet.parse(robot, ["FL_FOOT:6d", "FR_FOOT:6d"])
    good = compare(Traced(robot, cs, "ltl"), robot, cs, samples=30)
    assert max(c.error for c in good.values()) > DEFAULT_TOL     # the fixed tolerance would fail it
    assert all(c.passed for c in good.values())

    def corrupt(name, a):
        if name == "lam":
            a = a.copy()
            a[0] += 1e-6 * np.abs(a).max()
        return a
    bad = compare(Traced(robot, cs, "ltl", corrupt=corrupt), robot, cs, samples=30)
    assert not bad["lam"].passed and bad["vdot"].passed


def test_allowed_error_rule():
    assert allowed_error(1e-10, 1.0) == allowed_error(1e-10, 1e4) == 1e-10
    assert allowed_error(1e-10, 1e6) == pytest.approx(1e-8)


def test_a_jacobian_not_compared_with_pinocchio_says_why():
    """check --derivative jacobian: 'vs Pinocchio' is a number or n/a with its true reason: the
    inputs Pinocchio's derivatives need that --wrt left out, or an algorithm it has none of."""
    def row(*args):
        r = run_cli("check", "chain:n=6", "-c", "link6:3d", "--derivative", "jacobian", "--samples", "2", *args)
        assert r.returncode in (0, 1), r.stderr
        return r.stdout.splitlines()[-1]
    assert "n/a (Pinocchio's pv Jacobian needs k in --wrt)" in row("-a", "pv", "--wrt", "q,v,tau")
    assert "n/a (Pinocchio has no derivatives of naive" in row("-a", "naive")


def test_ill_conditioned_rows_are_not_called_redundant():
    """Light end links make J M⁻¹ Jᵀ numerically singular (κ ~ 1e10) though J has full row rank:
    the reference says ill-conditioned, with κ; the same point twice is redundant."""
    import numpy as np
    import casadi_delassus as cd
    from casadi_delassus.verify import reference
    robot = cd.load_robot("chain:n=6")
    for b in robot.bodies[3:]:
        b.mass, b.inertia = b.mass * 1e-11, b.inertia * 1e-11
    q, zero = robot.random_q(np.random.default_rng(0)), np.zeros(robot.nv)
    light, _ = cd.constraint_set(robot, ["link6:3d"])
    with pytest.raises(cd.ConstraintError, match=r"ill-conditioned.*κ = [0-9.]+e\+1[0-9]") as err:
        reference.constrained_dynamics(robot, light, q, zero, zero, np.zeros(3))
    assert "redundant" not in str(err.value)
    twice, _ = cd.constraint_set(robot, ["link6:3d", "link6:3d"])
    with pytest.raises(cd.ConstraintError, match="redundant or conflicting: J has rank 3 < m = 6"):
        reference.constrained_dynamics(robot, twice, q, zero, zero, np.zeros(6))
