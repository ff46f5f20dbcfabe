"""Derivatives (codegen/derivatives.py): JVPs, VJPs and Jacobians against fourth-order central
finite differences of the value function on the manifold (verify/derivatives.py, ≤ 1e-6
relative), JVP/VJP pairs against each other (dot-product test, ≤ 1e-12), over traced functions
(CasADi's evaluation, no compiling) for every algorithm where it accepts the scenario; a few
compiled on go1 (manifest, names, cache, cd.load, the CLI); the tangent-space wrapper; CasADi's
own derivative functions in a .so for casadi.external; cd.casadi_function inside an Opti
problem.  The sweep over 20 points of talos 2F is bench/derivative_accuracy.py."""
import functools
import json
import re

import casadi as ca
import numpy as np
import pytest

import casadi_delassus as cd
from casadi_delassus.cli import main
from casadi_delassus.runtime import artifact
from casadi_delassus.codegen.derivatives import trace_derivative
from casadi_delassus.codegen.trace import trace
from casadi_delassus.errors import DelassusError
from casadi_delassus.opcount import count_ops
from casadi_delassus.verify.derivatives import (DOT_TOL, PIVOT_MIN, Checkable, compare_derivative, compare_derivatives,
                                                conditioning, dot_errors, dot_products, dot_test, evaluate, points)

from conftest import case, rounding_tol

@functools.lru_cache(maxsize=None)
def traced(case_name, algorithm, mode, wrt=None):
    robot, cs = case(case_name)
    return Checkable.traced(trace_derivative(robot, cs, algorithm, mode, wrt))


@functools.lru_cache(maxsize=None)
def value(case_name, algorithm):
    robot, cs = case(case_name)
    return trace(robot, cs, algorithm)[0]


def assert_agrees(case_name, algorithm, mode, samples, wrt=None):
    robot, cs = case(case_name)
    results = compare_derivative(traced(case_name, algorithm, mode, wrt), value(case_name, algorithm), robot, cs, samples)
    worst = {k: c.error for k, c in results.items()}
    print(f"{case_name} {algorithm} {mode}: worst relative error against FD {max(worst.values()):.1e}")
    assert all(c.passed for c in results.values()), worst


def assert_dot(case_name, algorithm, samples=20):
    robot, cs = case(case_name)
    err = dot_test(traced(case_name, algorithm, "jvp"), traced(case_name, algorithm, "vjp"), robot, cs, samples,
                   value=value(case_name, algorithm))
    print(f"{case_name} {algorithm}: dot-product test {err:.1e}")
    assert err <= DOT_TOL


# -- traced: a choice of algorithms on go1 4F3, the ladder, Cassie's loops, a tilted model ---------
# (every algorithm on go1, talos 2F, the ladder and Cassie's loops over 20 points: bench/derivative_accuracy.py)
CASES = [("go1-4F3", a) for a in ("pv", "pv_early", "pv_soft", "ltl_soft", "aba", "rnea", "pv_osimr", "efpa",
                                  "delassus_apply", "damped_inverse_apply")]
# the ladder's closed loops (m = nv) at the size that traces fast; the 4-rung ladder under make test-all
CASES += [(name, a) for a in ("pv", "pv_early", "kjr") for name in ("ladder-small", "ladder")]
CASES += [("cassie-loops", "ltl_osim"), ("cassie-loops", "damped_inverse_apply"),
          ("tilted-two-branches", "pv"), ("tilted", "naive")]       # tilted: a continuous joint, a runtime K


def slow_if(big, params):
    """``params`` (case names, or tuples of arguments led by one) with those of the cases in ``big`` marked slow."""
    def param(p):
        args = (p,) if isinstance(p, str) else p
        return pytest.param(*args, marks=pytest.mark.slow) if args[0] in big else p
    return [param(p) for p in params]


@pytest.mark.parametrize("case_name, algorithm", slow_if({"ladder"}, CASES))
def test_jvp_vjp_against_finite_differences_and_each_other(case_name, algorithm):
    assert_agrees(case_name, algorithm, "jvp", 2)
    assert_agrees(case_name, algorithm, "vjp", 2)
    assert_dot(case_name, algorithm)


