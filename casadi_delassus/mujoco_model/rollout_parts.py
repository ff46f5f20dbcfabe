"""What the compiled rollout (``cd.mujoco_rollout``) evaluates per forward, as one casadi.Function
of (qpos, qvel, ctrl, qfrc_applied) for one MjModel, and the static tables its C loop reads:

- the smooth part (smooth.py): M with armature and qfrc_smooth, and the actuators' velocity
  derivative implicitfast takes (actuators.velocity_derivative);
- the world pose of every geom of a contact pair (MuJoCo's geom_xmat by rows and geom_xpos, 12
  numbers a geom), and per pair a function of its two geoms' poses giving its candidate slots
  (collision.py: dist, gate, the pair's numbers aux), called by the C only for pairs within
  reach of MuJoCo's bounding-sphere test (``pair_bound``: most of a humanoid's 126 pairs are
  apart at any time; evaluating every pair's candidates each forward was two thirds of its
  forward's instructions);
- the rows of equality, friction loss and joint limits (constraints.py; limits with their
  ``active`` flag), with J, a_ref and R per row;
- sensors.py's sensordata as a function of (qpos, qvel, qacc), evaluated at the forward before
  each step (touch sensors are refused: they need the contacts' forces);
- per contact pair, a function of its two geoms' poses and (qpos, qvel) giving its slots' rows (the
  slot's position, frame and distance are the candidates' SX of the poses, so only the Jacobian's
  twists repeat the kinematics), called by the C only for pairs with a kept contact (most of a
  robot's pairs are far from the floor at any time: evaluating every slot's rows each step cost the
  Go2 rollout 4x its time);
- per plane-mesh pair, a function of (qpos, qvel, vertex) giving the rows of one contact at a hull
  vertex (mesh coordinates; collision.mesh_candidates), and the hull tables (``MeshTables``): the C
  finds the vertices collision._mesh keeps (the support vertex, the quadrilateral of the polygon
  around it most against the normal) and calls it once per kept contact, up to 4.

The C's contact slots (``nslot``): the analytic slots first, in the layout's order (the forward's
dist and gate fill them), then 4 per mesh pair (its kept contacts, in _mesh's order).  The C
loop picks MuJoCo's active contacts with collision.select's rule (ported), keeps a slot's
rows where it is selected and dist < includemargin (collision.contacts' exclude), and solves
MuJoCo's convex problem over the kept rows (solver.py's primal Newton).  What the compiled path
does not do yet is refused by name (``check``): touch sensors
(features.py refuses the rest: the implicit integrator, activations, ...)."""
from __future__ import annotations

from dataclasses import dataclass

import casadi as ca
import numpy as np

from ..errors import ModelError
from ..model.mjcf import mujoco_module
from . import actuators, collision, sensors
from .constraints import ELLIPTIC, LIMIT_JOINT, Contact, Kinematics, Rows, constraint_rows, contact_rows
from .flags import disabled
from .smooth import smooth

RULES = {"each": 0, "capsules": 1, "mesh": 2}
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
class MeshTables:
    """The hulls of the plane-mesh pairs for the C: per mesh pair (pair index, first vertex, vertices, bounding
    radius: no vertex is farther from the mesh origin); the vertices (V x 3, mesh coordinates); per vertex the range
    ``vertex_polys[v]:vertex_polys[v + 1]`` of its polygons: their normals (mesh coordinates) and the other corners
    of their quadrilateral through it (vertex indices within its mesh, -1: fewer than 3)."""
    pairs: list
    vertices: np.ndarray
    vertex_polys: np.ndarray
    poly_normals: np.ndarray
    poly_corners: np.ndarray


def mesh_tables(layout):
    """The MeshTables of a ContactLayout's plane-mesh pairs."""
    pairs, vertices, offsets, normals, corners = [], [], [0], [], []
    first = 0
    for i, ps in enumerate(layout.pairs):
        if ps.rule != "mesh":
            continue
        v = np.asarray(ps.vertices, float)
        pairs.append((i, first, len(v), float(np.sqrt((v * v).sum(axis=1)).max()) if len(v) else 0.0))
        vertices.append(v)
        first += len(v)
        for ns, cs in ps.faces:
            for n, c in zip(ns, cs):
                normals.append(n)
                corners.append([*c, *[-1] * (3 - len(c))])
            offsets.append(offsets[-1] + len(ns))
    return MeshTables(pairs, np.concatenate(vertices) if vertices else np.zeros((0, 3)), np.array(offsets, int),
                      np.array(normals, float).reshape(-1, 3), np.array(corners, int).reshape(-1, 3))


