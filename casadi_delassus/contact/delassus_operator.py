"""The Delassus operator of the compiled contact step (contact/step.py): what ADMM's linear solve (G + d I)⁻¹ b is
made of, one named type per route, as Pinocchio 3 names its choice by a type (DelassusOperatorDense, an explicit G
and its Cholesky factor; DelassusOperatorRigidBody, the matrix-free one).

- ``DenseDelassus``: G explicit (prep computes it by a Delassus algorithm); ``<name>_factor(G, d)`` the LDLᵀ
  factors of G + d I (symbolic/linalg.py's ldl over a symbolic m×m G, m³/6), ``<name>_solve(factors, b)`` m².
- ``MatrixFreeDelassus``: (G + d I)⁻¹ b = (R⁻¹ + J M⁻¹ Jᵀ)⁻¹ b with the stiffness R = 1/d on every row, by
  damped_inverse_apply (operators/, matrix-free paper ../shared/papers/001_a194bdf892a0cc2c.txt, Sec. V: matrix
  inversion lemma + loop-constrained ABA, O(n + m)) staged as its Sec. VI-B re-evaluates it (symbolic/staging.py):
  what q alone gives (``wd``, a prep output), ``<name>_factor(R, w_q)`` when ρ changes, ``<name>_solve(b, w_R)`` at
  every iteration.  G is not read.

Each says what it adds to prep (``prep_outputs``) and how many instructions a step's linear solves take
(``work``: what ``linear_solve="auto"`` weighs, codegen/contact_step.py); its C is
codegen/templates/delassus_<route>.c.j2."""
from __future__ import annotations

import functools

import casadi as ca

from ..operators.damped_inverse_apply import apply as damped_inverse_apply
from ..symbolic import linalg
from ..symbolic.staging import split

# a step of issue 25's problems (talos_stand, go1_stand): 5 iterations, 2 refactorizations; what "auto" weighs
ITERATIONS, FACTORIZATIONS = 5, 2


class DelassusOperator:
    """What the routes share: the step's name (its functions are ``<name>_factor``, ``<name>_solve``) and the
    count of a step's linear solves."""
    route = ""
    stored: tuple[str, ...] = ()     # the names of what it adds to prep (prep_outputs), the C's ``wd``

    def __init__(self, robot, cs, name):
        self.robot, self.cs, self.name = robot, cs, name

    def prep_outputs(self, q):
        """{name in ``stored``: SX of q} that prep computes for this operator besides v_free, G, g, w."""
        return {}

    @property
    def factor(self):
        """``<name>_factor``: the part of the damped inverse that changes with d (when ρ changes)."""
        return self._functions[0]

    @property
    def solve(self):
        """``<name>_solve``: (G + d I)⁻¹ b from the factor's output, at every iteration."""
        return self._functions[1]

    def work(self, count, prep, bare_prep):
        """Instructions of one step's linear solves by ``count`` (casadi.Function → instructions, opcount's: the
        mathematics does not count): FACTORIZATIONS factorizations, ITERATIONS solves, and what ``prep`` (with
        this operator's outputs) adds over ``bare_prep`` (without them: little, cse shares them with ABA and G)."""
        added = count(prep) - count(bare_prep) if prep is not bare_prep else 0
        return added + FACTORIZATIONS * count(self.factor) + ITERATIONS * count(self.solve)


class DenseDelassus(DelassusOperator):
    """G explicit, (G + d I)⁻¹ by LDLᵀ: straight-line code, nothing added to prep."""
    route = "dense"

    @functools.cached_property
    def _functions(self):
        """(factor, solve): ``<name>_factor(G, d)`` → the LDLᵀ factors of G + d I packed as one vector (L below the
        diagonal, row by row, then D⁻¹), ``<name>_solve(factors, b)`` → (G + d I)⁻¹ b."""
        m, name = self.cs.m, self.name
        G, d = ca.SX.sym("G", m, m), ca.SX.sym("d")
        L, _, Dinv = linalg.ldl({(i, j): G[i, j] + d if i == j else G[i, j] for i in range(m) for j in range(i, m)}, m)
        keys = sorted(L)
        factor = ca.Function(f"{name}_factor", [G, d], [ca.vertcat(*[L[k] for k in keys], *Dinv)], ["G", "d"],
                             ["factors"])
        fac, b = ca.SX.sym("factors", len(keys) + m), ca.SX.sym("b", m)
        x = linalg.ldl_solve(({k: fac[n] for n, k in enumerate(keys)}, None, [fac[len(keys) + i] for i in range(m)]),
                             [b[i] for i in range(m)])
        return factor, ca.Function(f"{name}_solve", [fac, b], [ca.vertcat(*x)], ["factors", "b"], ["x"])


class MatrixFreeDelassus(DelassusOperator):
    """(G + d I)⁻¹ b by the staged damped_inverse_apply: O(n + m) a solve, its q stage in prep (``wd``)."""
    route = "matrix_free"
    stored = ("wd",)

    @functools.cached_property
    def _stages(self):
        """(q stage, factor, solve) of damped_inverse_apply split by what each argument changes with."""
        robot, cs, name = self.robot, self.cs, self.name
        q, R, b = ca.SX.sym("q", robot.nq), ca.SX.sym("R", cs.m), ca.SX.sym("lam", cs.m)
        x = damped_inverse_apply(robot, cs, q, cs.symbolic_K_bodies(q, {}), R=R, lam=b)
        f = ca.Function("damped", [q, R, b], [ca.densify(x["damped_inverse_apply"])], ["q", "R", "lam"], ["x"])
        first, damping, apply = split(f, [("q", ["q"]), ("R", ["R"]), ("lam", ["lam"])])
        factor = ca.Function(f"{name}_factor", damping.function.sx_in(),
                             ca.cse(damping.function.call(damping.function.sx_in())), damping.function.name_in(),
                             ["factors"])
        solve = ca.Function(f"{name}_solve", apply.function.sx_in(), ca.cse(apply.function.call(apply.function.sx_in())),
                            apply.function.name_in(), ["x"])
        return first.function, factor, solve

    @property
    def _functions(self):
        """(factor, solve): ``<name>_factor(R, w_q)`` with the stiffness R = 1/d, ``<name>_solve(lam, w_R)``."""
        return self._stages[1:]

    def prep_outputs(self, q):
        """{"wd": w_q}: what damped_inverse_apply needs of q alone, computed in prep where cse shares it."""
        return {"wd": self._stages[0](q)}


OPERATORS = {op.route: op for op in (DenseDelassus, MatrixFreeDelassus)}
