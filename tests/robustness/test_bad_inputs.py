"""Specs and numbers from users (issue 11, "Bad input"): non-string specs in the Python API,
and complex, datetime, object, NaN/inf or unnormalised q and K given to a compiled function.
Each is one InputError/ConstraintError line naming the input."""
import datetime

import numpy as np
import pytest

import casadi_delassus as cd
from casadi_delassus.api import constraint_set
from casadi_delassus.runtime.inputs import UNIT_TOL, as_input
from casadi_delassus.constraints import ConstraintSet, parse_constraint
from casadi_delassus.errors import ConstraintError, InputError

from conftest import model_for, rounding_tol


def one_line(exc_info, *words):
    msg = str(exc_info.value)
    assert msg.strip() and "\n" not in msg, msg
    for w in words:
        assert w in msg, msg


# -- specs -----------------------------------------------------------------------------------
NON_STRING_SPECS = {"int": 5, "None": None, "float": 1.5, "bytes": b"FL_foot:3d", "dict": {"FL_foot": "3d"}}
NON_STRING_ITEMS = {"list of lists": [["FL_foot:3d"]], "list with an int": ["FL_foot:3d", 3],
                    "list of bytes": [b"FL_foot:3d"], "list with None": [None]}


@pytest.fixture(scope="module")
def go1():
    return model_for("go1")


@pytest.mark.parametrize("name", list(NON_STRING_SPECS))
def test_non_string_constraints_in_the_python_api(go1, name):
    with pytest.raises(ConstraintError) as err:
        constraint_set(go1, NON_STRING_SPECS[name])
    one_line(err, "constraints must be a spec string")


@pytest.mark.parametrize("name", list(NON_STRING_ITEMS))
def test_non_string_spec_items_in_the_python_api(go1, name):
    for call in (lambda: constraint_set(go1, NON_STRING_ITEMS[name]),
                 lambda: ConstraintSet.parse(go1, NON_STRING_ITEMS[name])):
        with pytest.raises(ConstraintError) as err:
            call()
        one_line(err, "bad constraint spec", "expected a string")


def test_parse_constraint_rejects_non_strings(go1):
    with pytest.raises(ConstraintError) as err:
        parse_constraint(go1, 42)
    one_line(err, "bad constraint spec 42", "got int")


def test_generate_rejects_non_string_specs_before_tracing(go1, out_dir):
    with pytest.raises(ConstraintError):
        cd.generate(go1, [["FL_foot:3d"]], "pv_osimr", out_dir=out_dir)


def test_a_tuple_of_specs_is_fine(go1):
    assert constraint_set(go1, ("FL_foot:3d", "FR_foot:3d"))[0].m == 6


# -- numbers ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def go1_fn(out_dir):
    """Go1 with a runtime K on one foot (one compile, cached for the session)."""
    return cd.generate("go1", ["FL_foot:3d-input", "FR_foot:3d", "RL_foot:3d", "RR_foot:3d"], "pv_osimr",
                       out_dir=out_dir)


@pytest.fixture(scope="module")
def q0(go1):
    return go1.random_q(np.random.default_rng(0))


K = np.hstack([np.eye(3), np.zeros((3, 3))])

BAD_Q = {
    "complex": lambda q: q.astype(complex),
    "complex list": lambda q: [complex(x) for x in q],
    "datetime": lambda q: np.array([datetime.datetime(2024, 1, 1)] * q.size),
    "datetime64": lambda q: np.array(["2024-01-01"] * q.size, dtype="datetime64[D]"),
    "object": lambda q: np.array([object()] * q.size),
    "strings": lambda q: [str(x) for x in q],
    "ragged": lambda q: [q[:3], q[3:]],
    "NaN": lambda q: np.r_[q[:8], np.nan, q[9:]],
    "inf": lambda q: np.r_[np.inf, q[1:]],
    "-inf": lambda q: np.r_[q[:-1], -np.inf],
    "too short": lambda q: q[:-1],
}
WORDS = {"complex": "complex", "complex list": "complex", "datetime": "real numbers", "datetime64": "real numbers",
         "object": "real numbers", "strings": "real numbers", "ragged": "not an array of numbers",
         "NaN": "non-finite", "inf": "non-finite", "-inf": "non-finite", "too short": "nq = 19"}


@pytest.mark.parametrize("name", list(BAD_Q))
def test_bad_q(go1_fn, q0, name):
    with pytest.raises(InputError) as err:
        go1_fn(BAD_Q[name](q0), K_FL_foot=K)
    one_line(err, WORDS[name])


@pytest.mark.parametrize("value, words", [
    (np.full((3, 6), np.nan), "non-finite"), (np.where(K == 1, np.inf, 0.0), "non-finite"),
    (K.astype(complex), "complex"), (K[:2], "shape (2, 6), expected (3, 6)"),
], ids=["NaN", "inf", "complex", "shape"])
def test_bad_runtime_K(go1_fn, q0, value, words):
    with pytest.raises(InputError) as err:
        go1_fn(q0, K_FL_foot=value)
    one_line(err, "K_FL_foot", words)


@pytest.mark.parametrize("scale", [3.0, 0.5, 0.0])
def test_unnormalised_base_quaternion_is_refused(go1_fn, q0, scale):
    """Scaled by 3, the quaternion scaled every rotation entry by 9 (dynamics outputs by 32)."""
    q = q0.copy()
    q[3:7] *= scale
    with pytest.raises(InputError) as err:
        go1_fn(q, K_FL_foot=K)
    one_line(err, "q[3:7]", "quaternion", "'root_joint'", "normalise it")


def test_nearly_unit_quaternion_is_normalised(go1_fn, q0):
    q = q0.copy()
    q[3:7] *= 1 + 0.5 * UNIT_TOL
    given = q.copy()
    D, D0 = go1_fn(q, K_FL_foot=K), go1_fn(q0, K_FL_foot=K)
    assert np.abs(D - D0).max() <= 1e-14 * np.abs(D0).max()
    assert np.array_equal(q, given)                        # the caller's array is left as it was


def test_integer_and_list_inputs_are_fine(go1_fn, q0):
    assert np.allclose(go1_fn(list(q0), K_FL_foot=K.astype(int).tolist()), go1_fn(q0, K_FL_foot=K))


CONTINUOUS = {"nq": 4, "robot": "wheel", "q_layout": [
    {"joint": "hinge", "kind": "revolute", "q_index": 0, "nq": 1},
    {"joint": "wheel", "kind": "continuous", "q_index": 1, "nq": 2},
    {"joint": "slide", "kind": "prismatic", "q_index": 3, "nq": 1}]}


def test_continuous_joint_cos_sin_pair():
    spec = {"name": "q", "shape": [4]}
    q = as_input(spec, [0.3, 0.6, 0.8 * (1 + 1e-7), 2.0], CONTINUOUS)
    assert abs(np.hypot(q[1], q[2]) - 1.0) <= rounding_tol(1.0) and q[0] == 0.3 and q[3] == 2.0   # 1e-7 off before
    with pytest.raises(InputError) as err:
        as_input(spec, [0.3, 1.0, 1.0, 2.0], CONTINUOUS)
    one_line(err, "q[1:3]", "(cos, sin) pair of joint 'wheel'")


@pytest.mark.parametrize("R", [[1.0, 0.0], [1.0, -2.0]])
def test_non_positive_weights(R):
    with pytest.raises(InputError) as err:
        as_input({"name": "R", "shape": [2]}, R, {"nq": 1, "robot": "r", "q_layout": []})
    one_line(err, "input R must be positive")
