"""Models and states for checking mujoco_model/ against MuJoCo itself: Gymnasium's and
robosuite-models' MJCF (a floor added as Menagerie's scene.xml adds it), random states with the
robot dropped onto the floor, and the comparison of our contacts with ``data.contact``."""
import importlib.metadata
from dataclasses import dataclass, field

import numpy as np
import pytest

from casadi_delassus.mujoco_model import collision as C

mujoco = pytest.importorskip("mujoco")

FIELDS = ("pos", "frame", "dist", "includemargin", "friction", "solref", "solreffriction", "solimp", "dim", "mu",
          "exclude")
ROBOSUITE = ("go2", "g1", "h1")


def installed(dist, rel):
    try:
        path = importlib.metadata.distribution(dist).locate_file(rel)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{dist} is not installed")
    return path


def gymnasium_model(name):
    """Gymnasium's ``<name>.xml`` (it has its own floor)."""
    return mujoco.MjModel.from_xml_path(str(installed("gymnasium", f"gymnasium/envs/mujoco/assets/{name}.xml")))


def robosuite_spec(name):
    """robosuite-models' robot ``name`` with a floor as Menagerie's scene.xml adds one (a plane in
    the worldbody), as an MjSpec."""
    spec = mujoco.MjSpec.from_file(str(installed("robosuite-models", f"robosuite_models/assets/robots/{name}/robot.xml")))
    spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 0.05], name="floor")
    return spec


def robosuite_model(name):
    """robosuite-models' ``name`` on a floor, its geoms touching the floor only (conaffinity 0 on
    the robot: as shipped, Go2, G1 and H1 have box, cylinder and mesh pairs between bodies, which
    are refused; test_pairs.py checks that)."""
    spec = robosuite_spec(name)
    for g in spec.geoms:
        if g.name != "floor":
            g.conaffinity = 0
    return spec.compile()


def model(name):
    return robosuite_model(name) if name in ROBOSUITE else gymnasium_model(name)


def _root_height(m):
    """The qpos index that moves the whole robot along world z: a free joint's z, or a slide
    joint along z on a child of the world (Gymnasium's planar walkers)."""
    for j in range(m.njnt):
        if m.body_parentid[m.jnt_bodyid[j]] != 0:
            continue
        if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE:
            return m.jnt_qposadr[j] + 2
        if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_SLIDE and abs(m.jnt_axis[j][2]) == 1:
            return m.jnt_qposadr[j]
    raise AssertionError("no root coordinate along z")


def random_qpos(m, n, rng):
    """n random qpos: free bodies anywhere in a 2 m square in any orientation, ball joints any
    orientation, hinges and slides uniform in their range (±π, ±1 without one)."""
    Q = np.tile(m.qpos0, (n, 1))
    for j in range(m.njnt):
        a, kind = m.jnt_qposadr[j], int(m.jnt_type[j])       # an int: pybind11's enums are not found by ``in``
        if kind in (int(mujoco.mjtJoint.mjJNT_FREE), int(mujoco.mjtJoint.mjJNT_BALL)):
            quat = rng.normal(size=(n, 4))
            if kind == mujoco.mjtJoint.mjJNT_FREE:
                Q[:, a:a + 2] = rng.uniform(-1, 1, (n, 2))
                a += 3
            Q[:, a:a + 4] = quat / np.linalg.norm(quat, axis=1)[:, None]
        else:
            wide = np.pi if kind == mujoco.mjtJoint.mjJNT_HINGE else 1.0
            lo, hi = m.jnt_range[j] if m.jnt_limited[j] else (-wide, wide)
            Q[:, a] = rng.uniform(lo, hi, n)
    return Q


def poses(m, Q):
    """MuJoCo's geom_xpos (N x ngeom x 3) and geom_xmat (N x ngeom x 9) at the states Q."""
    d = mujoco.MjData(m)
    xpos, xmat = [], []
    for q in Q:
        d.qpos[:] = q
        mujoco.mj_kinematics(m, d)
        xpos.append(d.geom_xpos.copy())
        xmat.append(d.geom_xmat.copy())
    return np.array(xpos), np.array(xmat)


