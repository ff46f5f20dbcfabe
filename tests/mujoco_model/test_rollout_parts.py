"""mujoco_model/rollout_parts.py's broadphase for the compiled rollout: the pairs it skips (``_bounds``, MuJoCo's
bounding-sphere test at the pair's reach) never have a candidate within reach, on many random states of MuJoCo's
own geom poses, and it skips most of a humanoid's pairs; each pair's candidate function of its two geoms' poses
gives collision.py's candidates."""
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