@pytest.mark.parametrize("case_name, algorithm", [("go1-4F3", "pv"), ("go1-4F3", "ltl"), ("go1-4F3", "aba"),
                                                  ("go1-4F3", "damped_inverse_apply"), ("cassie-loops", "delassus_apply"),
                                                  pytest.param("ladder", "pv", marks=pytest.mark.slow),
                                                  pytest.param("ladder", "pv_early", marks=pytest.mark.slow),
                                                  ("tilted-two-branches", "pv")])
def test_jacobian_against_finite_differences(case_name, algorithm):
    assert_agrees(case_name, algorithm, "jacobian", 1)


@pytest.mark.parametrize("case_name", slow_if({"ladder"}, ["go1-4F3", "ladder-small", "ladder",
                                                           "tilted-two-branches"]))
def test_kkt_residual_and_solve(case_name):
    """The implicit-function theorem's parts (codegen/derivatives._Implicit): the KKT residual
    (sweeps/dynamics_derivatives.kkt_residual) vanishes at pv_early's solution, its Jacobian in
    (v̇, λ) is [[M, −Jᵀ], [J, 0]] with M and J from the NumPy reference, and pv_early's
    kkt_solve inverts it."""
    from casadi_delassus.codegen.trace import traced_outputs
    from casadi_delassus.dynamics.pv_early import kkt_solve
    from casadi_delassus.sweeps.dynamics_derivatives import kkt_residual
    from casadi_delassus.sweeps.tree import Tree
    from casadi_delassus.verify import reference as ref
    robot, cs = case(case_name)
    s, out, K_bodies = traced_outputs(robot, cs, "pv_early")
    y = ca.SX.sym("vdot", robot.nv), ca.SX.sym("lam", cs.m)
    r = kkt_residual(Tree(robot, cs, s["q"], K_bodies), s["v"], s["tau"], s["k"], *y)
    b = ca.SX.sym("b", robot.nv + cs.m)
    solved = ca.vertcat(*kkt_solve(robot, cs, s["q"], K_bodies, b[:robot.nv], b[robot.nv:]))
    f = ca.Function("f", [*s.values(), *y], [ca.substitute(r, ca.vertcat(*y), ca.vertcat(out["vdot"], out["lam"])),
                                            out["vdot"], ca.jacobian(r, ca.vertcat(*y)), ca.jacobian(solved, b)],
                    [*s, "y_v", "y_l"], ["r", "vdot", "kkt", "inverse"])
    rng = np.random.default_rng(3)
    for x in points(traced(case_name, "pv_early", "jvp"), value(case_name, "pv_early"), robot, cs, 3, rng, []):
        x = {n: x[n] for n in s}
        got = evaluate(f, x | {"y_v": np.zeros(robot.nv), "y_l": np.zeros(cs.m)})
        K_inputs = {n: x[n] for n in x if n.startswith("K_")}
        M, J = ref.mass_matrix(robot, x["q"]), ref.constraint_jacobian(robot, cs, x["q"], K_inputs)
        kkt = np.block([[M, -J.T], [J, np.zeros((cs.m, cs.m))]])
        tol = rounding_tol(np.linalg.cond(kkt))     # κ 1.7e3 .. 3.4e6 over these samples
        assert np.abs(got["r"]).max() <= tol * max(1.0, np.abs(got["vdot"]).max())
        assert np.abs(got["kkt"] - kkt).max() <= 1e-10 * np.abs(kkt).max()
        assert np.abs(got["inverse"] @ kkt - np.eye(len(kkt))).max() <= tol