def dropped_states(m, layout, n, rng, depth=(-0.02, 0.01)):
    """n random states (``random_qpos``) with the robot moved along z until its lowest floor
    candidate is ``depth`` (uniform) from the floor: some geoms in, some within margin."""
    Q = random_qpos(m, n, rng)
    planes = [ps for ps in layout.pairs if ps.pair.kind.startswith("plane")]
    arrays = C.expand(layout, C.candidates_from_poses(m, layout, *poses(m, Q)))
    lowest = np.min([arrays["dist"][:, ps.start:ps.stop].min(axis=1) for ps in planes], axis=0)
    Q[:, _root_height(m)] -= lowest - rng.uniform(*depth, n)
    return Q


@dataclass
class Agreement:
    """Our contacts against MuJoCo's over many states: states whose contact list differs (geom
    pairs or count), contacts compared, and the largest difference of each field."""
    states: int = 0
    differ: list = field(default_factory=list)
    contacts: int = 0
    worst: dict = field(default_factory=lambda: dict.fromkeys(FIELDS, 0.0))

    def __str__(self):
        errors = ", ".join(f"{k} {v:.1e}" for k, v in self.worst.items() if v)
        return (f"{self.states} states, {self.contacts} contacts, {len(self.differ)} states with other contacts; "
                f"largest differences: {errors or 'none'}")


def agreement(m, layout, Q, arrays=None):
    """Agreement of ``select`` on ``arrays`` (the expanded candidates of the states Q; default:
    from MuJoCo's own geom poses) with ``data.contact`` after mj_forward."""
    d = mujoco.MjData(m)
    if arrays is None:
        arrays = C.expand(layout, C.candidates_from_poses(m, layout, *poses(m, Q)))
    out = Agreement(len(Q))
    for k, q in enumerate(Q):
        d.qpos[:] = q
        mujoco.mj_forward(m, d)
        one = {name: a[k:k + 1] for name, a in arrays.items()}
        slots = C.select(layout, *(one[x][0] for x in ("dist", "pos", "frame", "gate", "aux")))
        ours, theirs = C.contacts(layout, slots, one), C.mujoco_contacts(d)
        if len(slots) != d.ncon or (d.ncon and (ours.geom != theirs.geom).any()):
            out.differ.append((k, ours.geom.tolist(), theirs.geom.tolist()))
            continue
        out.contacts += d.ncon
        for name in FIELDS if d.ncon else ():
            diff = np.abs(np.asarray(getattr(ours, name), float) - np.asarray(getattr(theirs, name), float))
            out.worst[name] = max(out.worst[name], float(diff.max()))
    return out


def check(result, tol=1e-12):
    """The same contacts at every state, every field within ``tol`` (absolute: positions are in
    metres of order 1, frames unit vectors), and some contacts to compare."""
    assert not result.differ, f"{result}; first: {result.differ[:3]}"
    assert result.contacts > 0, result
    assert max(result.worst.values()) <= tol, result


def drop_each(m, layout, Q, rng, depth=(-0.02, 0.01)):
    """Q with each free body moved along its floor's normal until its lowest candidate against
    that floor is ``depth`` (uniform) from it (one floor per body)."""
    Q = Q.copy()
    arrays = C.expand(layout, C.candidates_from_poses(m, layout, *poses(m, Q)))
    for ps in layout.pairs:
        if not ps.pair.kind.startswith("plane"):
            continue
        joint = m.body_jntadr[m.geom_bodyid[ps.pair.geom2]]
        a = m.jnt_qposadr[joint]
        normal = arrays["frame"][:, ps.start, :3]
        lowest = arrays["dist"][:, ps.start:ps.stop].min(axis=1)
        Q[:, a:a + 3] -= normal * (lowest - rng.uniform(*depth, len(Q)))[:, None]
    return Q
