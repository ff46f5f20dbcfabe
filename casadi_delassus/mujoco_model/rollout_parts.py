"""What the compiled rollout (``cd.mujoco_rollout``) evaluates per forward, as one casadi.Function
of (qpos, qvel, ctrl, qfrc_applied) for one MjModel, and the static tables its C loop reads:

- the smooth part (smooth.py): M with armature and qfrc_smooth, and the actuators' velocity
  derivative implicitfast takes (actuators.velocity_derivative);
- every contact candidate slot of collision.py (dist, gate, the pairs' numbers aux);
- the rows of equality, friction loss and joint limits (constraints.py; limits with their
  ``active`` flag), with J, a_ref and R per row;
- sensors.py's sensordata as a function of (qpos, qvel, qacc), evaluated at the forward before
  each step (touch sensors are refused: they need the contacts' forces);
- per contact pair, a function of (qpos, qvel) giving its slots' rows (the slot's position, frame
  and distance are the candidates' SX), called by the C only for pairs with a kept contact (most
  of a robot's pairs are far from the floor at any time: evaluating every slot's rows each step
  cost the Go2 rollout 4x its time).

The C loop picks MuJoCo's active contacts with collision.select's rule (ported), keeps a slot's
rows where it is selected and dist < includemargin (collision.contacts' exclude), and solves
MuJoCo's convex problem over the kept rows (solver.py's primal Newton).  What the compiled path
does not do yet is refused by name (``check``): mesh contacts and touch sensors
(features.py refuses the rest: the implicit integrator, activations, ...)."""
from __future__ import annotations

from dataclasses import dataclass

import casadi as ca
import numpy as np

from ..errors import ModelError
from ..model.mjcf import mujoco_module
from . import actuators, collision, sensors
from .constraints import ELLIPTIC, Contact, Kinematics, Rows, constraint_rows, contact_rows
from .flags import disabled
from .smooth import smooth

RULES = {"each": 0, "capsules": 1}
INTEGRATORS = {0: "euler", 1: "rk4", 3: "implicitfast"}       # mjtIntegrator -> the C loop's (features.py refuses others)


def check(model):
    """A ModelError naming what the compiled rollout does not do for MujocoModel ``model``."""
    m, mujoco = model.m, mujoco_module()
    bad = []
    touch = int(mujoco.mjtSensor.mjSENS_TOUCH)
    if any(int(t) == touch for t in m.sensor_type):
        bad.append("touch sensors")
    if bad:
        raise ModelError(f"MuJoCo model {model.name!r}: not in the compiled rollout yet: {'; '.join(bad)}")


@dataclass
class RolloutParts:
    """The traced functions and the tables of the C loop (module docstring)."""
    function: ca.Function
    pair_functions: list            # per pair: Function (qpos, qvel) -> (Jᵀ, a_ref, R) of its rows, or None
    pair_rows: list                 # per pair: (first row, rows)
    sensor_function: ca.Function | None     # (qpos, qvel, qacc) -> sensordata, None without sensors
    layout: collision.ContactLayout
    row_type: np.ndarray
    row_slot: np.ndarray            # -1: not a contact row
    row_frictionloss: np.ndarray
    row_cone: np.ndarray            # an elliptic cone's rows on its first row, -1 on its others, 0 elsewhere
    row_scale: np.ndarray           # contact.mu on a cone's first row, friction[j - 1] on its row j
    slot_margin: np.ndarray         # includemargin per slot
    pairs: list                     # per pair (first slot, slots, RULES code, cap, first aux number)
    joints: list                    # per joint (type, qpos address, dof address)
    damping: np.ndarray             # per dof, 0 where the damper is disabled
    implicit_damping: bool          # Euler's implicit damping applies (some damping, eulerdamp on)
    integrator: str                 # INTEGRATORS' name

    @property
    def nrow(self):
        return len(self.row_type)


def _slot_contacts(m, layout, dist, pos, frame):
    """One Contact per analytic candidate slot, its point, frame and dist the candidates' SX."""
    out = []
    for ps in layout.pairs:
        p = ps.pair
        for k in range(ps.start, ps.stop):
            out.append(Contact(int(m.geom_bodyid[p.geom1]), int(m.geom_bodyid[p.geom2]), pos[3 * k:3 * k + 3],
                               ca.reshape(frame[9 * k:9 * k + 9], 3, 3).T, dist[k], int(p.condim), p.friction,
                               p.solref, p.solreffriction, p.solimp, float(p.margin)))
    return out


