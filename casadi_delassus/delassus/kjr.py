"""kjr — the Kreutz-Jain-Rodriguez (RJK) recursion for Λ⁻¹ = J M⁻¹ Jᵀ, O(n + m²d).

EFPA paper ../shared/papers/003_3d6496c5334b6d59.txt, Sec. V-A and Appendix (RJK as
optimized in its ref. [16]); PV-OSIMr paper ../shared/papers/000_82174d5af858539c.txt,
Table I.  Three sweeps and a post-processing step, in local link frames:

  backward   H^A_λ(i) += ^λP_i H^A_i          (articulated inertias, shared with efpa)
  forward    Ω_i = ^λP_iᵀ Ω_λ ^λP_i + S_i D_i⁻¹ S_iᵀ,  Ω_root = S D⁻¹ Sᵀ      ("Λ_ii from
             Λ_p(i)p(i)"), for the links that support a constraint
  cross      Ω_ab = ^cP_aᵀ Ω_c ^cP_b, c = cca(a, b): Ω_c carried down one branch and then
             the other one joint at a time ("recursively from a common ancestor using local
             articulated transforms only"); a carried-down Ω_c ^cP_b is shared by every
             pair that needs it
  post       Λ⁻¹_ab = K_a Ω_ab K_bᵀ                 (general end-effector coordinates)

^λP_iᵀ = (1 − S_i D_i⁻¹ U_iᵀ) ^iX_λ carries an acceleration across joint i as if it were
free (zero torque); Ω_ab maps a force on link b to the acceleration of link a."""
from __future__ import annotations

from ..sweeps.articulated import articulated_inertias
from ..sweeps.constraint_space import assemble, cca, support
from ..symbolic import linalg, passes
from ..symbolic.frames import slid_transforms, transform_compliance, transform_motion
from ..symbolic.linalg import sym
from ..symbolic.scalar import dot


def _path(robot, top, bottom):
    """Links from just below ``top`` down to ``bottom`` (root-first)."""
    out = []
    while bottom != top:
        out.append(bottom)
        bottom = robot.parent(bottom)
    return out[::-1]


def carry_down(robot, T, abi, cols, top, bottom):
    """^topP_bottomᵀ applied to motion columns given at ``top``: at ``bottom``."""
    for i in _path(robot, top, bottom):
        cols = [abi[i].motion(transform_motion(T[i], c)) for c in cols]
    return cols


def delassus(robot, constraints, q, K_bodies):
    T = slid_transforms(robot, constraints, q)
    abi = articulated_inertias(robot, T)
    passes.done("articulated inertias H^A", [art.HA for art in abi])
    ES = support(robot, constraints)
    # forward sweep: Ω_i (symmetric, i's coordinates) on the supporting links
    Om = {}
    for i in range(robot.n_bodies):
        if ES[i]:
            p = robot.parent(i)
            Om[i] = abi[i].omega_matrix() if p < 0 else abi[i].congruence(transform_compliance(T[i], Om[p]))
    passes.done("forward: Ω_i", Om)
    Om = {i: linalg.entries(M) for i, M in Om.items()}
    body = [c.body for c in constraints.constraints]
    K = [linalg.entries(Kb) for Kb in K_bodies]
    down = {}                       # (c, i): columns of Ω_{i,c} = ^cP_iᵀ Ω_c, shared prefixes

    def carried(c, i):
        if i == c:
            return Om[c]
        if (c, i) not in down:
            down[(c, i)] = [abi[i].motion(transform_motion(T[i], col)) for col in carried(c, robot.parent(i))]
        return down[(c, i)]

    def new_steps(c, i):
        return sum((c, j) not in down for j in _path(robot, c, i))

    blocks = {}
    for a in range(len(body)):
        # diagonal: K_a Ω_a K_aᵀ, W = Ω_a K_aᵀ then the upper entries of K_a W
        W = [[dot(row, f) for row in Om[body[a]]] for f in K[a]]
        blocks[(a, a)] = sym(len(K[a]), lambda r, s: dot(K[a][r], W[s]))
        for b in range(a + 1, len(body)):
            c = cca(robot, body[a], body[b])
            if c is None:                                            # different trees
                continue
            la, lb = len(_path(robot, c, body[a])), len(_path(robot, c, body[b]))
            # carry the shared half down one branch, the pair's own half down the other
            if la + new_steps(c, body[b]) <= lb + new_steps(c, body[a]):
                Psi = carried(c, body[b])                            # Ω_{b,c}, columns
                cols = carry_down(robot, T, abi, [list(r) for r in zip(*Psi)], c, body[a])
                Oab = [list(r) for r in zip(*cols)]                  # Ω_{a,b} as rows
            else:
                Psi = carried(c, body[a])
                # columns of Ω_{b,a} = rows of Ω_{a,b}
                Oab = carry_down(robot, T, abi, [list(r) for r in zip(*Psi)], c, body[b])
            KO = [[dot(k, [Oab[u][v] for u in range(6)]) for v in range(6)] for k in K[a]]   # K_a Ω_ab
            blocks[(a, b)] = [[dot(t, kb) for kb in K[b]] for t in KO]
    passes.done("cross: Ω_ab carried down from the common ancestors, K_a Ω_ab K_bᵀ", blocks)
    return {"delassus": assemble(robot, constraints, blocks)}
