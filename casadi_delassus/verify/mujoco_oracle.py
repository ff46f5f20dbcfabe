"""MuJoCo as the outside oracle for MJCF models: its own compile of the file, its own kinematics,
mass matrix and dynamics, with q = ``data.qpos`` and v = ``data.qvel`` as the MJCF loader's
Robot takes them.  ``model`` below is an MJCF path or an ``MjModel``; every function runs it
with constraints (contacts, equalities, limits, friction loss), passive forces (springs,
damping, gravity compensation, fluid) and actuators disabled, gravity as the model has it.

- ``delassus(model, specs, qpos)``: J M⁻¹ Jᵀ, M from ``mj_fullM`` (armature included), J from
  ``mj_jac`` at the constraint's point rotated into its frame: our ``LINK:3d[@x,y,z]`` rows (the
  point's velocity along the frame's axes), ``LINK:6d`` rows ([linear; angular] in the frame),
  and link-to-link ``A|B:3d[@a[;b]]`` / ``A|B:6d`` rows (A's minus B's, along A's axes).  A frame is a MuJoCo site or body of that name (a body: MuJoCo's body frame,
  ``xpos``/``xmat``; an unnamed body is ``body<id>``, as the loader names it).
- ``forward(model, qpos, qvel, tau)``: ``qacc`` of ``mj_forward`` with ``qfrc_applied`` = τ.
- ``inverse(model, qpos, qvel, qacc)``: ``qfrc_inverse`` of ``mj_inverse`` (M qacc + bias).
- ``constrained(model, specs, qpos, qvel, tau, k, R=None)``: (v̇, λ) of M v̇ + bias = τ + Jᵀλ
  with J v̇ + J̇v = k (hard) or the soft Gauss principle with compliance R (reference.py's
  conventions), from MuJoCo's M, ``qfrc_bias``, J and J̇v (``mj_jacDot``, plus the frame's
  rotation: k is the acceleration of the rows' own velocity, d/dt (J v)).

- ``soft_equality(model, specs, qpos, qvel, tau)``: MuJoCo's own solver on its ``connect``
  equality constraints (to the world), with the k and compliance R that pose the same problem
  to our soft solvers.

``MujocoSession`` answers ``check`` (see verify/oracles.py).  Needs the ``mujoco`` package (the
``mjcf`` and ``test`` extras)."""
from __future__ import annotations

import copy
import functools
import re
import weakref

import numpy as np

from ..errors import ConstraintError, DelassusError
from ..model.mjcf import body_id, compile_mjcf, mujoco_module, site_id


@functools.lru_cache(maxsize=16)
def _compiled(path=None, text=None):
    return dynamics_only(compile_mjcf(path, text))


def _model(model):
    """The dynamics-only MjModel of an MJCF path (compiled once per path) or of an MjModel (a
    copy, unless it is one ``dynamics_only`` made)."""
    mujoco = mujoco_module()
    if not isinstance(model, mujoco.MjModel):
        return _compiled(str(model))
    return model if model in _DYNAMICS_ONLY else dynamics_only(model)


_DYNAMICS_ONLY = weakref.WeakSet()


def dynamics_only(model, equality=False):
    """A copy of ``model`` whose forward dynamics is M v̇ = τ − bias: every constraint, passive
    force and actuator disabled (gravity kept as the model has it); ``equality``: its equality
    constraints kept, solved by Newton's method to convergence."""
    mujoco = mujoco_module()
    out = copy.deepcopy(model)
    d = mujoco.mjtDisableBit
    for bit in (d.mjDSBL_CONTACT, d.mjDSBL_LIMIT, d.mjDSBL_FRICTIONLOSS, d.mjDSBL_SPRING, d.mjDSBL_DAMPER,
                d.mjDSBL_ACTUATION) + (() if equality else (d.mjDSBL_CONSTRAINT, d.mjDSBL_EQUALITY)):
        out.opt.disableflags |= int(bit)
    out.body_gravcomp[:] = 0
    out.opt.density = out.opt.viscosity = 0.0
    out.opt.wind[:] = 0
    if equality:
        out.opt.solver, out.opt.tolerance, out.opt.iterations = mujoco.mjtSolver.mjSOL_NEWTON, 0.0, 100
        out.opt.jacobian = mujoco.mjtJacobian.mjJAC_DENSE
    else:
        _DYNAMICS_ONLY.add(out)
    return out


