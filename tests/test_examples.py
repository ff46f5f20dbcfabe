"""The scripts under examples/ run as a user runs them and reach what they promise."""
import re
import subprocess
import sys

from conftest import REPO


def test_go1_standing_ocp_converges():
    """examples/go1_stand_ocp.py at a tiny size: IPOPT's iterations printed, status
    Solve_Succeeded, the final constraint violation tiny, the trunk lowered towards its target."""
    run = subprocess.run([sys.executable, str(REPO / "examples" / "go1_stand_ocp.py"), "--knots", "4"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "iter" in run.stdout and "IPOPT status: Solve_Succeeded" in run.stdout
    violation = float(re.search(r"final constraint violation \(inf_pr\): (\S+)", run.stdout).group(1))
    assert violation < 1e-8
    heights = [float(h) for h in re.search(r"trunk height \(m\): (.*)", run.stdout).group(1).split()]
    assert heights[0] == 0.29 and heights[-1] < 0.28
