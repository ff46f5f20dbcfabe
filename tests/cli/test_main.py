"""The command group (cli/main.py): `--quiet` silences the progress of every command (issue 34 point 2)."""
import pytest

from casadi_delassus import progress
from cli.test_cli import in_process


@pytest.fixture
def fast_progress(monkeypatch):
    monkeypatch.setattr(progress, "AFTER", 0.0)
    yield
    progress.quiet(False)


def test_quiet_silences_a_builds_progress(fast_progress, tmp_path):
    """The same step build with and without --quiet: its phases on stderr, then nothing (the result still prints)."""
    args = ("step", "chain:n=3", "-c", "link3", "--samples", "6")
    code, out, err = in_process(*args, "-o", str(tmp_path / "loud"))
    assert code == 0 and "PASS" in out and "compiling contact_" in err, err
    code, out, err = in_process("--quiet", *args, "-o", str(tmp_path / "quiet"))
    assert code == 0 and "PASS" in out and err == "", err