def _forward(model, qpos, qvel=None, tau=None):
    """(mujoco, MjData after mj_forward at qpos, qvel (default 0), qfrc_applied = τ (default 0))."""
    mujoco = mujoco_module()
    data = mujoco.MjData(model)
    data.qpos[:] = np.asarray(qpos, float).reshape(-1)
    if qvel is not None:
        data.qvel[:] = np.asarray(qvel, float).reshape(-1)
    if tau is not None:
        data.qfrc_applied[:] = np.asarray(tau, float).reshape(-1)
    mujoco.mj_forward(model, data)
    return mujoco, data


def _full_mass_matrix(mujoco, model, data):
    M = np.zeros((model.nv, model.nv))
    try:
        mujoco.mj_fullM(model, data, M)             # newer MuJoCo: from MjData (data.M)
    except TypeError:
        mujoco.mj_fullM(model, M, data.qM)          # earlier: the sparse qM
    return M


def mass_matrix(model, qpos):
    """MuJoCo's joint-space inertia M(qpos) (``mj_fullM``; ``dof_armature`` on its diagonal)."""
    model = _model(model)
    mujoco, data = _forward(model, qpos)
    return _full_mass_matrix(mujoco, model, data)


def _frame(mujoco, model, data, name):
    """(body id, origin, rotation with the frame's axes as columns) of a body or site, world.
    A name is a body's first (the loader names a site that shares it ``<name>_site``)."""
    body = body_id(model, name)
    if body >= 0:
        return body, data.xpos[body].copy(), data.xmat[body].reshape(3, 3).copy()
    site = site_id(model, name)
    if site < 0:
        raise ConstraintError(f"MuJoCo has no body or site named {name!r}")
    return int(model.site_bodyid[site]), data.site_xpos[site].copy(), data.site_xmat[site].reshape(3, 3).copy()


_SPEC = re.compile(r"^(?P<links>[^:@]+):(?P<kind>3d|6d)(?P<world>-world)?(?:@(?P<points>[^@]+))?$")


def parse_spec(spec):
    """(kind, [(frame name, point in its frame)], pair) of ``LINK:3d[@x,y,z]``, ``LINK:6d``,
    ``A|B:3d[@a[;b]]`` or ``A|B:6d``; a ConstraintError for any other spec."""
    m = _SPEC.match(spec.strip())
    names = [n.strip() for n in m["links"].split("|")] if m else []
    try:
        points = [np.array([float(t) for t in p.split(",")]) for p in m["points"].split(";")] if m and m["points"] else []
    except ValueError:
        m = None
    if not m or any(p.shape != (3,) for p in points) or len(names) > 2 or len(points) > len(names) \
            or (points and m["kind"] == "6d") or (m["world"] and len(names) == 2):
        raise ConstraintError(f"the MuJoCo oracle takes LINK:3d[-world][@x,y,z], LINK:6d[-world], A|B:3d[@a[;b]] "
                              f"and A|B:6d constraints, not {spec!r}")
    points += [np.zeros(3)] * (len(names) - len(points))
    return m["kind"] + (m["world"] or ""), list(zip(names, points)), len(names) == 2


def _rows(mujoco, model, data, specs, drift=True):
    """(J, J̇v) of the constraint rows at the state in ``data`` (after mj_forward); J̇v only for
    constraints to the world (``drift=False``: None)."""
    rows, drifts = [], []
    v = data.qvel
    for spec in specs:
        kind, ends, pair = parse_spec(spec)
        if pair and drift:
            raise ConstraintError(f"the MuJoCo oracle has no drift J̇v for the link-to-link constraint {spec!r}")
        world = kind.endswith("-world")
        kind = kind[:2]
        frames = [_frame(mujoco, model, data, name) for name, _ in ends]
        R = np.eye(3) if world else frames[0][2]        # -world rows: MuJoCo's world axes as they are
        # a 3d row's point on each end; a 6d row's is A's origin, on both bodies
        points = [o + Rf @ p for (_, o, Rf), (_, p) in zip(frames, ends)] if kind == "3d" else [frames[0][1]] * len(ends)
        jacs = []
        for (body, _, _), point in zip(frames, points):
            jacp, jacr = np.zeros((3, model.nv)), np.zeros((3, model.nv))
            mujoco.mj_jac(model, data, jacp, jacr, point, body)
            jacs.append((jacp, jacr))
        jacp, jacr = (jacs[0][0] - jacs[1][0], jacs[0][1] - jacs[1][1]) if pair else jacs[0]
        rows += [R.T @ jacp] + ([R.T @ jacr] if kind == "6d" else [])
        if drift:
            dp, dr = np.zeros((3, model.nv)), np.zeros((3, model.nv))
            mujoco.mj_jacDot(model, data, dp, dr, points[0], frames[0][0])
            # d/dt (Rᵀ J v) = Rᵀ J v̇ + Rᵀ J̇ v − ω × (Rᵀ J v), ω the frame's angular velocity in it
            # (world axes: R = I does not turn, ω × … drops out)
            omega = np.zeros(3) if world else R.T @ (jacr @ v)
            drifts += [R.T @ (dp @ v) - np.cross(omega, R.T @ (jacp @ v))] + ([R.T @ (dr @ v)] if kind == "6d" else [])
    return np.vstack(rows), (np.concatenate(drifts) if drift else None)