def test_pv_early_derivatives_go_through_the_kkt_solve():
    """pv_early's JVP and VJP take the implicit-function theorem with pv's elimination order
    ("implicit"); AD through its own order (method "ad") is not the JVP's transpose to rounding
    at points its small pivots reach: on the ladder (seed 1) the dot test fails there and holds
    on the implicit pair.  Redundant rows (pv refuses them, pv_early drops some) and MuJoCo's
    free-joint velocities keep AD."""
    robot, cs = case("ladder")          # not ladder-small: AD's pair holds the dot test there
    value_fn = value("ladder", "pv_early")
    pair = {"auto": {mode: traced("ladder", "pv_early", mode) for mode in ("jvp", "vjp")},
            "ad": {mode: Checkable.traced(trace_derivative(robot, cs, "pv_early", mode, method="ad"))
                   for mode in ("jvp", "vjp")}}
    assert set(pair["auto"]["jvp"].record["method"].values()) == {"implicit"}
    errors = {m: dot_errors(dot_products(p["jvp"], p["vjp"], robot, cs, 60, seed=1, value=value_fn))[1] for m, p in pair.items()}
    print(f"ladder pv_early, 60 points: dot test (rounding scale) implicit {errors['auto']:.1e}, AD {errors['ad']:.1e}")
    assert errors["auto"] <= DOT_TOL < errors["ad"]
    for name in ("tilted", "mjcf-creature"):
        assert set(traced(name, "pv_early", "vjp").record["method"].values()) == {"ad"}


# ball-chain repeats mjcf-creature's ball joints; tilted-world takes go1-world's mixed world and local rows at nv = 13
@pytest.mark.parametrize("case_name", slow_if({"ball-chain", "go1-world"}, ["ball-chain", "mjcf-creature",
                                                                            "go1-world", "tilted-world"]))
def test_ball_joints_mujoco_conventions_and_world_rows(case_name):
    """Where the analytical derivatives do not apply (ball joints, MuJoCo's free-joint
    velocities, world-aligned rows: codegen/derivatives.analytic_unfit), "auto" takes forward
    mode; the Jacobians and JVP/VJP pairs agree with finite differences on the manifold."""
    from casadi_delassus.codegen.derivatives import analytic_unfit
    assert analytic_unfit(*case(case_name))
    for algorithm in ("pv", "aba"):
        assert_agrees(case_name, algorithm, "jacobian", 1)
    assert_agrees(case_name, "pv", "jvp", 1)
    assert_agrees(case_name, "pv", "vjp", 1)
    assert_dot(case_name, "pv", samples=3)


def test_runtime_K_and_subsets_of_inputs():
    """K_<link> inputs are differentiated entry by entry; a subset keeps the function's order."""
    assert_agrees("tilted-two-branches", "pv", "jacobian", 2, wrt=("K_t5", "q"))
    assert traced("tilted-two-branches", "pv", "jacobian", ("K_t5", "q")).record["wrt"] == ["q", "K_t5"]
    assert_agrees("tilted", "damped_inverse_apply", "vjp", 2, wrt=("R", "K_t5"))


def test_the_tangent_space_is_pinocchios():
    """d v̇ / d q columns are derivatives along q ⊕ ε e_j: the free base's angular columns turn
    the base in its own frame, so they differ from the stored quaternion's partial derivatives,
    and match pinocchio.integrate's finite differences."""
    pin = pytest.importorskip("pinocchio")
    from casadi_delassus.verify.pinocchio_oracle import model_for
    robot, cs = case("go1-4F3")
    model = model_for(robot)
    data = model.createData()
    rng = np.random.default_rng(0)
    x = {"q": robot.random_q(rng), "v": rng.normal(size=18), "tau": rng.normal(size=18)}
    jac = evaluate(traced("go1-4F3", "aba", "jacobian", ("q",)).function, x)["dvdot_dq"]
    h = 1e-5
    fd = np.column_stack([(pin.aba(model, data, pin.integrate(model, x["q"], h * e), x["v"], x["tau"])
                           - pin.aba(model, data, pin.integrate(model, x["q"], -h * e), x["v"], x["tau"])) / (2 * h)
                          for e in np.eye(robot.nv)])
    assert np.abs(jac - fd).max() / np.abs(fd).max() < 1e-7