def c_slots(layout):
    """Per pair, (first C slot, C slots): the analytic slots first in the layout's order, then ``cap`` per mesh pair."""
    analytic = sum(ps.stop - ps.start for ps in layout.pairs if ps.rule != "mesh")
    out, a, m = [], 0, analytic
    for ps in layout.pairs:
        if ps.rule == "mesh":
            out.append((m, ps.cap))
            m += ps.cap
        else:
            out.append((a, ps.stop - ps.start))
            a += ps.stop - ps.start
    return out


@dataclass
class RolloutParts:
    """The traced functions and the tables of the C loop (module docstring)."""
    function: ca.Function
    candidate_functions: list       # per pair: Function (pose1, pose2) -> (dist, gate, aux) of its slots, or None
    pair_geoms: list                # per pair: its two geoms' indices into the forward's geom_pose (12 a geom)
    pair_bound: np.ndarray          # per pair: the broadphase bound (module docstring, ``_bounds``)
    pair_plane: np.ndarray          # per pair: 1 where geom1 is a plane (the bound is then a height over it)
    pair_functions: list            # per pair: Function (pose1, pose2, qpos, qvel) -> (Jᵀ, a_ref, R) of its rows
    #                               (a mesh pair's: (qpos, qvel, vertex)), or None
    base_functions: list            # per base row: Function (qpos, qvel) -> (a_ref, R) of a joint limit, or None
    pair_rows: list                 # per pair: (first row, rows); a mesh pair's: 4 blocks of one contact's rows
    sensor_function: ca.Function | None     # (qpos, qvel, qacc) -> sensordata, None without sensors
    layout: collision.ContactLayout
    row_type: np.ndarray
    row_slot: np.ndarray            # -1: not a contact row
    row_frictionloss: np.ndarray
    row_cone: np.ndarray            # an elliptic cone's rows on its first row, -1 on its others, 0 elsewhere
    row_scale: np.ndarray           # contact.mu on a cone's first row, friction[j - 1] on its row j
    row_columns: list               # per row: the dofs its Jacobian entries can touch (not constant zeros), ascending
    slot_margin: np.ndarray         # includemargin per C slot
    pairs: list                     # per pair (first C slot, C slots, RULES code, cap, first aux number)
    mesh: MeshTables
    joints: list                    # per joint (type, qpos address, dof address)
    damping: np.ndarray             # per dof, 0 where the damper is disabled
    implicit_damping: bool          # Euler's implicit damping applies (some damping, eulerdamp on)
    integrator: str                 # INTEGRATORS' name

    @property
    def nrow(self):
        return len(self.row_type)

    @property
    def nslot(self):
        """The C's contact slots (module docstring)."""
        return len(self.slot_margin)


def _contact(m, pair, pos, frame, dist):
    """The Contact of GeomPair ``pair`` at SX pos (3), frame (3 x 3, rows) and dist."""
    return Contact(int(m.geom_bodyid[pair.geom1]), int(m.geom_bodyid[pair.geom2]), pos, frame, dist, int(pair.condim),
                   pair.friction, pair.solref, pair.solreffriction, pair.solimp, float(pair.margin))


def _mesh_contact(m, pair, cand):
    """The Contact of a mesh vertex's Candidate (collision.mesh_candidates)."""
    frame = collision.make_frame(cand.normal)
    frame = ca.reshape(ca.vertcat(*frame), 3, 3).T if any(isinstance(x, ca.SX) for x in frame) else \
        np.array(frame, float).reshape(3, 3)
    return _contact(m, pair, ca.vertcat(*cand.pos), frame, cand.dist)