def jacobian(model, specs, qpos):
    """The stacked rows of the constraints ``specs`` (``parse_spec``) at qpos, from MuJoCo."""
    model = _model(model)
    mujoco, data = _forward(model, qpos)
    return _rows(mujoco, model, data, specs, drift=False)[0]


def delassus(model, specs, qpos):
    """MuJoCo's J M⁻¹ Jᵀ for the constraints ``specs`` at ``qpos``."""
    model = _model(model)
    mujoco, data = _forward(model, qpos)
    J = _rows(mujoco, model, data, specs, drift=False)[0]
    return J @ np.linalg.solve(_full_mass_matrix(mujoco, model, data), J.T)


def forward(model, qpos, qvel, tau):
    """MuJoCo's qacc at (qpos, qvel) with ``qfrc_applied`` = τ (``mj_forward``)."""
    return _forward(_model(model), qpos, qvel, tau)[1].qacc.copy()


def inverse(model, qpos, qvel, qacc):
    """MuJoCo's inverse dynamics M qacc + bias (``mj_inverse``'s ``qfrc_inverse``)."""
    model = _model(model)
    mujoco, data = _forward(model, qpos, qvel)
    data.qacc[:] = np.asarray(qacc, float).reshape(-1)
    mujoco.mj_inverse(model, data)
    return data.qfrc_inverse.copy()


def constrained(model, specs, qpos, qvel, tau, k, R=None):
    """(v̇, λ): hard constraints J v̇ + J̇v = k (R None) by the KKT system, or soft ones with
    compliance R, λ = −R⁻¹ (J v̇ + J̇v − k); M v̇ + bias = τ + Jᵀλ, all from MuJoCo."""
    model = _model(model)
    mujoco, data = _forward(model, qpos, qvel)
    M = _full_mass_matrix(mujoco, model, data)
    J, drift = _rows(mujoco, model, data, specs)
    b = np.asarray(tau, float).reshape(-1) - data.qfrc_bias
    k = np.asarray(k, float).reshape(-1)
    if R is None:
        m = J.shape[0]
        sol = np.linalg.solve(np.block([[M, -J.T], [J, np.zeros((m, m))]]), np.concatenate([b, k - drift]))
        return sol[:model.nv], sol[model.nv:]
    Rinv = 1.0 / np.asarray(R, float).reshape(-1)
    vdot = np.linalg.solve(M + J.T @ (Rinv[:, None] * J), b - J.T @ (Rinv * (drift - k)))
    return vdot, -Rinv * (J @ vdot + drift - k)


