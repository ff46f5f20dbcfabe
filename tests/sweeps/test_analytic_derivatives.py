"""Analytical Jacobians of the dynamics (registry.Algorithm.derivative: rnea, aba, pv, ltl;
sweeps/rnea_derivatives.py, sweeps/dynamics_derivatives.py) against
- CasADi's AD of the traced value function, q-columns through the tangent map of Pinocchio's
  integrate (model/integrate.tangent_map_sx), to a rounding bound scaled by κ of the KKT matrix
  (conftest.rounding_tol);
- Pinocchio's computeRNEADerivatives, computeABADerivatives and
  computeConstraintDynamicsDerivatives (20 random points, 1e-8), where Pinocchio holds the
  contact acceleration at its reference while our k is an input: ours is compared as
  ∂/∂x + ∂/∂k · ∂k₀/∂x (verify/derivative_oracle.py), through codegen/derivatives.py's
  Jacobian (the analytical blocks);
- central finite differences on the manifold (pinocchio.integrate), as a sanity check;
and one compiled case.  The traced functions are evaluated numerically (no compiler) except there.
Run with ``-s`` to see the measured errors."""
import functools
import sys

import casadi as ca
import numpy as np
import pytest

from casadi_delassus.codegen.derivatives import trace_derivative
from casadi_delassus.codegen.trace import traced_outputs
from casadi_delassus.constraints import ConstraintSet
from casadi_delassus.errors import DelassusError
from casadi_delassus.model.integrate import tangent_map_sx
from casadi_delassus.registry import get_algorithm

from conftest import REPO, case, kappa_kkt, model_for, rounding_tol

sys.path.insert(0, str(REPO / "bench"))
import derivatives as bench  # noqa: E402  (compile_jacobian, stage_sets)

N_AD, N_PIN = 4, 20


def symbols(robot, cs, algo):
    """(q, {vector input: SX}, {K input: SX}, K_bodies) as codegen/trace.py makes them."""
    sym, _, K_bodies = traced_outputs(robot, cs, algo.name)
    return sym["q"], {n: sym[n] for n in algo.inputs}, {n: x for n, x in sym.items() if n.startswith("K_")}, K_bodies


@functools.lru_cache(maxsize=None)
def traced(algorithm, name, wrt=None):
    """(robot, constraints, ours, ad, names): ours and ad map (q, vector inputs, K inputs) to the
    Jacobians named d<output>_d<input>, ad by ca.jacobian of the value (q-columns tangent)."""
    robot, cs = case(name) if isinstance(name, str) else name
    algo = get_algorithm(algorithm)
    wrt = wrt or ("q", *algo.inputs)
    q, vectors, K_syms, K_bodies = symbols(robot, cs, algo)
    ins = [q, *vectors.values(), *K_syms.values()]
    ours = algo.derivative(robot, cs, q, K_bodies, wrt, **vectors)
    value = algo.fn(robot, cs, q, K_bodies, **vectors)
    x = {"q": q} | vectors
    names = list(ours)
    ad = []
    for n in names:
        out, by = n[1:].split("_d")
        J = ca.jacobian(value[out], x[by])
        ad.append(ca.mtimes(J, tangent_map_sx(robot, q)) if by == "q" else J)
    ins_names = ["q", *vectors, *K_syms]
    return (robot, cs, ca.Function("ours", ins, [ca.densify(ours[n]) for n in names], ins_names, names),
            ca.Function("ad", ins, ad, ins_names, names), names)


def random_inputs(robot, cs, f, rng):
    vals = {"q": robot.random_q(rng), "v": rng.normal(size=robot.nv), "tau": rng.normal(size=robot.nv),
            "a": rng.normal(size=robot.nv), "k": rng.normal(size=cs.m), "R": rng.uniform(0.1, 1.0, cs.m)} | \
        cs.random_inputs(rng)
    return [vals[n] for n in f.name_in()]


def relative(a, b):
    return float(np.abs(np.asarray(a) - np.asarray(b)).max() / max(1.0, np.abs(np.asarray(b)).max()))


