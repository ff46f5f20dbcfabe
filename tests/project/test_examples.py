"""The scripts under examples/ run as a user runs them and reach what they promise."""
import re
import subprocess
import sys

import pytest

from conftest import REPO


@pytest.mark.parametrize("dynamics", ["symbolic", "compiled"])
def test_go1_standing_ocp_converges(dynamics, out_dir):
    """examples/go1_stand_ocp.py at a tiny size, with the SX dynamics and with the compiled .so
    (casadi.external, IPOPT's exact Hessian from the .so's second derivatives): IPOPT's
    iterations printed, status Solve_Succeeded, the final constraint violation tiny, the trunk
    lowered towards its target."""
    run = subprocess.run([sys.executable, str(REPO / "examples" / "go1_stand_ocp.py"), "--knots", "4",
                          "--dynamics", dynamics, "-o", str(out_dir)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "iter" in run.stdout and "IPOPT status: Solve_Succeeded" in run.stdout
    violation = float(re.search(r"final constraint violation \(inf_pr\): (\S+)", run.stdout).group(1))
    assert violation < 1e-8
    heights = [float(h) for h in re.search(r"trunk height \(m\): (.*)", run.stdout).group(1).split()]
    assert heights[0] == 0.29 and heights[-1] < 0.28


def test_go1_standing_ocp_limited_memory_hessian(out_dir):
    """--hessian limited-memory reaches IPOPT (its banner names the quasi-Newton Hessian) and
    still solves the compiled problem."""
    run = subprocess.run([sys.executable, str(REPO / "examples" / "go1_stand_ocp.py"), "--knots", "4",
                          "--dynamics", "compiled", "--hessian", "limited-memory", "-o", str(out_dir)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "IPOPT status: Solve_Succeeded" in run.stdout
    assert "Hessian approximation: limited-memory" in run.stdout
