"""codegen/target.py: the compile target resolved and its combinations refused in one place."""
import pytest

from casadi_delassus.codegen.target import Target, refuse, resolve
from casadi_delassus.errors import DelassusError, InputError


def test_resolve_checks_each_part():
    assert resolve() == Target("c", "double", "soa") and resolve("cuda", "single", "aos").layout == "aos"
    for bad in (dict(target="opencl"), dict(precision="half"), dict(layout="csr")):
        with pytest.raises(DelassusError):
            resolve(**bad)


@pytest.mark.parametrize("t, combined, words", [
    (Target("c", "single"), dict(package=True), "not with --package or --stages"),
    (Target("c", "single"), dict(stages=True), "not with --package or --stages"),
    (Target("c", "single"), dict(derivatives=True), "not with --precision single"),
    (Target("cuda"), dict(derivatives=True), "not with --target cuda"),
])
def test_refused_combinations(t, combined, words):
    with pytest.raises(InputError, match=words):
        refuse(t, **combined)
    assert refuse(Target(), **combined) == Target()         # double C takes every one
