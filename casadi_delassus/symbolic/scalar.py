"""Scalar arithmetic over CasADi SX with structural zeros: an exact numeric 0 (a Python number
or an SX constant) is never multiplied or added, so whatever is known to vanish costs
nothing and stays recognisable as zero downstream.  Vectors are lists of scalars (SX or exact
numbers); numeric weights of ±1 cost no product.  Every algorithm's list arithmetic comes from
here (../shared/DESIGN.md, "What makes the counts low")."""
from __future__ import annotations

import casadi as ca


def is_zero(e):
    """A structural zero: an exact numeric 0 (Python number or SX constant)."""
    return isinstance(e, (int, float)) and e == 0 or isinstance(e, ca.SX) and e.is_zero()


def add(a, b):
    return b if is_zero(a) else a if is_zero(b) else a + b


def sub(a, b):
    return a if is_zero(b) else -b if is_zero(a) else a - b


def mul(a, b):
    return 0.0 if is_zero(a) or is_zero(b) else a * b


def neg(a):
    return 0.0 if is_zero(a) else -a


def pm(x, sign, y):
    """x + y for sign > 0, x - y otherwise (CasADi folds a zero operand)."""
    return x + y if sign > 0 else x - y


def dot(a, b):
    """Σ a_l b_l of two lists, structural zeros skipped (0 when none survive)."""
    acc = 0
    for x, y in zip(a, b):
        if not (is_zero(x) or is_zero(y)):
            acc = x * y if is_zero(acc) else acc + x * y
    return acc


def lin(pairs):
    """Σ w x over (numeric w, x): ±1 without a product, zeros skipped, a negative weight as a
    subtraction (its constant shared with the positive one) unless every weight is negative."""
    terms = [(float(w), x) for w, x in pairs if w != 0 and not is_zero(x)]
    terms.sort(key=lambda wx: wx[0] < 0)                       # a positive term leads
    e = None
    for w, x in terms:
        term = x if abs(w) == 1 else abs(w) * x
        if e is None:
            e = term if w > 0 else -term if abs(w) == 1 else w * x
        else:
            e = e + term if w > 0 else e - term
    return 0 if e is None else e


def vadd(a, b):
    return [add(x, y) for x, y in zip(a, b)]


def vsub(a, b):
    return [sub(x, y) for x, y in zip(a, b)]


def cross(a, b):
    """a × b for 3-lists."""
    return [sub(mul(a[1], b[2]), mul(a[2], b[1])), sub(mul(a[2], b[0]), mul(a[0], b[2])),
            sub(mul(a[0], b[1]), mul(a[1], b[0]))]


def cross_num(r, w):
    """r × w for a numeric 3-vector r."""
    return [lin([(r[1], w[2]), (-r[2], w[1])]), lin([(r[2], w[0]), (-r[0], w[2])]),
            lin([(r[0], w[1]), (-r[1], w[0])])]


def add_cross(x, r, v, sign=1):
    """x + sign · (r × v) for a numeric r and 3-lists x, v, each component one sum."""
    out = []
    for a in range(3):
        b, c = (a + 1) % 3, (a + 2) % 3
        out.append(lin([(1, x[a]), (sign * r[b], v[c]), (-sign * r[c], v[b])]))
    return out


def mat_vec(A, x, transpose=False):
    """A x (or Aᵀ x) for a numeric matrix A, by coefficient."""
    A = A.T if transpose else A
    return [lin([(A[r, c], x[c]) for c in range(A.shape[1])]) for r in range(A.shape[0])]


def sym_vec(H, x):
    """H x for a symmetric SX matrix (structural zeros skipped)."""
    n = H.shape[0]
    return [dot([H[r, c] for c in range(n)], x) for r in range(n)]


def column(xs):
    """A list of scalars as an SX column."""
    return ca.vertcat(*[x if isinstance(x, ca.SX) else ca.SX(float(x)) for x in xs])


def motion_cross(a, b):
    """a × b for spatial motion 6-lists [angular; linear]: [ω × b_ω; ω × b_v + v × b_ω]."""
    w, v = a[:3], a[3:]
    return cross(w, b[:3]) + vadd(cross(w, b[3:]), cross(v, b[:3]))


def force_cross(a, f):
    """a ×* f for a motion 6-list a and a force 6-list f: [ω × f_n + v × f_f; ω × f_f]."""
    w, v = a[:3], a[3:]
    return vadd(cross(w, f[:3]), cross(v, f[3:])) + cross(w, f[3:])