def rollout_parts(model, name="mjforward"):
    """The RolloutParts of MujocoModel ``model``, its function called ``name`` (``check`` first)."""
    check(model)
    m = model.m
    layout = collision.contact_layout(m, repr(model.name))
    q, v, u, f = (ca.SX.sym(n, k) for n, k in (("qpos", m.nq), ("qvel", m.nv), ("ctrl", m.nu), ("qfrc_applied", m.nv)))
    s = smooth(model, q, v, u, f)
    geoms, pose_out, local = _local_poses(m, model, layout, q)
    candidate_functions = _candidate_functions(m, layout, local, name)
    kin = Kinematics(m, q)
    rows = constraint_rows(kin, v)
    outs, base_functions = _base_outputs(m, rows, q, v, name)
    slot_of, types, fl, columns = [-1] * len(rows), list(rows.type), list(rows.frictionloss), _columns(rows)
    pair_functions, pair_rows = [], []
    vertex = ca.SX.sym("vertex", 3)
    meshes = iter(collision.mesh_candidates(m, model.robot, layout, q, vertex))
    slots = c_slots(layout)
    for i, ps in enumerate(layout.pairs):
        first, n = slots[i]
        if ps.rule == "mesh":
            prow, one = _contact_rows(m, kin, [_mesh_contact(m, ps.pair, next(meshes))], first)
            blocks = [first + c for c in range(n) for _ in one]         # n copies of one contact's rows
            inputs, names = [q, v, vertex], ["qpos", "qvel", "vertex"]
        else:
            syms, pose = local[i]
            dist, pos, frame, _, _ = collision.pair_candidates(m, ps, pose)
            prow, blocks = _contact_rows(m, kin, [_contact(m, ps.pair, _column(pos[3 * k:3 * k + 3]), ca.reshape(
                _column(frame[9 * k:9 * k + 9]), 3, 3).T, dist[k]) for k in range(n)], first)
            inputs, names = [*syms, q, v], ["pose1", "pose2", "qpos", "qvel"]
        copies = len(blocks) // max(1, len(prow))
        pair_rows.append((len(types), len(blocks)))
        types, fl, slot_of = types + prow.type * copies, fl + prow.frictionloss * copies, slot_of + blocks
        columns += _columns(prow) * copies
        pair_functions.append(ca.Function(f"{name}_pair{i}", inputs, [ca.densify(x) for x in _outputs(m, prow, v)[:3]],
                                          names, ["JT", "aref", "R"]) if len(prow) else None)
    pair_of = [i for i, _ in sorted(((i, first + k) for i, (first, n) in enumerate(slots) for k in range(n)),
                                    key=lambda ik: ik[1])]        # the pair of each C slot
    cone, scale = _cones(m, [layout.pairs[i].pair for i in pair_of], types, slot_of)
    dv = ca.vertcat(*actuators.velocity_derivative(m, q, v, u))     # implicitfast's actuator damping
    function = ca.Function(name, [q, v, u, f], [ca.densify(x) for x in (s.M, s.qfrc_smooth, pose_out, *outs, dv)],
                           ["qpos", "qvel", "ctrl", "qfrc_applied"],
                           ["M", "qfrc_smooth", "geom_pose", "JT", "aref", "R", "active", "actuator_dv"])
    margin = np.array([layout.pairs[pair_of[k]].pair.margin for k in range(len(pair_of))], float)
    pairs = [(first, n, RULES[ps.rule], ps.cap, ps.aux.start) for ps, (first, n) in zip(layout.pairs, slots)]
    joints = [(int(m.jnt_type[j]), int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j])) for j in range(m.njnt)]
    damping = np.zeros(m.nv) if disabled(m, "damper") else np.asarray(m.dof_damping, float)
    a = ca.SX.sym("qacc", m.nv)
    sensor_function = ca.Function(f"{name}_sensors", [q, v, a], [ca.densify(sensors.sensordata(kin, v, a))],
                                  ["qpos", "qvel", "qacc"], ["sensordata"]) if m.nsensordata else None
    pair_geoms = [(geoms.index(ps.pair.geom1), geoms.index(ps.pair.geom2)) for ps in layout.pairs]
    bound, plane = _bounds(m, layout)
    return RolloutParts(function, candidate_functions, pair_geoms, bound, plane, pair_functions, base_functions, pair_rows, sensor_function, layout, np.array(types, int), np.array(slot_of, int),
                        np.array(fl, float), cone, scale, columns, margin, pairs, mesh_tables(layout), joints, damping,
                        not disabled(m, "eulerdamp") and bool(np.any(damping > 0)), INTEGRATORS[int(m.opt.integrator)])


def _columns(rows: Rows):
    """Per row of ``rows``, the dofs where its Jacobian entry is not a constant zero (ascending): the C's columns of
    the row (a row touches its bodies' ancestor dofs only), fixed at trace time instead of found in J each forward."""
    return [tuple(c for c in range(J.size2()) if not J[0, c].is_zero()) for J in rows.J]


def _column(xs):
    """The SX column of a list of SX and numbers (0 x 1 when empty)."""
    return ca.vertcat(*[x if isinstance(x, ca.SX) else ca.SX(x) for x in xs]) if len(xs) else ca.SX(0, 1)


