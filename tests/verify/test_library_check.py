"""verify/library_check.py: every mode of a built contact-mode library against the NumPy reference and the directly
generated function.  A right library passes in every mode (tests/contact_modes/test_library.py checks go1's 16 modes);
here, on a 3-link chain with two point contacts (4 modes), one mode's output made wrong by 1e-6 fails that mode alone,
against both comparisons, and a wrong shape fails it too."""
import dataclasses

import numpy as np
import pytest

from casadi_delassus import load_robot
from casadi_delassus.contact_modes import library
from casadi_delassus.verify.library_check import check_library

SPECS = ["link3:3d", "link2:3d"]


@pytest.fixture(scope="module")
def chain_lib(tmp_path_factory):
    return library("chain:n=3", SPECS, "auto", out_dir=tmp_path_factory.mktemp("lib"), jobs=1, quiet=True)


@dataclasses.dataclass
class Damaged:
    """The library with mode ``mask``'s Delassus output changed by ``change`` (a function of the right one)."""
    lib: object
    mask: int
    change: object

    def __getattr__(self, name):
        return getattr(self.lib, name)

    def outputs(self, mode, *args, **kwargs):
        out = self.lib.outputs(mode, *args, **kwargs)
        return {**out, "delassus": self.change(out["delassus"])} if mode == self.mask else out


def test_a_right_library_passes_every_mode(chain_lib):
    checks = check_library(chain_lib, load_robot("chain:n=3"), samples=10)
    assert [c.mask for c in checks] == [0, 1, 2, 3] and all(c.passed for c in checks)
    assert all(set(c.reference) == set(c.direct) == {"delassus"} for c in checks[1:])


def test_a_wrong_mode_fails_alone(chain_lib):
    wrong = Damaged(chain_lib, 0b11, lambda D: D + 1e-6 * np.abs(D).max())
    checks = check_library(wrong, load_robot("chain:n=3"), samples=10)
    assert [c.passed for c in checks] == [True, True, True, False]
    assert checks[3].worst("reference") > 1e-8 and checks[3].worst("direct") > 1e-8


def test_a_wrong_shape_fails(chain_lib):
    checks = check_library(Damaged(chain_lib, 0b01, lambda D: D[:2]), load_robot("chain:n=3"), samples=3,
                           direct=False)
    assert [c.passed for c in checks] == [True, False, True, True] and not checks[1].shapes_ok