def soft_equality(model, specs, qpos, qvel, tau):
    """MuJoCo's own constraint solver on the model's active ``connect`` equality constraints,
    each to the world and given, in their order, as our ``LINK:3d@a`` spec: (qacc, λ, k, R) with
    λ MuJoCo's ``efc_force`` in our rows, and k, R such that our soft dynamics at (k, compliance
    R) pose MuJoCo's problem.  MuJoCo minimizes ½‖a − a₀‖²_M + ½ (J_w a − aref)ᵀ R⁻¹ (J_w a −
    aref) (``efc_aref``, ``efc_R``; no J̇v) with rows along the world's axes; ours are along the
    frame's, R_Aᵀ J_w, so k = R_Aᵀ aref + J̇v, and R (equal on a connect's three rows) is kept."""
    mujoco = mujoco_module()
    solved = dynamics_only(model if isinstance(model, mujoco.MjModel) else compile_mjcf(str(model)), equality=True)
    mujoco, data = _forward(solved, qpos, qvel, tau)
    rows = [i for i in range(data.nefc) if data.efc_type[i] == mujoco.mjtConstraint.mjCNSTR_EQUALITY]
    if len(rows) != 3 * len(specs) or any(solved.eq_type[data.efc_id[i]] != mujoco.mjtEq.mjEQ_CONNECT for i in rows):
        raise ConstraintError(f"the model's active equality constraints are not {len(specs)} connects to the world")
    J, drift = _rows(mujoco, solved, data, specs)
    turn = [_frame(mujoco, solved, data, parse_spec(s)[1][0][0])[2].T for s in specs]
    local = [np.concatenate([T @ x[rows][3 * i:3 * i + 3] for i, T in enumerate(turn)])
             for x in (data.efc_aref, data.efc_force)]
    return data.qacc.copy(), local[1], local[0] + drift, data.efc_R[rows].copy()


def model_source(robot):
    """What MuJoCo compiles for an MJCF robot: its file, or the text it was loaded from; a
    DelassusError for a robot not read from MJCF."""
    text, path = getattr(robot, "model_text", None), getattr(robot, "model_file", None)
    if getattr(robot, "model_format", None) != "mjcf" or (text is None and path is None):
        raise DelassusError(f"robot {robot.name!r} was not read from an MJCF model: MuJoCo has no model of it")
    return (None, text) if text is not None else (str(path), None)


class MujocoSession:
    """MuJoCo's answers for one MJCF robot and constraint set, for ``check`` (verify/oracles.py):
    Λ⁻¹ (``delassus``), Λ, Λ⁻¹λ and the damped inverse from its J M⁻¹ Jᵀ; aba's v̇ = its qacc;
    rnea's τ = its inverse dynamics; hard and soft dynamics from ``constrained`` (constraints to
    the world only).  Other constraints (joints, K inputs, random K) have no answer: the
    ``not_applicable`` exception says so (``check`` shows n/a)."""

    DELASSUS_OUTPUTS = ("delassus", "osim", "delassus_apply", "delassus_explicit_apply", "damped_inverse_apply",
                        "damped_inverse_explicit")

    def __init__(self, robot, constraints, not_applicable=LookupError):
        mujoco = mujoco_module()
        path, text = model_source(robot)
        self.model = _compiled(path, text)
        self.not_applicable = not_applicable
        if (self.model.nq, self.model.nv) != (robot.nq, robot.nv):
            raise DelassusError(f"MuJoCo's model of {robot.name!r} has nq {self.model.nq}, nv {self.model.nv}; "
                                f"ours has nq {robot.nq}, nv {robot.nv}: the two readings differ")
        self.specs = constraints.specs
        try:
            self.pairs = any(parse_spec(s)[2] for s in self.specs)
            self.unsupported = None
        except ConstraintError as exc:
            self.unsupported = str(exc)
        self.notes = [f"MuJoCo {mujoco.__version__}'s own compile of {path or 'the model text'}"]

    def prepare(self, x):
        return x

    def _check_rows(self):
        if self.unsupported:
            raise self.not_applicable(self.unsupported)

    def delassus(self, x):
        self._check_rows()
        return delassus(self.model, self.specs, x["q"])

    def expected(self, name, x):
        if name == "tau" and "a" in x:
            return inverse(self.model, x["q"], x["v"], x["a"])
        if name == "vdot" and "k" not in x:
            return forward(self.model, x["q"], x["v"], x["tau"])
        if name in self.DELASSUS_OUTPUTS:
            D = self.delassus(x)
            if name == "delassus":
                return D
            if name == "osim":
                return np.linalg.inv(D)
            if name.startswith("delassus"):
                return D @ x["lam"]
            return np.linalg.solve(np.diag(1 / x["R"]) + D, x["lam"])
        if name in ("vdot", "lam"):
            self._check_rows()
            if self.pairs:
                raise self.not_applicable("no drift J̇v of link-to-link constraints here (nor in the NumPy reference)")
            out = constrained(self.model, self.specs, x["q"], x["v"], x["tau"], x["k"], x.get("R"))
            return out[0 if name == "vdot" else 1]
        raise self.not_applicable(f"MuJoCo has no counterpart of output {name!r}")
