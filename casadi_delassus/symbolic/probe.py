"""The one trace-time probe: numeric values of SX expressions of q (and runtime K inputs) at
seeded random inputs, and the thresholds that turn those values into decisions about the code
to generate.

A decision taken at trace time must hold at every configuration or at none (it is about the
model's structure, not about one q): whether a row passed through a joint is identically zero
(PV paper ../shared/papers/004_52dd6d88d839fc14.txt, Remark 8), whether constraint rows are
redundant (Remark 9), whether a branch block of L_b^A is singular (Sec. VII-B, eq. 55).  A
random configuration is generic with probability one; a fixed seed makes the same robot and
constraints always give the same code.  Structural zeros and singularities come out as
rounding (~1e-16 relative), generic values many orders above, so each threshold below sits
between the two with a margin on both sides.
"""
from __future__ import annotations

import casadi as ca
import numpy as np

SEED = 12345

# The thresholds, each relative to the scale of the quantity it judges, and why it is where it is.
# A probed quantity (k̃ = K^A S_i at a joint, a row left after a projection) at most this
# fraction of the largest constraint entry is identically zero: a structural zero probes as
# rounding, ≤ 1e-15; pv and pv_early then neither eliminate nor accumulate there.
ZERO = 1e-9
# A row whose Gram-Schmidt residual against the rows before it is at most this fraction of the
# largest entry depends on them (four points on one link reaching a free base): pv_early drops it
# with multiplier 0 (Remark 9).  The same margin as ZERO: both tell rounding from a value.
DEPENDENT = 1e-9
# A pivot of the hard solvers' Delassus solve at most this fraction of the largest: Λ⁻¹ is
# singular at the probe (redundant or conflicting constraints; tree.check_regular).  Lower than
# ZERO because pivots are products of ~m row quantities: a generic but ill-conditioned set
# (cond(Λ⁻¹) up to ~1e10 on the registry robots) must pass.
SINGULAR_PIVOT = 1e-12
# λmin/λmax of a branch block of L_b^A, the best over SAMPLES configurations, at most this: the
# block is singular by structure (a 3-DoF leg under a 6D sole, a point on a knee axis) and
# pv_osim_fast keeps that tree out of the lemma.  Rounding leaves < 1e-16 there; the registry
# robots' generic blocks are above 2e-5.
SINGULAR_BLOCK = 1e-10
# Configurations that judge a branch block: a block singular at one random q by chance (a
# straight knee) is not at the next, while one singular by structure is at all of them.
SAMPLES = 3


class Probe:
    """Values of SX expressions of ``q`` (symbolic, or numeric: then only the runtime K vary)
    and of the runtime K symbols in ``K_bodies`` at ``samples`` seeded random inputs; the first
    sample is what ``__call__`` evaluates at."""

    def __init__(self, robot, q, K_bodies, samples=1, seed=SEED):
        rng = np.random.default_rng(seed)
        q = ca.SX(q)
        self.q = [q] if q.is_valid_input() else []
        self.syms = _runtime_symbols(K_bodies, q)
        self.values = [[robot.random_q(rng)] * bool(self.q) + [rng.normal() for _ in self.syms]
                       for _ in range(samples)]

    def __call__(self, exprs):
        """The values of ``exprs`` (SX scalars or numbers) at the first sample, as a 1-D array."""
        return self.at_samples(exprs)[0]

    def at_samples(self, exprs):
        """The values of ``exprs`` at every sample: an array (samples x len(exprs))."""
        exprs = [e if isinstance(e, ca.SX) else ca.SX(float(e)) for e in exprs]
        f = ca.Function("probe", [*self.q, *self.syms], [ca.vertcat(*exprs)] if exprs else [ca.SX(0, 1)])
        return np.array([np.array(f(*v)).reshape(-1) for v in self.values])


def _runtime_symbols(K_bodies, q):
    """The symbols of the runtime K inputs (those of K_bodies that q does not determine), once each."""
    seen, out = set(), []
    for K in K_bodies:
        if not isinstance(K, ca.SX):
            continue
        for s in ca.symvar(K):
            h = s.element_hash()
            if h not in seen and not (q.is_valid_input() and ca.depends_on(s, q)):
                seen.add(h)
                out.append(s)
    return out
