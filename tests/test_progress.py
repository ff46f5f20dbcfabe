"""Long work says so, and the default algorithm scales (issue 11, last "Bad input" bullet):
`count chain:n=300` with the old default (naive) ran over 9 minutes and 5 GB with no output."""
import io
import sys
import time

import pytest

from casadi_delassus import load_robot, progress
from casadi_delassus.registry import CHEAP_NV, LINEAR_TIME, auto_candidates
from casadi_delassus.constraints import ConstraintSet

from cli_runner import run_cli


def candidates(spec, specs=None):
    robot = load_robot(spec)
    return auto_candidates(robot, ConstraintSet.parse(robot, specs or robot.scenarios["default"]))


def test_auto_traces_only_linear_time_algorithms_on_big_robots():
    assert set(candidates("chain:n=300")) == set(LINEAR_TIME)
    assert set(candidates(f"chain:n={CHEAP_NV + 1}")) == set(LINEAR_TIME)


def test_auto_traces_everything_on_small_robots():
    assert {"naive", "ltl_osim", *LINEAR_TIME} <= set(candidates(f"chain:n={CHEAP_NV}"))


def test_auto_falls_back_to_the_only_algorithms_that_accept_the_constraints():
    """Link-to-link rows: only naive and ltl_osim take them, whatever nv."""
    assert set(candidates("chain:n=80", ["link80|link40:3d"])) == {"naive", "ltl_osim"}


@pytest.fixture
def fast_progress(monkeypatch):
    monkeypatch.setattr(progress, "AFTER", 0.05)
    progress.quiet(False)


def test_a_long_step_is_announced_with_its_time(fast_progress, capsys):
    with progress.step("tracing something big"):
        time.sleep(0.3)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and err[0].endswith("tracing something big ...") and "s] " in err[0]
    assert "tracing something big: done in 0." in err[1]


def test_a_quick_step_prints_nothing(fast_progress, capsys):
    with progress.step("quick"):
        pass
    assert capsys.readouterr().err == ""


def test_a_big_step_is_announced_when_it_starts(fast_progress, capsys):
    with progress.step("one long C++ call", now=True):
        assert capsys.readouterr().err.endswith("one long C++ call ...\n")


def test_count_of_a_long_chain_uses_a_scalable_default():
    """A chain just above CHEAP_NV: auto traces the linear-time algorithms only and says which."""
    t0 = time.perf_counter()
    r = run_cli("count", f"chain:n={CHEAP_NV + 2}", "--format", "csv")
    assert r.returncode == 0, r.stderr
    chosen = r.stderr.split("auto -> ")[1].split(":")[0]
    assert chosen in LINEAR_TIME and "naive" not in r.stderr
    assert time.perf_counter() - t0 < 90


def test_a_step_line_is_stamped_with_the_step_start(fast_progress, capsys, monkeypatch):
    """The announcement, printed AFTER seconds into the step, carries the time the step began:
    its stamp plus the 'done in' duration is the closing line's stamp."""
    import re
    monkeypatch.setattr(progress, "AFTER", 0.5)
    with progress.step("first"):
        pass
    with progress.step("stamped"):
        time.sleep(0.8)
    err = capsys.readouterr().err.splitlines()
    start, end = (float(re.match(r"\[\s*([0-9.]+) s\]", line).group(1)) for line in err)
    took = float(re.search(r"done in ([0-9.]+) s", err[1]).group(1))
    assert abs(start + took - end) <= 0.15, err


class FakeTTY(io.StringIO):
    """A terminal as far as progress.py can tell."""
    def isatty(self):
        return True


def test_a_terminal_gets_a_bar_with_the_phase_and_the_time_left(fast_progress, monkeypatch):
    """stderr a terminal, tqdm installed: a step is a bar redrawn in place (carriage returns) with its phase and
    elapsed time, a count a bar with its items and the time left; no heartbeat lines."""
    pytest.importorskip("tqdm")
    tty = FakeTTY()
    monkeypatch.setattr(sys, "stderr", tty)
    with progress.step("tracing something big"):
        time.sleep(0.3)
    bar = progress.Bar(4, "modes", stream=tty)
    for _ in range(4):
        time.sleep(0.15)        # over tqdm's redraw interval (0.1 s)
        bar.advance("m built")
    bar.close()
    out = tty.getvalue()
    assert "\r" in out and "tracing something big: 00:0" in out and "tracing something big: done" in out
    assert "tracing something big: done: 00:00" in out
    assert "| 2/4 [00:00<00:00" in out and "4/4" in out and "s] " not in out


def test_piped_output_gets_heartbeat_lines(fast_progress, capsys):
    """stderr piped: a count of many quick items (a rollout's steps) says where it is once per AFTER seconds."""
    for k in progress.counted(6, "steps"):
        time.sleep(0.03)
    err = capsys.readouterr().err.splitlines()
    assert 1 <= len(err) <= 4 and all("/6 steps" in line and "s] " in line for line in err)
    assert "\r" not in "".join(err)


@pytest.mark.parametrize("how", ["env", "silenced", "quiet"])
def test_quiet_prints_nothing(fast_progress, monkeypatch, capsys, how):
    """CASADI_DELASSUS_QUIET=1, ``with silenced()`` and quiet(): nothing from steps, bars or counts, on a pipe or a
    terminal."""
    tty = FakeTTY()
    monkeypatch.setattr(sys, "stderr", tty)
    if how == "env":
        monkeypatch.setenv("CASADI_DELASSUS_QUIET", "1")
    elif how == "quiet":
        progress.quiet()
    with progress.silenced(how == "silenced"):
        with progress.step("tracing", now=True):
            time.sleep(0.1)
        bar = progress.Bar(2, "modes")
        bar.advance()
        bar.say("a note")
        bar.close()
        list(progress.counted(3, "steps"))
    progress.quiet(False)
    assert tty.getvalue() == "" and capsys.readouterr().err == ""


def test_a_build_shows_its_phases_unless_quiet(fast_progress, tmp_path, capsys):
    """A contact step's build (AFTER 0, piped): its tracing and compiling phases as lines; quiet=True: none."""
    import casadi_delassus as cd
    robot = load_robot("chain:n=3")
    cd.contact_step(robot, ["link3:3d-world"], out_dir=tmp_path / "quiet", quiet=True)
    assert capsys.readouterr().err == ""
    cd.contact_step(robot, ["link3:3d-world"], out_dir=tmp_path / "loud")
    err = capsys.readouterr().err
    assert "tracing and emitting the step contact_" in err and "compiling contact_" in err and ": done in " in err
