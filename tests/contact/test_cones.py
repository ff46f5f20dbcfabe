"""contact/cones.py: the projection onto the friction cone K_μ and the distance to its dual."""
import numpy as np

from casadi_delassus.contact.cones import dual_cone_distance, project_cone


def test_cone_projection_is_a_projection():
    rng = np.random.default_rng(0)
    x, mu = rng.normal(size=300), rng.uniform(0.05, 1.2, 100)
    p = project_cone(x, mu)
    b, pb = x.reshape(-1, 3), p.reshape(-1, 3)
    assert np.all(np.hypot(pb[:, 0], pb[:, 1]) <= mu * pb[:, 2] + 1e-12)          # in K_μ
    assert np.allclose(project_cone(p, mu), p)                                       # idempotent
    assert np.allclose(np.sum((b - pb) * pb, axis=1), 0, atol=1e-12)                 # x − Πx ⊥ Πx
    # Moreau: x = Π_K(x) − Π_K*(−x), and the two parts are orthogonal
    assert np.allclose(p - project_cone(-x, 1 / mu), x)
    assert np.all(dual_cone_distance(-(b - pb).reshape(-1), mu) < 1e-12)