def test_analytic_blocks_are_used_and_checked(monkeypatch):
    """An algorithm's analytical Jacobian blocks replace CasADi's (here: its own AD, scaled by
    2 to be seen); a block it leaves out is differentiated by CasADi; a block of the wrong
    shape is an error naming it."""
    import dataclasses
    from casadi_delassus import registry
    robot, cs = case("go1-4F3")
    ad = trace_derivative(robot, cs, "aba", "jacobian", ("q", "tau"))[0]

    def derivative(robot, constraints, q, K_bodies, wrt, v, tau):
        out = registry.ALGORITHMS["aba"].fn(robot, constraints, q, K_bodies, v=v, tau=tau)["vdot"]
        return {"dvdot_dtau": 2 * ca.jacobian(out, tau)}
    monkeypatch.setitem(registry.ALGORITHMS, "aba", dataclasses.replace(registry.ALGORITHMS["aba"], derivative=derivative))
    f, _, _, record = trace_derivative(robot, cs, "aba", "jacobian", ("q", "tau"))
    assert record["method"] == {"q": "ad", "tau": "analytic"}
    x = {"q": robot.random_q(np.random.default_rng(1)), "v": np.ones(18), "tau": np.ones(18)}
    mine, theirs = evaluate(f, x), evaluate(ad, x)
    assert np.allclose(mine["dvdot_dtau"], 2 * theirs["dvdot_dtau"]) and np.allclose(mine["dvdot_dq"], theirs["dvdot_dq"])
    assert trace_derivative(robot, cs, "aba", "jacobian", ("tau",), method="ad")[3]["method"] == {"tau": "ad"}
    monkeypatch.setitem(registry.ALGORITHMS, "aba", dataclasses.replace(
        registry.ALGORITHMS["aba"], derivative=lambda *a, **k: {"dvdot_dtau": ca.SX(3, 3)}))
    with pytest.raises(DelassusError, match="analytical dvdot_dtau is 3 x 3, expected 18 x 18"):
        trace_derivative(robot, cs, "aba", "jacobian", ("tau",))
    with pytest.raises(DelassusError, match="has no analytical derivatives"):
        trace_derivative(robot, cs, "naive", "jacobian", method="analytic")


def test_bad_requests():
    robot, cs = case("go1-4F3")
    with pytest.raises(DelassusError, match="unknown input.*'x'.*takes q, v, tau"):
        trace_derivative(robot, cs, "aba", "jvp", "q,x")
    with pytest.raises(DelassusError, match="unknown derivative 'hessian'"):
        trace_derivative(robot, cs, "aba", "hessian")
    with pytest.raises(DelassusError, match="do not combine"):
        cd.generate(robot, "4F3", "pv_osim", osim=True, derivative="jvp")


def test_names_are_injective():
    """Stems and C names of derivatives say which inputs; names with "_" (K_<link>) get a hash."""
    inputs = ["q", "v", "tau", "K_a", "K_a_k", "k"]
    parts = {artifact.wrt_part(w, inputs) for w in (["q"], ["q", "v"], ["K_a", "k"], ["K_a_k"], inputs)}
    assert len(parts) == 5 and None in parts and "q_v" in parts
    rec = {"mode": "jacobian", "wrt": ["q", "v"], "inputs": inputs}
    assert artifact.stem("pv", derivative=rec) == "pv-jacobian-q_v"
    assert artifact.function_name("go1", "4F3", "pv", derivative=rec) == "cd_go1_4F3_pv_jacobian_q_v"
    assert artifact.stem("pv", derivative=dict(rec, mode="jvp", wrt=inputs)) == "pv-jvp"


# -- compiled (go1) ----------------------------------------------------------------------------------
def test_compiled_derivatives(out_dir, capsys):
    robot, cs = case("go1-4F3")
    value_f = cd.generate(robot, "4F3", "rnea", out_dir=out_dir)
    made = {}
    for mode in ("jvp", "vjp", "jacobian"):
        f = cd.generate(robot, "4F3", "rnea", out_dir=out_dir, derivative=mode, wrt=("q", "v") if mode == "jacobian" else None)
        made[mode] = Checkable.compiled(f)
        m = f.manifest
        assert m["derivative"]["mode"] == mode and m["derivative"]["tangent"].startswith("q derivatives are in the tangent")
        results = compare_derivative(made[mode], value_f, robot, cs, samples=3)
        assert all(c.passed for c in results.values()), {k: c.error for k, c in results.items()}
        assert cd.load(f.manifest_path).op_count == f.op_count
    assert made["jacobian"].function.so_path.name == "rnea-jacobian-q_v.so"
    assert [o["name"] for o in made["jacobian"].function.manifest["outputs"]] == ["dtau_dq", "dtau_dv"]
    assert [i["name"] for i in made["vjp"].inputs] == ["q", "v", "a", "tau_bar"]
    assert dot_test(made["jvp"], made["vjp"], robot, cs) <= DOT_TOL
    # cached: the same request again compiles nothing; another wrt is another function
    before = made["jvp"].function.so_path.stat().st_mtime_ns
    cd.generate(robot, "4F3", "rnea", out_dir=out_dir, derivative="jvp")
    assert made["jvp"].function.so_path.stat().st_mtime_ns == before
    # the CLI checks the same functions (cached) and prints the rule's numbers
    assert main(["check", "go1", "-s", "4F3", "-a", "rnea", "--derivative", "jvp", "--derivative", "vjp",
                 "--samples", "2", "-o", str(out_dir)]) is None
    out = capsys.readouterr().out
    assert "jvp" in out and "vjp" in out and "ok" in out and "FAIL" not in out
    assert "dot test (rounding scale)" in out and re.search(r"\de-\d\d \(\d\.\de-\d\d\)", out)


