"""Issue 13, point 4: ``cd.load`` takes what ``generate`` prints — ``folder/algorithm``, its
.json, .so, .c or .h, or a folder with one function; an unknown algorithm (CLI -a, API) lists
every valid one; the CLI help names every accepted ROBOT format."""
import numpy as np
import pytest

import casadi_delassus as cd
from casadi_delassus.errors import DelassusError
from casadi_delassus.registry import ALGORITHMS

from cli_runner import run_cli as run


@pytest.fixture(scope="module")
def generated(out_dir):
    return cd.generate("chain:n=4", None, "pv_osim", out_dir=out_dir)


def test_load_every_form(generated):
    stem = generated.so_path.with_suffix("")
    q = np.linspace(0.1, 0.4, 4)
    expected = generated(q)
    for form in (stem, str(stem), stem.with_suffix(".json"), stem.with_suffix(".so"), stem.with_suffix(".c"),
                 stem.with_suffix(".h")):
        assert np.array_equal(cd.load(form)(q), expected), form


def test_load_names_what_the_folder_holds(generated):
    folder = generated.so_path.parent
    with pytest.raises(DelassusError, match=r"no generated function at .*/navie .*holds pv_osim"):
        cd.load(folder / "navie")


def test_unknown_algorithm_lists_them_all(out_dir):
    with pytest.raises(DelassusError) as exc:
        cd.generate("chain:n=3", None, "pv_osm", out_dir=out_dir)
    msg = str(exc.value)
    assert "did you mean 'pv_osim'" in msg and all(a in msg for a in ALGORITHMS) and "auto" in msg
    r = run("count", "chain:n=3", "-a", "kjrr")
    assert r.returncode == 2 and all(a in r.stderr for a in ALGORITHMS)
    assert len(r.stderr.strip().splitlines()) == 1


def test_help_names_every_robot_format():
    for args in (["--help"], ["count", "--help"], ["generate", "--help"], ["check", "--help"], ["links", "--help"]):
        text = " ".join(run(*args).stdout.split())
        for words in ("registry name", ".urdf", ".xml with a <robot> root", ".sdf", "spatial_v2", ".json",
                      "MJCF", "<mujoco>", "mjcf extra", "chain:n=20"):
            assert words in text, (args, words)
