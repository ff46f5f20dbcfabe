"""``step_derivatives``: the compiled derivatives of the contact step (contact/step_derivatives.py has the
mathematics, codegen/step_derivatives.py the C and its build, runtime/step_derivatives.py the loading and the
implicit system solved at run time)."""
from __future__ import annotations

from ..codegen.contact_step import DEFAULT_OUT, scenario_name
from ..codegen.step_derivatives import DEFAULT_CFLAGS, build, function_name
from ..contact.step import check_contacts
from ..model import load_robot
from ..runtime.contact_step import check_mu
from ..runtime.step_derivatives import LoadedDerivatives


class StepDerivatives(LoadedDerivatives):
    """Compiled derivatives of ``contact_step(robot, contacts)`` (``step_derivatives``): robot, contacts and μ
    checked before anything is built."""

    def __init__(self, robot, contacts, mu=0.8, out_dir=DEFAULT_OUT, cflags=DEFAULT_CFLAGS, cc=None, name=None):
        robot = load_robot(robot)
        contacts = check_contacts(robot, contacts)
        mu = check_mu(mu, contacts.m // 3)
        scenario = scenario_name("contact", contacts.specs)
        path = build(robot, contacts, scenario, out_dir, tuple(cflags), cc, name)
        super().__init__(path, function_name(robot, scenario, name), robot, contacts, mu)


def step_derivatives(robot, contacts, mu=0.8, **build_options):
    """Compiled derivatives of the contact step: ``d.jacobian(q, v, tau, lam, dt, mu, normals,
    modes)`` → StepJacobian; ``p = d.point(...)`` then ``d.jvp(p, q_dot, v_dot, tau_dot)`` and
    ``d.vjp(p, v_next_bar, lam_bar)``.  λ is the step's solution (``contact_step(...).lam``);
    ``build_options``: out_dir, cflags, cc, name."""
    return StepDerivatives(robot, contacts, mu, **build_options)
