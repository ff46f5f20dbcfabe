"""MuJoCo's soft-constraint parameters of one constraint (MuJoCo's computation chapter, "Soft
constraints" and "Solver parameters"; the method of engine_core_constraint.c's getsolparam,
getimpedance and mj_makeImpedance, written anew), for any row type:

- solimp (d₀, d_width, width, midpoint, power) cleaned as MuJoCo uses it: d₀, d_width and the
  midpoint in [1e-4, 0.9999], width ≥ 0, power ≥ 1;
- solref (time constant, damping ratio) or (−stiffness, −damping): a mixed-sign pair is
  replaced by the default (0.02, 1) (a contact's solreffriction by (0, 0)); with refsafe the
  time constant is at least 2·timestep;
- K = 1/(d_width² tc² dr²), B = 2/(d_width tc) (or K = −tc/d_width², B = −dr/d_width);
- the impedance d(r) of r = pos − margin: flat ½(d₀ + d_width) when d₀ = d_width or width ≈ 0,
  else d₀ + y(|r|/width)(d_width − d₀) with y = a x^p below the midpoint, 1 − b (1 − x)^p above
  it (a, b making y continuous at it), and d_width from x ≥ 1;
- R = max(1e-15, (1 − d)/d · â) (â the row's approximate A_ii), D = 1/R,
  a_ref = −B (J v) − K d (pos − margin).

The parameters are numbers (model constants, a contact's mixed values); r may be a number or
casadi.SX, and the same code serves both (``select`` picks the branch)."""
from __future__ import annotations

import casadi as ca

MIN_IMP, MAX_IMP, MINVAL = 1e-4, 0.9999, 1e-15
DEFAULT_SOLREF = (0.02, 1.0)


def select(condition, a, b):
    """``a`` where ``condition`` else ``b``: casadi's if_else on SX, Python's choice on numbers."""
    if any(isinstance(x, (ca.SX, ca.MX)) for x in (condition, a, b)):
        return ca.if_else(condition, a, b)
    return a if condition else b


def clean_solimp(solimp):
    """solimp as MuJoCo uses it (a list of 5 floats)."""
    d0, dw, width, mid, power = (float(x) for x in solimp)
    clip = lambda x: min(MAX_IMP, max(MIN_IMP, x))     # noqa: E731 -- one expression, named for reading
    return [clip(d0), clip(dw), max(0.0, width), clip(mid), max(1.0, power)]


def clean_solref(solref, timestep, refsafe, default=DEFAULT_SOLREF):
    """solref as MuJoCo uses it: ``default`` for a mixed-sign pair, the time constant at least
    2·timestep (``refsafe``) in the standard (positive) format."""
    tc, dr = (float(x) for x in solref)
    if (tc > 0) != (dr > 0):
        tc, dr = default
    if refsafe and tc > 0:
        tc = max(tc, 2 * timestep)
    return [tc, dr]


def stiffness_damping(solref, solimp):
    """(K, B) of a cleaned solref and solimp."""
    tc, dr = solref
    dmax = solimp[1]
    K = 1 / max(MINVAL, dmax * dmax * tc * tc * dr * dr) if tc > 0 else -tc / max(MINVAL, dmax * dmax)
    B = 2 / max(MINVAL, dmax * tc) if dr > 0 else -dr / max(MINVAL, dmax)
    return K, B


def _power(x, p):
    """x^p, exact for MuJoCo's common powers 1 and 2."""
    return x if p == 1 else x * x if p == 2 else x ** p


def impedance(r, solimp):
    """d(r) for r = pos − margin (a number or SX) and a cleaned solimp."""
    d0, dw, width, mid, power = solimp
    if d0 == dw or width <= MINVAL:
        return 0.5 * (d0 + dw)
    x = (ca.fabs(r) if isinstance(r, ca.SX) else abs(r)) / width
    if power == 1:
        y = x
    else:
        low = _power(x, power) / _power(mid, power - 1)
        high = 1 - _power(1 - x, power) / _power(1 - mid, power - 1)
        y = select(x <= mid, low, high)
    return select(x >= 1, dw, d0 + y * (dw - d0))


def regularization(imp, weight):
    """R = max(1e-15, (1 − d)/d · â)."""
    R = (1 - imp) * weight / imp
    return ca.fmax(MINVAL, R) if isinstance(R, ca.SX) else max(MINVAL, R)