def _local_poses(m, model, layout, q):
    """(the layout's geoms, their poses as one SX column of q (R by rows, p: 12 a geom), per pair its two pose
    symbols (pose1, pose2) and ``pose(g)`` = (R by rows, p) of its geoms in them): the pair's candidate and row
    functions take the forward's poses instead of repeating its kinematics; a geom fixed to the world keeps its
    pose as numbers."""
    pose = collision.sx_poses(m, model.robot, layout, q)
    geoms = sorted({g for ps in layout.pairs for g in (ps.pair.geom1, ps.pair.geom2)})
    flat = lambda g: [x for row in pose(g)[0] for x in row] + list(pose(g)[1])     # noqa: E731
    local = []
    for ps in layout.pairs:
        syms = {ps.pair.geom1: ca.SX.sym("pose1", 12), ps.pair.geom2: ca.SX.sym("pose2", 12)}

        def in_syms(g, syms=syms):
            R, p = pose(g)
            if not isinstance(p[0], ca.SX):
                return R, p
            x = syms[g]
            return [[x[3 * r + c] for c in range(3)] for r in range(3)], [x[9 + r] for r in range(3)]
        local.append(((syms[ps.pair.geom1], syms[ps.pair.geom2]), in_syms))
    return geoms, _column([x for g in geoms for x in flat(g)]), local


def _candidate_functions(m, layout, local, name):
    """Per pair the Function ``<name>_cand<i>`` of (pose1, pose2) (``_local_poses``) giving its slots' dist and gate
    and its numbers aux, None where it has none."""
    functions = []
    for i, ps in enumerate(layout.pairs):
        syms, pose = local[i]
        dist, _, _, gate, aux = collision.pair_candidates(m, ps, pose)
        functions.append(ca.Function(f"{name}_cand{i}", list(syms), [_column(dist), _column(gate), _column(aux)],
                                     ["pose1", "pose2"], ["dist", "gate", "aux"]) if dist or aux else None)
    return functions


# the broadphase bound's slack: a pair is skipped only when clearly beyond reach (rounding never decides it)
BOUND_SLACK = 1e-6


def _bounds(m, layout):
    """(bound, plane) per pair: MuJoCo's bounding-sphere test (mj_collideGeoms) with the pair's reach (margin + gap)
    for its margin: a pair whose geoms' centres are farther apart than geom_rbound1 + geom_rbound2 + reach has no
    candidate within reach (every candidate's dist is a distance between points of the two geoms); a plane's pair
    (plane first) one whose geom centre is higher over the plane than its geom_rbound + reach."""
    bound, plane = np.zeros(len(layout.pairs)), np.zeros(len(layout.pairs), int)
    for i, ps in enumerate(layout.pairs):
        g1, g2 = ps.pair.geom1, ps.pair.geom2
        plane[i] = ps.pair.kind.startswith("plane-")
        b = (0.0 if plane[i] else float(m.geom_rbound[g1])) + float(m.geom_rbound[g2]) + ps.reach
        bound[i] = b * (1 + BOUND_SLACK) + BOUND_SLACK
    return bound, plane


def _contact_rows(m, kin, contacts, first):
    """(the Rows of ``contacts``, the C slot of each row: ``first`` + the contact's index)."""
    prow, slots = Rows(), []
    for k, c in enumerate(contacts):
        before = len(prow)
        if not disabled(m, "constraint"):
            contact_rows(kin, [c], prow, first_id=first + k)
        slots += [first + k] * (len(prow) - before)
    return prow, slots


def _cones(m, slot_pairs, types, slot_of):
    """(row_cone, row_scale) of RolloutParts: each C slot's elliptic rows form one cone (solver.Problem.of);
    ``slot_pairs``: the GeomPair of each C slot."""
    friction = [p.friction for p in slot_pairs]
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


def _base_outputs(m, rows: Rows, q, v, name):
    """(``_outputs`` of the base rows with the joint limits' a_ref and R left 0, per base row the Function
    ``<name>_base<i>`` of (qpos, qvel) giving a limit's a_ref and R, None for the others): the C evaluates them
    where the limit is active only (a humanoid's 34 limit rows, most of them inactive at any time, were a tenth of
    its forward's instructions)."""
    JT, aref, R, active = _outputs(m, rows, v)
    functions = [ca.Function(f"{name}_base{i}", [q, v], [aref[i], R[i]], ["qpos", "qvel"], ["aref", "R"])
                 if kind == LIMIT_JOINT else None for i, kind in enumerate(rows.type)]
    for i, f in enumerate(functions):
        if f is not None:
            aref[i], R[i] = 0, 0
    return (JT, aref, R, active), functions


def _outputs(m, rows: Rows, v):
    """(Jᵀ (nv x nrow: CasADi's column-major storage of it is J row by row, as the C reads it), a_ref, R,
    active) of every row."""
    if not len(rows):
        return ca.SX(m.nv, 0), ca.SX(0, 1), ca.SX(0, 1), ca.SX(0, 1)
    return ca.densify(rows.matrix()).T, rows.aref(v), _column(rows.R), _column(rows.active)