def test_check_compares_jacobians_with_pinocchio(out_dir, capsys):
    """check --derivative jacobian: a dynamics Jacobian is also compared with Pinocchio's
    derivatives (verify/derivative_oracle.py); the value column shows the worst error."""
    pytest.importorskip("pinocchio")
    case("panda-EE6")       # skips without example-robot-data
    assert main(["check", "panda", "-s", "EE6", "-a", "rnea", "--derivative", "jacobian", "--samples", "2",
                 "-o", str(out_dir)]) is None
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("panda "))   # not the base line "panda: …"
    assert row.split()[-2] == "ok" and float(row.split()[-3]) <= 1e-8


def test_cli_errors_are_one_line(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["count", "go1", "-s", "4F3", "-a", "aba", "--derivative", "jvp", "--wrt", "q,k"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "unknown input(s) 'k'" in err


def test_count_reports_the_ratio_to_the_value(capsys):
    main(["count", "go1", "-s", "4F3", "-a", "rnea", "--derivative", "vjp", "--format", "json"])
    record = json.loads(capsys.readouterr().out)["algorithms"]["rnea"]
    vjp = record["derivatives"]["vjp"]
    assert vjp["wrt"] == ["q", "v", "a"] and vjp["times_value"] == round(vjp["instructions"] / record["instructions"], 2)
    assert vjp["times_value"] < 3



def test_pv_osim_fast_points_where_the_lemma_cancels_are_redrawn():
    """pv_osim_fast's Λ = Λ_b − Λ_b K_b S⁻¹ K_bᵀ Λ_b (eq. 55) cancels digits where a branch
    block of L_b^A is nearly singular: among go1's first 20 random points, one with a folded
    knee (λmin(L_b^A) / λmin(Λ⁻¹) = 1.1e-8) put osim's JVP 2e-4 off the differences.  Such
    points (conditioning < PIVOT_MIN) are redrawn and counted; the others pass."""
    robot, cs = case("go1-4F3")
    skipped = []
    for results in compare_derivatives([traced("go1-4F3", "pv_osim_fast", m) for m in ("jvp", "vjp")],
                                       value("go1-4F3", "pv_osim_fast"), robot, cs, 20, skipped=skipped):
        assert all(c.passed for c in results.values()), {k: c.error for k, c in results.items()}
    assert len(skipped) == 2 and min(skipped) < 1e-7 and max(skipped) < PIVOT_MIN
    y = evaluate(value("go1-4F3", "pv_osim_fast"), traced("go1-4F3", "pv_osim_fast", "jvp").point(robot, cs, np.random.default_rng(0)))
    packed = y["Lb_ldl"]
    L = np.tril(packed, -1) + np.eye(len(packed))
    Lam_b, Lam = np.linalg.inv(L @ np.diag(np.diag(packed)) @ L.T), np.linalg.inv(y["delassus"])
    assert conditioning(y) == pytest.approx(np.linalg.norm(Lam, 2) / np.linalg.norm(Lam_b, 2), rel=1e-9)


def test_dot_errors_report_cancellation_beside_the_relative_measure():
    """|a − b| / max(|a|, |b|) is large where ⟨ẏ, ȳ⟩ cancels; |a − b| / (‖ẏ‖ ‖ȳ‖) is not."""
    relative, rounding = dot_errors([(1.0, 1.0 + 1e-15, 2.0), (1e-3, 1e-3 + 1e-14, 1e3)])
    assert relative == pytest.approx(1e-11) and rounding == pytest.approx(5e-16)
    assert dot_errors([(np.nan, 1.0, 1.0)]) == (float("inf"), float("inf"))

def test_pv_osim_fast_vjp_goes_through_its_ldl_once():
    """pv_osim_fast outputs the LDLᵀ factors of L_b^A and Λ assembled from the same factors
    (linalg.ldl_inverse): a second ldl of L_b^A, merged by cse in the value, made the reverse
    sweep (taken before cse) go through it twice, 3.12x the value on the ladder."""
    ratio = (count_ops(traced("ladder", "pv_osim_fast", "vjp").function)["instructions"]
             / count_ops(value("ladder", "pv_osim_fast"))["instructions"])
    print(f"ladder pv_osim_fast: VJP {ratio:.2f}x the value")
    assert ratio < 3

# -- CasADi: symbolic embedding and casadi.external ---------------------------------------------------
def test_tangent_casadi_function_gives_the_tangent_derivative():
    robot, cs = case("go1-4F3")
    g = cd.casadi_function(robot, "4F3", "aba", tangent=True)
    assert g.name_in() == ["q", "dq", "v", "tau"]
    dq = ca.SX.sym("dq", robot.nv)
    q, v, tau = ca.SX.sym("q", robot.nq), ca.SX.sym("v", robot.nv), ca.SX.sym("tau", robot.nv)
    J = ca.Function("J", [q, dq, v, tau], [ca.jacobian(g(q, dq, v, tau), dq)])
    rng = np.random.default_rng(3)
    x = {"q": robot.random_q(rng), "v": rng.normal(size=18), "tau": rng.normal(size=18)}
    ours = evaluate(traced("go1-4F3", "aba", "jacobian", ("q",)).function, x)["dvdot_dq"]
    assert np.abs(np.array(J(x["q"], np.zeros(18), x["v"], x["tau"])) - ours).max() <= 1e-12 * np.abs(ours).max()


def test_casadi_function_inside_opti():
    """Which torques hold go1 still at a standing pose with the feet in contact (pv: v̇ = 0 at
    v = 0, k = 0), with the least effort: an Opti problem over cd.casadi_function's SX function,
    differentiated by CasADi, solved by IPOPT."""
    robot, cs = case("go1-4F3")
    f = cd.casadi_function(robot, "4F3", "pv")
    opti = ca.Opti()
    tau = opti.variable(robot.nv)
    q0 = robot.neutral_q()      # knees bent (thigh 0.8, calf -1.6 rad): straight legs make J singular
    q0[2] = 0.29
    for b in robot.bodies[1:]:
        q0[b.q_index] = 0.8 if "thigh" in b.joint.name else -1.6 if "calf" in b.joint.name else 0.0
    vdot = f(q=q0, v=np.zeros(18), tau=tau, k=np.zeros(12))["vdot"]
    opti.minimize(ca.sumsqr(tau))
    # the trunk's 6 accelerations only: with the feet's rows J v̇ = 0, the legs' then vanish too
    # (asking all 18 over-determines the 12 torques; IPOPT: Not_Enough_Degrees_Of_Freedom)
    opti.subject_to(vdot[:6] == 0)
    opti.subject_to(tau[:6] == 0)
    opti.solver("ipopt", {"print_time": False}, {"print_level": 0, "sb": "yes"})
    sol = opti.solve()
    assert sol.stats()["return_status"] == "Solve_Succeeded"
    check = f(q=q0, v=np.zeros(18), tau=sol.value(tau), k=np.zeros(12))["vdot"]
    assert np.abs(np.array(check)).max() < 1e-8


def test_casadi_external_carries_our_derivatives(out_dir):
    """generate(..., casadi_derivatives=True) puts fwd1_/adj1_/jac_<function> in the .so:
    casadi.external finds them (the symbols are exported), and its Jacobian and a reverse
    product (CasADi's convention: stored coordinates of q) match CasADi's exact AD of the
    symbolic function to 1e-10, which CasADi's finite-difference fallback (used when it finds
    no jac_) does not reach."""
    import ctypes
    robot = cd.load_robot("chain:n=4,floating=1")
    f = cd.generate(robot, "default", "pv", out_dir=out_dir, casadi_derivatives=True)
    names = [c["function"] for c in f.manifest["casadi_derivatives"]]
    assert names == [f"{p}_{f.manifest['function']}" for p in ("fwd1", "adj1", "jac", "fwd1_adj1")]
    lib = ctypes.CDLL(str(f.so_path))
    assert all(hasattr(lib, n) for n in names)
    ext, sym = f.casadi_function(), cd.casadi_function(robot, "default", "pv")
    rng = np.random.default_rng(4)
    x = [robot.random_q(rng), rng.normal(size=robot.nv), rng.normal(size=robot.nv), rng.normal(size=6)]
    ybar = rng.normal(size=robot.nv + 6)

    def derivatives(g, X):
        Y = ca.vertcat(*g.call(X))
        return ca.Function("d", X, [ca.jacobian(Y, ca.vertcat(*X)), ca.jtimes(Y, ca.vertcat(*X), ybar, True)])
    got = [np.array(r) for r in derivatives(ext, [ca.MX.sym(n, *ext.size_in(k)) for k, n in enumerate(ext.name_in())])(*x)]
    want = [np.array(r) for r in derivatives(sym, sym.sx_in())(*x)]
    for a, b in zip(got, want):
        assert np.abs(a - b).max() <= 1e-10 * np.abs(b).max()


def test_casadi_external_gives_exact_hessians(out_dir):
    """The .so's second derivatives (fwd1_adj1_<function>, forward over reverse) are what
    CasADi's exact Hessians ask for: the Hessian of a scalar of the external's outputs, taken
    through casadi.external, matches CasADi's exact AD of the symbolic function; the function
    says at construction that it offers second derivatives (no warning)."""
    import warnings
    robot = cd.load_robot("chain:n=4,floating=1")
    f = cd.generate(robot, "default", "pv", out_dir=out_dir, casadi_derivatives=True)
    assert f.casadi_derivative_order == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ext = f.casadi_function()
    sym = cd.casadi_function(robot, "default", "pv")
    rng = np.random.default_rng(5)
    x = [robot.random_q(rng), rng.normal(size=robot.nv), rng.normal(size=robot.nv), rng.normal(size=6)]
    w = rng.normal(size=robot.nv + 6)

    def hessian(g):
        X = [ca.MX.sym(n, *g.size_in(k)) for k, n in enumerate(g.name_in())]
        Z = ca.vertcat(*X)
        return np.array(ca.Function("h", X, [ca.hessian(ca.dot(w, ca.vertcat(*g.call(X))), Z)[0]])(*x))
    got, want = hessian(ext), hessian(sym)
    assert np.abs(got - want).max() <= 1e-9 * np.abs(want).max()


def test_casadi_function_says_what_derivatives_it_offers(out_dir):
    """A .so without CasADi's derivative functions says so when its casadi.Function is made
    (one warning naming generate(..., casadi_derivatives=True)), not later inside IPOPT."""
    robot = cd.load_robot("chain:n=3")
    f = cd.generate(robot, "default", "aba", out_dir=out_dir)
    assert f.casadi_derivative_order == 0
    with pytest.warns(cd.DerivativeWarning, match="casadi_derivatives=True"):
        f.casadi_function()


def test_progress_lines_count_what_the_so_carries(tmp_path, monkeypatch, capsys):
    """The writing and compiling lines of a .so with CasADi's derivative functions count those
    too (the value alone is a small part of what gcc compiles)."""
    from casadi_delassus import progress
    monkeypatch.setattr(progress, "AFTER", 0.0)
    progress.quiet(False)
    f = cd.generate("chain:n=3", "default", "aba", out_dir=tmp_path, casadi_derivatives=True)
    extra = sum(c["op_count"]["instructions"] for c in f.manifest["casadi_derivatives"])
    err = capsys.readouterr().err
    line = next(l for l in err.splitlines() if "compiling aba-casadi.c" in l)
    assert f"{f.op_count['instructions']:,} instructions + {extra:,} in its CasADi derivative functions" in line
