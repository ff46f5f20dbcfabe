"""tests/cli_runner.py: a command forked from the preloaded server behaves as `python -m` started afresh: exit
statuses, output at the descriptor level, env and cwd, the timeout; the CLI's environment read when it runs."""
import os
import subprocess
import textwrap

import pytest

from cli_runner import run_cli, run_module

PROBE = """
import os, sys
print("argv", sys.argv[1:], "cwd", os.getcwd(), "x", os.environ.get("RUNNER_X"), "tty", sys.stdout.isatty(),
      "path0", sys.path[0], "stdin", repr(sys.stdin.read()))
sys.stdout.flush()
os.system("echo from a shell; echo to stderr >&2")
os.write(2, b"written to descriptor 2\\n")
"""


def module(tmp_path, name, code):
    """A module ``name`` in tmp_path (the working directory of the command, so first on -m's path)."""
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(code))
    return name


def test_env_cwd_argv_and_descriptor_level_output(tmp_path, monkeypatch):
    r = run_module(module(tmp_path, "probe", PROBE), "a", tmp_path / "b", cwd=tmp_path,
                   env=dict(os.environ, RUNNER_X="7"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"argv ['a', '{tmp_path / 'b'}'] cwd {tmp_path} x 7 tty False path0 {tmp_path} "
                                     "stdin ''", "from a shell"]
    assert r.stderr.splitlines() == ["to stderr", "written to descriptor 2"]
    monkeypatch.setenv("RUNNER_X", "inherited")
    assert " x inherited " in run_module("probe", cwd=tmp_path).stdout
    assert " x None " in run_module("probe", cwd=tmp_path, env={k: v for k, v in os.environ.items() if k != "RUNNER_X"}).stdout


@pytest.mark.parametrize("code, status, stderr", [
    ("import sys; sys.exit(3)", 3, ""),
    ("import sys; sys.exit()", 0, ""),
    ("import sys; sys.exit('a message')", 1, "a message\n"),
    ("raise RuntimeError('uncaught')", 1, "RuntimeError: uncaught\n"),
    ("print('done')", 0, ""),
])
def test_exit_status_is_pythons(tmp_path, code, status, stderr):
    r = run_module(module(tmp_path, "ends", code), cwd=tmp_path)
    assert r.returncode == status and r.stderr.endswith(stderr)
    assert ("Traceback" in r.stderr) == ("uncaught" in code)


def test_timeout_kills_the_command(tmp_path):
    with pytest.raises(subprocess.TimeoutExpired) as expired:
        run_module(module(tmp_path, "sleeps", "import time; print('started', flush=True); time.sleep(60)"),
                   cwd=tmp_path, timeout=3)
    assert expired.value.output == "started\n"


def test_interpreter_start_variables_are_refused():
    with pytest.raises(ValueError, match="real subprocess"):
        run_cli("robots", env=dict(os.environ, PYTHONPATH="/nowhere"))


def test_the_cli_reads_its_environment_when_it_runs(tmp_path):
    """The preloaded registry module read nothing at import: an empty robot folder hides go1 from this command."""
    assert run_cli("count", "go1", "-s", "4F3").returncode == 0
    r = run_cli("count", "go1", "-s", "4F3", env=dict(os.environ, CASADI_DELASSUS_ROBOTS=str(tmp_path)))
    assert r.returncode == 2 and r.stderr.startswith("error: unknown robot 'go1'"), r.stderr