AD_CASES = [("rnea", "tilted"), ("rnea", "kinova"), ("aba", "tilted"), ("aba", "go1-4F3"), ("aba", "kinova"),
            ("aba", "panda-EE6"), ("pv", "go1-4F3"), ("pv", "tilted-two-branches"), ("pv", "panda-finger-points"),
            ("pv", "chain-base"), ("ltl", "tilted-two-branches"), ("pv_soft", "tilted"), ("ltl_soft", "go1-4F3")]


@pytest.mark.parametrize("algorithm,name", AD_CASES)
def test_against_casadi_ad(algorithm, name):
    """Every Jacobian equals CasADi's AD of the value in tangent coordinates: free base, tilted
    axes, a prismatic and a continuous joint, runtime K, 3D and 6D rows, rows at the base, soft
    constraints (k and R columns too; "tilted" is redundant for the hard solvers)."""
    worst = ad_errors(algorithm, name)
    print(f"{algorithm} {name}: error / allowed " + ", ".join(f"{n} {e:.1e}" for n, e in worst.items()))
    assert max(worst.values()) <= 1


def ad_errors(algorithm, name, corrupt=lambda a: a):
    """{Jacobian: worst relative error against AD / rounding_tol(κ of the KKT matrix, M's without
    rows)} over N_AD samples; ``corrupt`` changes ours (the check that the bound can fail)."""
    robot, cs, ours, ad, names = traced(algorithm, name)
    rng = np.random.default_rng(11)
    worst = dict.fromkeys(names, 0.0)
    for _ in range(N_AD):
        args = random_inputs(robot, cs, ours, rng)
        x = dict(zip(ours.name_in(), args))
        K = {n: v for n, v in x.items() if n.startswith("K_")}
        tol = rounding_tol(kappa_kkt(robot, cs if "k" in x else None, x["q"], K, x.get("R")))
        for n, a, b in zip(names, ours(*args), ad(*args)):
            worst[n] = max(worst[n], relative(corrupt(np.array(a)), b) / tol)
    return worst


def test_scaled_bound_fails_a_wrong_jacobian():
    """The conditioning-scaled bound is no pass-all: pv on chain-base (κ of the KKT matrix up to
    1.1e6) with every Jacobian entry off by 1e-6 of its largest fails it."""
    worst = ad_errors("pv", "chain-base", lambda a: a + 1e-6 * np.abs(a).max())
    assert min(worst.values()) > 1


def test_unknown_wrt_is_refused():
    robot, cs = case("go1-4F3")
    q, vectors, _, K_bodies = symbols(robot, cs, get_algorithm("pv"))
    with pytest.raises(DelassusError, match="'R'"):
        get_algorithm("pv").derivative(robot, cs, q, K_bodies, ("q", "R"), **vectors)


# -- Pinocchio ------------------------------------------------------------------------------------
pin = pytest.importorskip("pinocchio")
from casadi_delassus.verify import pinocchio_oracle as oracle  # noqa: E402
from casadi_delassus.verify.derivative_oracle import ORACLE_WRT, pinocchio_errors  # noqa: E402
from casadi_delassus.verify.derivatives import evaluate  # noqa: E402


@functools.lru_cache(maxsize=None)
def pin_case(name, scenario):
    robot = model_for(name)
    model = oracle.model_for(robot)
    return robot, ConstraintSet.parse(robot, robot.scenarios[scenario]), model


@pytest.mark.parametrize("name,scenario,algorithm", [("go1", "4F3", "aba"), ("go1", "4F3", "rnea"), ("panda", "EE6", "aba"),
                                                     ("panda", "EE6", "rnea"), ("go1", "4F3", "pv"), ("go1", "4F3", "pv_early"),
                                                     ("go1", "4F3", "ltl")])