def rollout_parts(model, name="mjforward"):
    """The RolloutParts of MujocoModel ``model``, its function called ``name`` (``check`` first; mesh pairs refused
    by name)."""
    check(model)
    m = model.m
    layout = collision.contact_layout(m, repr(model.name))
    mesh = [ps for ps in layout.pairs if ps.rule not in RULES]
    if mesh:
        raise ModelError(f"MuJoCo model {model.name!r}: not in the compiled rollout yet: mesh contacts "
                         f"(geom {mesh[0].pair.geom2})")
    q, v, u, f = (ca.SX.sym(n, k) for n, k in (("qpos", m.nq), ("qvel", m.nv), ("ctrl", m.nu), ("qfrc_applied", m.nv)))
    s = smooth(model, q, v, u, f)
    dist, pos, frame, gate, aux = collision.candidates_function(m, model.robot, layout)(q)
    kin = Kinematics(m, q)
    rows = constraint_rows(kin, v)
    outs = _outputs(m, rows, v)
    slot_of, types, fl = [-1] * len(rows), list(rows.type), list(rows.frictionloss)
    pair_functions, pair_rows = [], []
    for i, (prow, slots) in enumerate(_pair_rows(m, kin, layout, _slot_contacts(m, layout, dist, pos, frame))):
        pair_rows.append((len(types), len(prow)))
        types, fl, slot_of = types + prow.type, fl + prow.frictionloss, slot_of + slots
        pair_functions.append(ca.Function(f"{name}_pair{i}", [q, v], [ca.densify(x) for x in _outputs(m, prow, v)[:3]],
                                          ["qpos", "qvel"], ["JT", "aref", "R"]) if len(prow) else None)
    cone, scale = _cones(m, layout, types, slot_of)
    dv = ca.vertcat(*actuators.velocity_derivative(m, q, v, u))     # implicitfast's actuator damping
    function = ca.Function(name, [q, v, u, f], [ca.densify(x) for x in (s.M, s.qfrc_smooth, dist, gate, aux, *outs, dv)],
                           ["qpos", "qvel", "ctrl", "qfrc_applied"],
                           ["M", "qfrc_smooth", "dist", "gate", "aux", "JT", "aref", "R", "active", "actuator_dv"])
    margin = np.array([ps.pair.margin for ps in layout.pairs for _ in range(ps.start, ps.stop)], float)
    pairs = [(ps.start, ps.stop - ps.start, RULES[ps.rule], ps.cap, ps.aux.start) for ps in layout.pairs]
    joints = [(int(m.jnt_type[j]), int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j])) for j in range(m.njnt)]
    damping = np.zeros(m.nv) if disabled(m, "damper") else np.asarray(m.dof_damping, float)
    a = ca.SX.sym("qacc", m.nv)
    sensor_function = ca.Function(f"{name}_sensors", [q, v, a], [ca.densify(sensors.sensordata(kin, v, a))],
                                  ["qpos", "qvel", "qacc"], ["sensordata"]) if m.nsensordata else None
    return RolloutParts(function, pair_functions, pair_rows, sensor_function, layout, np.array(types, int), np.array(slot_of, int),
                        np.array(fl, float), cone, scale, margin, pairs, joints, damping,
                        not disabled(m, "eulerdamp") and bool(np.any(damping > 0)), INTEGRATORS[int(m.opt.integrator)])


def _pair_rows(m, kin, layout, contacts):
    """Per pair: (its slots' Rows, the slot of each row)."""
    out = []
    for ps in layout.pairs:
        prow, slots = Rows(), []
        for k in range(ps.start, ps.stop):
            before = len(prow)
            if not disabled(m, "constraint"):
                contact_rows(kin, [contacts[k]], prow, first_id=k)
            slots += [k] * (len(prow) - before)
        out.append((prow, slots))
    return out


def _cones(m, layout, types, slot_of):
    """(row_cone, row_scale) of RolloutParts: each slot's elliptic rows form one cone (solver.Problem.of)."""
    friction = {k: ps.pair.friction for ps in layout.pairs for k in range(ps.start, ps.stop)}
    cone, scale = np.zeros(len(types), int), np.ones(len(types))
    ratio = np.sqrt(max(1e-15, float(m.opt.impratio)))
    i = 0
    while i < len(types):
        if types[i] != ELLIPTIC:
            i += 1
            continue
        n = 1
        while i + n < len(types) and types[i + n] == ELLIPTIC and slot_of[i + n] == slot_of[i]:
            n += 1
        fr = friction[slot_of[i]]
        cone[i], cone[i + 1:i + n] = n, -1
        scale[i] = float(fr[0]) / ratio
        scale[i + 1:i + n] = [float(x) for x in fr[:n - 1]]
        i += n
    return cone, scale


def _outputs(m, rows: Rows, v):
    """(Jᵀ (nv x nrow: CasADi's column-major storage of it is J row by row, as the C reads it), a_ref, R,
    active) of every row."""
    if not len(rows):
        return ca.SX(m.nv, 0), ca.SX(0, 1), ca.SX(0, 1), ca.SX(0, 1)
    col = lambda xs: ca.vertcat(*[x if isinstance(x, ca.SX) else ca.SX(x) for x in xs])   # noqa: E731
    return ca.densify(rows.matrix()).T, rows.aref(v), col(rows.R), col(rows.active)
