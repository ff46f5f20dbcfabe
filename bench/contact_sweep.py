"""Issue 25's random sweep: 50 problems per robot (q near the stance, random v and τ, one μ
per contact in [0.05, 1.2]), solved by the compiled step (ADMM and PGS, tolerance 1e-10) and by
Pinocchio 4.1's ADMMConstraintSolver / PGSConstraintSolver (tolerance 1e-12) on Pinocchio's
G and g of the same state.  Reports the worst residual of our solves and the worst difference:
λ relative to max |λ| on go1 (unique), Jᵀλ relative to max |Jᵀλ| and σ on talos (G singular),
and the worst residual of Pinocchio's answers by our measure (contact/residuals.py): where both
are ~0 and the answers still differ, the exact (non-convex) problem has several solutions.

    .venv/bin/python bench/contact_sweep.py [--n 50]

Writes bench/results/contact_sweep.md."""
from __future__ import annotations

import argparse

import numpy as np

import common
from casadi_delassus import contact_step
from casadi_delassus.contact.residuals import residuals
from casadi_delassus.verify import contact_problems as cp

def random_state(p, rng):
    """(q, v, τ, μ) near problem p's stance."""
    q = p.q.copy()
    q[7:] += rng.normal(scale=0.05, size=len(q) - 7)
    v = rng.normal(scale=0.2, size=len(p.v))
    tau = p.tau + rng.normal(scale=0.1 * np.max(np.abs(p.tau)), size=len(p.tau))
    return q, v, tau, rng.uniform(0.05, 1.2, len(p.mu))


def sweep(name, n, out):
    """Rows (robot, solver, worst residual, worst difference, what was compared, not converged)."""
    p = cp.build(name)
    rng = np.random.default_rng(0)
    states = [random_state(p, rng) for _ in range(n)]
    rows = []
    for solver in ("admm", "pgs"):
        s = contact_step(p.robot, p.specs, solver=solver, out_dir=out)
        worst_res, worst_diff, bad, worst_pin = 0.0, 0.0, 0, 0.0
        for q, v, tau, mu in states:
            r = s(q, v, tau, dt=p.dt, mu=mu, tol=1e-10, max_iter=100_000)
            bad += not r.converged
            worst_res = max(worst_res, r.residuals.primal, r.residuals.dual, r.residuals.complementarity)
            G, g, J, _ = cp.delassus_and_free_velocity(p.model, p.frames, q, v, tau, p.dt)
            lam, sigma, _, _ = cp.pinocchio_solve(G, g, mu, solver=solver, tol=1e-12, max_iter=100_000)
            worst_pin = max(worst_pin, residuals(lam, sigma, mu).max())
            if p.robot == "go1":
                diff = np.max(np.abs(r.lam - lam)) / max(np.max(np.abs(lam)), 1e-300)
            else:
                diff = max(np.max(np.abs(J.T @ (r.lam - lam))) / max(np.max(np.abs(J.T @ lam)), 1e-300),
                           np.max(np.abs(r.sigma - sigma)))
            worst_diff = max(worst_diff, diff)
        rows.append((p.robot, solver, worst_res, worst_pin, worst_diff,
                     "λ / max|λ|" if p.robot == "go1" else "Jᵀλ / max|Jᵀλ|, σ", bad))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--out", default="codegen_out")
    args = ap.parse_args()
    rows = sweep("go1_stand", args.n, args.out) + sweep("talos_stand", args.n, args.out)
    lines = [f"# Contact solve against Pinocchio 4.1: {args.n} random problems per robot", "",
             f"`.venv/bin/python bench/contact_sweep.py --n {args.n}`", "",
             "| robot | solver | our worst residual (tol 1e-10) | Pinocchio's answers' worst residual, our measure "
             "| worst difference from Pinocchio | compared | not converged |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {r} | {s} | {res:.1e} | {pin:.1e} | {d:.1e} | {what} | {bad} |" for r, s, res, pin, d, what, bad in rows]
    common.publish("contact_sweep.md", "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