def test_against_pinocchio(name, scenario, algorithm):
    """20 random (q, v, τ): rnea and aba against computeRNEADerivatives / computeABADerivatives
    (floating and fixed base), pv and ltl (3D feet) against computeConstraintDynamicsDerivatives
    (verify/derivative_oracle.py: ours chained through ∂k₀/∂(q, v)).  talos 2F (6D soles)
    and panda EE6 (fixed base, 6D) constrained: ``bench/derivative_accuracy.py --pinocchio``."""
    robot, cs, _ = pin_case(name, scenario)
    jacobian = trace_derivative(robot, cs, algorithm, "jacobian", ORACLE_WRT[algorithm])[0]
    worst, k_err = pinocchio_errors(lambda x: evaluate(jacobian, x), robot, cs, algorithm, N_PIN)
    print(f"{algorithm} {name} {scenario} vs Pinocchio: k₀ {k_err:.1e}, " + ", ".join(f"{n} {e:.1e}" for n, e in worst.items()))
    assert k_err <= 1e-12
    assert max(worst.values()) <= 1e-8


def test_finite_differences_on_the_manifold():
    """pv on go1 4F3: central differences of the value along q ⊕ h e_i (pinocchio.integrate),
    v + h e_i, τ + h e_i agree with the analytical Jacobian (a sanity check of the tangent map)."""
    robot, cs, model = pin_case("go1", "4F3")
    _, _, ours, _, names = traced("pv", (robot, cs), ("q", "v", "tau", "k"))
    algo = get_algorithm("pv")
    q, vectors, _, K_bodies = symbols(robot, cs, algo)
    out = algo.fn(robot, cs, q, K_bodies, **vectors)
    value = ca.Function("pv", [q, *vectors.values()], [ca.vertcat(out["vdot"], out["lam"])])
    rng = np.random.default_rng(9)
    x = random_inputs(robot, cs, ours, rng)
    J = dict(zip(names, (np.array(a) for a in ours(*x))))
    h, worst = 1e-6, 0.0
    for which, size in (("q", robot.nv), ("v", robot.nv), ("tau", robot.nv), ("k", cs.m)):
        col = []
        for i in range(size):
            e = np.zeros(size)
            e[i] = h
            plus, minus = list(x), list(x)
            if which == "q":
                plus[0], minus[0] = pin.integrate(model, x[0], e), pin.integrate(model, x[0], -e)
            else:
                k = 1 + ("v", "tau", "k").index(which)
                plus[k], minus[k] = x[k] + e, x[k] - e
            col.append((np.array(value(*plus)) - np.array(value(*minus))).ravel() / (2 * h))
        fd = np.array(col).T
        worst = max(worst, relative(np.vstack([J[f"dvdot_d{which}"], J[f"dlam_d{which}"]]), fd))
    print(f"pv go1 4F3 vs central differences: {worst:.1e}")
    assert worst <= 1e-6


def test_compiled(out_dir):
    """One small Jacobian compiled (bench/derivatives.compile_jacobian: cd.generate, or codegen/build.py's pieces),
    whole and split into a shared stage and one per input (codegen/staging.split_outputs), and
    loaded: the C agrees with the traced function (-O0: what is checked is the code, not its speed)."""
    from casadi_delassus import load_robot
    robot = load_robot("chain:n=2,floating=1")
    cs = ConstraintSet.parse(robot, ["link2:3d"])
    _, _, ours, _, names = traced("pv", (robot, cs), bench.WRT["pv"])
    x = dict(zip(ours.name_in(), random_inputs(robot, cs, ours, np.random.default_rng(1))))
    ref = {n: np.array(r) for n, r in ours(**x).items()}
    for split_above, scenario in ((None, "whole"), (0, "split")):
        stages = bench.compile_jacobian(robot, cs, scenario, "pv", bench.WRT["pv"], out_dir=out_dir, cflags=("-O0",),
                                        **({} if split_above is None else {"split_above": split_above}))
        assert len(stages) == (1 if split_above is None else 1 + len(bench.WRT["pv"]))
        got = {}
        for (_, f), xs in zip(stages, bench.stage_sets(stages, [x])):
            got |= f.outputs(**{n: xs[0][n] for n in f.input_names})
        for n in names:
            assert relative(got[n], ref[n]) <= 1e-12
