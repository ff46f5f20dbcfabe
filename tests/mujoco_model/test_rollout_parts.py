"""mujoco_model/rollout_parts.py's broadphase for the compiled rollout: the pairs it skips (``_bounds``, MuJoCo's
bounding-sphere test at the pair's reach) never have a candidate within reach, on many random states of MuJoCo's
own geom poses, and it skips most of a humanoid's pairs; each pair's candidate function of its two geoms' poses
gives collision.py's candidates; each row's columns (the compiled solve's only ones) hold every nonzero of its
Jacobian."""
import numpy as np
import pytest

from casadi_delassus.mujoco_model import collision as C
from casadi_delassus.mujoco_model.model import MujocoModel
from casadi_delassus.mujoco_model.rollout_parts import _bounds, rollout_parts
from mujoco_model.mj_scenes import dropped_states, model, poses, random_qpos

mujoco = pytest.importorskip("mujoco")


def near(layout, bound, plane, xpos, xmat):
    """Per state and pair whether the pair passes the broadphase (the C's near_pair, in NumPy)."""
    out = np.zeros((len(xpos), len(layout.pairs)), bool)
    for i, ps in enumerate(layout.pairs):
        a, b = ps.pair.geom1, ps.pair.geom2
        d = xpos[:, b] - xpos[:, a]
        if plane[i]:
            out[:, i] = np.einsum("nk,nk->n", xmat[:, a].reshape(-1, 3, 3)[:, :, 2], d) <= bound[i]
        else:
            out[:, i] = (d * d).sum(axis=1) <= bound[i] ** 2
    return out


def within_reach(layout, dist):
    """Per state and pair whether one of its candidate slots is within its reach."""
    return np.stack([(dist[:, ps.start:ps.stop] <= ps.reach).any(axis=1) for ps in layout.pairs], axis=1)


@pytest.mark.parametrize("name, skipped", [("humanoid", 0.8), ("ant", 0.7), ("go2", 0.8)])
def test_broadphase_keeps_every_candidate_within_reach(name, skipped):
    """On 400 states (random joints, the robot dropped 5 cm into to 5 cm above its floor: body-body and floor
    contacts) every pair with a candidate within reach passes the broadphase, and at least ``skipped`` of the pairs
    are skipped over the states."""
    m = model(name)
    layout, rng = C.contact_layout(m), np.random.default_rng(3)
    Q = dropped_states(m, layout, 400, rng, depth=(-0.05, 0.05))
    xpos, xmat = poses(m, Q)
    dist = C.expand(layout, C.candidates_from_poses(m, layout, xpos, xmat))["dist"]
    reach, passes = within_reach(layout, dist), near(layout, *_bounds(m, layout), xpos, xmat)
    print(f"\n{name}: {reach.sum()} pairs within reach over the states, {1 - passes.mean():.2f} skipped")
    assert reach.sum() > 300, reach.sum()
    assert np.all(passes[reach]), np.argwhere(reach & ~passes)[:5]
    assert 1 - passes.mean() >= skipped, passes.mean()


def test_candidate_functions_equal_collision_candidates():
    """The humanoid's per-pair candidate functions (capsule-capsule, sphere-capsule, plane pairs) at MuJoCo's geom
    poses of 50 random states give collision.py's dist, gate and aux (to 1e-12)."""
    m = model("humanoid")
    parts = rollout_parts(MujocoModel(m), "f")
    layout = parts.layout
    xpos, xmat = poses(m, random_qpos(m, 50, np.random.default_rng(5)))
    ref = C.candidates_from_poses(m, layout, xpos, xmat)
    geoms = sorted({g for ps in layout.pairs for g in (ps.pair.geom1, ps.pair.geom2)})
    assert [(geoms[a], geoms[b]) for a, b in parts.pair_geoms] == [(ps.pair.geom1, ps.pair.geom2) for ps in layout.pairs]
    for n in range(len(xpos)):
        for i, (ps, f) in enumerate(zip(layout.pairs, parts.candidate_functions)):
            pose = [np.r_[xmat[n, g], xpos[n, g]] for g in (ps.pair.geom1, ps.pair.geom2)]
            dist, gate, aux = (np.asarray(x).ravel() for x in f(*pose))
            assert np.allclose(dist, ref["dist"][n, ps.start:ps.stop], rtol=0, atol=1e-12)
            assert np.allclose(gate, ref["gate"][n, ps.start:ps.stop], rtol=0, atol=1e-12)
            assert np.allclose(aux, ref["aux"][n, ps.aux], rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ["humanoid", "go2"])
def test_row_columns_hold_every_nonzero_of_the_rows(name):
    """On 30 random states each row's Jᵀ (the forward's base rows, every non-mesh pair's rows at MuJoCo's geom poses)
    is zero off the row's columns (RolloutParts.row_columns: the C's Hessian updates and its chain test read those
    alone; a column may hold zeros, e.g. a body-body contact's shared ancestors, whose twists cancel), most rows are
    not zero somewhere on the states, and no contact row's columns are every dof."""
    m = model(name)
    parts = rollout_parts(MujocoModel(m), "f")
    rng = np.random.default_rng(7)
    Q = random_qpos(m, 30, rng)
    xpos, xmat = poses(m, Q)
    seen = [False] * parts.nrow
    base = parts.nrow - sum(n for _, n in parts.pair_rows)
    for n, q in enumerate(Q):
        v = rng.normal(size=m.nv)
        J = np.zeros((parts.nrow, m.nv))
        J[:base] = np.asarray(parts.function(q, v, np.zeros(m.nu), np.zeros(m.nv))[3]).T
        for (first, rows), ps, f in zip(parts.pair_rows, parts.layout.pairs, parts.pair_functions):
            if f is not None and ps.rule != "mesh":
                pose = [np.r_[xmat[n, g], xpos[n, g]] for g in (ps.pair.geom1, ps.pair.geom2)]
                J[first:first + rows] = np.asarray(f(*pose, q, v)[0]).T
        for i, cols in enumerate(parts.row_columns):
            off = np.setdiff1d(np.arange(m.nv), cols)
            assert not np.any(J[i, off]), (i, cols, np.flatnonzero(J[i]))
            seen[i] |= bool(np.any(J[i]))
    assert sum(bool(x) for x in seen) > parts.nrow // 2, sum(bool(x) for x in seen)
    assert max(len(c) for c in parts.row_columns[base:]) < m.nv
