"""symbolic/probe.py: the one trace-time probe evaluates at seeded random inputs (the same
robot and constraints always give the same values, so the same code), sees a runtime K input's
symbols once each, and tells a structural zero from a value by a wide margin around ZERO."""
import casadi as ca
import numpy as np

from casadi_delassus.symbolic.probe import SEED, ZERO, Probe

from conftest import case


def test_values_are_seeded_and_samples_extend_the_first():
    robot, cs = case("chain3")
    q = ca.SX.sym("q", robot.nq)
    expected = robot.random_q(np.random.default_rng(SEED))
    np.testing.assert_array_equal(Probe(robot, q, cs.K_body())([q[0], q[2]]), expected[[0, 2]])
    three = Probe(robot, q, cs.K_body(), samples=3).at_samples([q[1]])
    assert three.shape == (3, 1) and three[0, 0] == expected[1] and len(set(three[:, 0])) == 3


def test_runtime_K_symbols_are_inputs_once_each():
    robot, _ = case("chain3")
    q, K = ca.SX.sym("q", robot.nq), ca.SX.sym("K", 3, 6)
    probe = Probe(robot, q, [K, K[:2, :], ca.sin(q[0]) * ca.SX.eye(6)])
    assert len(probe.syms) == 18
    assert np.isfinite(probe([K[0, 0] * q[1]])).all()


def test_a_structural_zero_probes_far_below_ZERO():
    """What cancels only in value (sin² + cos² − 1, a rotation applied and undone) probes as
    rounding; a generic expression far above."""
    robot, cs = case("tilted-small")
    q = ca.SX.sym("q", robot.nq)
    zero, generic = Probe(robot, q, cs.K_body())([ca.sin(q[7]) ** 2 + ca.cos(q[7]) ** 2 - 1, ca.sin(q[7]) * q[8]])
    assert abs(zero) < 1e-3 * ZERO < abs(generic)


def test_a_numeric_q_leaves_only_the_runtime_K():
    robot, _ = case("chain3")
    K = ca.SX.sym("K", 3, 6)
    probe = Probe(robot, np.zeros(robot.nq), [K])
    assert probe.q == [] and probe([K[0, 0] + 1.0]).shape == (1,)
