"""MuJoCo's contacts for an MjModel: a fixed set of candidates per colliding geom pair, as SX
of q, and the numeric rule that picks the contacts MuJoCo keeps, in MuJoCo's order.

The method is MuJoCo's narrowphase (MuJoCo's documentation, "Computation/Collision detection";
engine_collision_primitive.c: mjc_PlaneSphere, mjc_PlaneCapsule, mjc_PlaneCylinder,
mjc_PlaneBox, mjc_SphereSphere, mjc_SphereCapsule, mjc_CapsuleCapsule; engine_collision_convex.c:
mjc_PlaneConvex and the ellipsoid support point; engine_util_spatial.c: mju_makeFrame), for the
pairs mujoco_model/pairs.py lets through.  A pair's narrowphase reaches ``margin + gap``:

- plane-sphere: the sphere's lowest point, one candidate;
- plane-capsule: the two end spheres (+axis end first), each with the capsule axis as the
  frame's first tangent;
- plane-box: the 8 corners (corner i has +size along axis k where bit k of i is set); a corner
  counts when it is within reach and not above the centre (n · corner offset ≤ 0), the first 4
  such in corner order;
- plane-cylinder: the lowest rim point, the other cap's rim point below it, and two more rim
  points of the lower cap at ±120° (one depth), each kept within reach;
- plane-ellipsoid: the support point along −n;
- plane-mesh, through the convex hull (``mesh_graph``) and its polygons (``mesh_poly*``): the
  hull vertex lowest along n (the support point; on a tie, as where a face rests flat, the
  first in the hull graph's vertex order on a mesh of ``GRAPH_ORDER_MIN`` vertices or more, the
  lowest vertex id on smaller ones or without a graph: measured against MuJoCo 4.0.0, which
  picks that one in such states, tests/mujoco_model/test_collision.py) if within reach; then, of the hull polygons around it, the one whose
  normal is most against n (the first on a tie), pruned to its largest-area quadrilateral
  through the support vertex (hull4f: grow the fourth, third, second corner while the area
  grows); its other corners count when within reach and not above the mesh origin along n.
  Up to 4 contacts.  Hulls have hundreds of vertices each, so the SX gives
  the pair's poses and the vertices are evaluated numerically (``expand``), one dot product
  each; the quadrilaterals are computed once per model (they depend on the mesh alone);
- sphere-sphere: the centres' line; sphere-capsule: the sphere and the nearest axis point;
- capsule-capsule: the nearest points of the two axis segments (one candidate); for parallel
  axes, 4 candidates (each end of one axis against its nearest point on the other), of which
  the two ends of the axes' overlap count, in order along axis 1 (where the axes do not
  overlap, the nearest ends twice).  MuJoCo 4.0.0 takes the axes as parallel when
  sin²θ < 1e-8 and lists those two contacts: measured against it, not read (the sources read,
  engine_collision_primitive.c before 4.0, test |det| < mjMINVAL and keep the first two of the
  4 within reach instead; tests/mujoco_model/test_collision.py tells the two apart).

Positions are the midpoint between the surfaces (``dist`` apart, negative in penetration); a
frame's rows are the normal (from geom1 to geom2), then mju_makeFrame's tangents: the given
first tangent (capsule axis) or else the world y axis (z when |n_y| ≥ 0.5), made orthogonal to
the normal, and their cross product.  Each contact gets its pair's parameters; ``exclude`` is
dist ≥ margin (the gap band), as mj_setContact sets it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import casadi as ca
import numpy as np

from ..symbolic.scalar import add, column, cross, dot, mul, sub, vadd, vsub
from .geoms import geom_placements, geom_poses
from .pairs import MINVAL, collision_pairs

PARALLEL = 1e-8         # capsule-capsule: sin² of the angle below which MuJoCo 4.0.0 takes axes as parallel
GRAPH_ORDER_MIN = 10    # plane-mesh: meshes of this many vertices take the first lowest in their hull graph's order
# candidates per pair kind (a mesh has one per hull vertex) and the most contacts MuJoCo keeps
SLOTS = {"plane-box": 8, "plane-cylinder": 4, "plane-capsule": 2, "capsule-capsule": 5}
CAPS = {"plane-sphere": 1, "plane-capsule": 2, "plane-box": 4, "plane-cylinder": 4, "plane-ellipsoid": 1,
        "plane-mesh": 4, "sphere-sphere": 1, "sphere-capsule": 1, "capsule-capsule": 2}
MESH_AUX = 24           # a plane-mesh pair's numbers: frame (9), mesh rotation (9, rows), mesh origin, plane origin


# -- scalars: SX, Python floats or NumPy arrays (one value per state) -----------------------------
def _sqrt(x):
    """√x for SX, floats or arrays."""
    return ca.sqrt(x) if isinstance(x, ca.SX) else np.sqrt(x)


def _where(c, a, b):
    """c ? a : b for an SX, a Python or a NumPy condition."""
    if isinstance(c, ca.SX):
        return ca.if_else(c, a, b)
    return (a if c else b) if np.ndim(c) == 0 else np.where(c, a, b)


def _and(a, b):
    """a and b for SX, Python or NumPy conditions."""
    if isinstance(a, ca.SX) or isinstance(b, ca.SX):
        return ca.logic_and(a, b)
    return a & b if np.ndim(a) else a and b


def _where3(c, a, b):
    """``_where`` on each component of two 3-lists."""
    return [_where(c, x, y) for x, y in zip(a, b)]


def _scl(v, s):
    """v s for a 3-list v."""
    return [mul(x, s) for x in v]


def _mat_vec(R, v):
    """R v for R given by rows (mju_mulMatVec3's order)."""
    return [dot(row, v) for row in R]


def _col(R, k):
    """Column k of R given by rows: the geom's axis k in world coordinates."""
    return [R[0][k], R[1][k], R[2][k]]


def _clip(x, lo, hi):
    """mju_clip: lo below, hi above."""
    return _where(x < lo, lo, _where(x > hi, hi, x))


def _normalize(v, fallback=(1.0, 0.0, 0.0)):
    """v / |v| (mju_normalize3: times the reciprocal; ``fallback`` below mjMINVAL)."""
    norm = _sqrt(dot(v, v))
    inv = 1.0 / _where(norm < MINVAL, 1.0, norm)
    return _where3(norm < MINVAL, list(fallback), _scl(v, inv)), norm


def make_frame(normal, tangent=None):
    """mju_makeFrame: rows (normal, t₁, t₂) of a contact frame, 9 scalars, for a unit normal and
    a unit first tangent or None (then the world y axis, or z when |n_y| ≥ 0.5).  With a given
    tangent the normal is normalised again, as MuJoCo does: a tangent nearly along the normal
    leaves a small remainder that carries the normal's rounding (an upright capsule); the
    default tangent is never within 30° of the normal."""
    n = normal
    if tangent is None:
        inside = _and(n[1] < 0.5, n[1] > -0.5)
        tangent = [0.0, _where(inside, 1.0, 0.0), _where(inside, 0.0, 1.0)]
    else:
        n, _ = _normalize(n)
    t, _ = _normalize(vsub(tangent, _scl(n, dot(n, tangent))))
    return list(n) + t + cross(n, t)


# -- candidates -------------------------------------------------------------------------------------
@dataclass
class Candidate:
    """One candidate contact: its distance, position, normal, first tangent (None: MuJoCo's
    default) and gate (the candidate counts only at gate ≤ 0; None: always)."""
    dist: object
    pos: list
    normal: list
    tangent: list | None = None
    gate: object = None


def _plane_point(n, p1, c, r):
    """A sphere of radius r at c against the plane (n, p1) (mjraw_PlaneSphere)."""
    dist = sub(dot(vsub(c, p1), n), r)
    return Candidate(dist, vadd(c, _scl(n, -dist / 2 - r)), n)


def plane_sphere(plane, geom, size):
    """Candidates and numbers of a plane and a sphere, from their poses (R by rows, p) and the sphere's size."""
    (R1, p1), (_, p2) = plane, geom
    return [_plane_point(_col(R1, 2), p1, p2, size[0])], []


def plane_capsule(plane, geom, size):
    """mjc_PlaneCapsule: the +axis end sphere, then the −axis one."""
    (R1, p1), (R2, p2) = plane, geom
    n, axis = _col(R1, 2), _col(R2, 2)
    segment = _scl(axis, size[1])
    out = [_plane_point(n, p1, vadd(p2, segment), size[0]), _plane_point(n, p1, vsub(p2, segment), size[0])]
    for c in out:
        c.tangent = axis
    return out, []


def plane_box(plane, geom, size):
    """mjc_PlaneBox: the 8 corners, gated by their height over the centre along n."""
    (R1, p1), (R2, p2) = plane, geom
    n = _col(R1, 2)
    center = dot(vsub(p2, p1), n)
    out = []
    for i in range(8):
        local = [size[k] if i >> k & 1 else -size[k] for k in range(3)]
        corner = _mat_vec(R2, local)
        ldist = dot(n, corner)
        dist = add(center, ldist)
        out.append(Candidate(dist, vadd(vadd(corner, p2), _scl(n, -dist / 2)), n, gate=ldist))
    return out, []


def plane_cylinder(plane, geom, size):
    """mjc_PlaneCylinder: the lowest rim point, the other cap's below it, two more on the lower cap."""
    (R1, p1), (R2, p2) = plane, geom
    n, axis = _col(R1, 2), _col(R2, 2)
    radius, half = size[0], size[1]
    prjaxis = dot(n, axis)
    flip = prjaxis > 0                                # the axis made to point towards the plane
    axis, prjaxis = _where3(flip, _scl(axis, -1.0), axis), _where(flip, -prjaxis, prjaxis)
    dist0 = dot(vsub(p2, p1), n)
    vec = vsub(_scl(axis, prjaxis), n)                # towards the plane, across the axis
    len_sqr = dot(vec, vec)
    scale = radius / _sqrt(_where(len_sqr < MINVAL * MINVAL, 1.0, len_sqr))
    vec = _where3(len_sqr < MINVAL * MINVAL, _scl(_col(R2, 0), radius), _scl(vec, scale))
    prjvec = dot(vec, n)
    axis, prjaxis = _scl(axis, half), prjaxis * half
    side, _ = _normalize(cross(vec, axis))
    side = _scl(side, radius * np.sqrt(3.0) / 2)
    low = add(dist0, prjaxis)

    def point(d, *parts):
        p = p2
        for part in parts:
            p = vadd(p, part)
        return Candidate(d, vadd(p, _scl(n, -d * 0.5)), n)
    back = _scl(vec, -0.5)
    third = low - prjvec * 0.5
    return [point(low + prjvec, vec, axis), point(dist0 - prjaxis + prjvec, vec, _scl(axis, -1.0)),
            point(third, side, axis, back), point(third, _scl(side, -1.0), axis, back)], []


def plane_ellipsoid(plane, geom, size):
    """mjc_PlaneConvex for an ellipsoid: its support point along −n."""
    (R1, p1), (R2, p2) = plane, geom
    n = _col(R1, 2)
    local = [-dot(_col(R2, k), n) for k in range(3)]          # −n in the ellipsoid's axes
    scaled, _ = _normalize([local[k] * size[k] for k in range(3)])
    support = vadd(_mat_vec(R2, [scaled[k] * size[k] for k in range(3)]), p2)
    return [_plane_point(n, p1, support, 0.0)], []


def plane_mesh(plane, geom, size):
    """No candidate in SX: the pair's poses (``MESH_AUX`` numbers) for ``expand``."""
    (R1, p1), (R2, p2) = plane, geom
    return [], make_frame(_col(R1, 2)) + [x for row in R2 for x in row] + list(p2) + list(p1)


def mesh_vertex(plane, geom, vertex):
    """The candidate of one hull vertex (mesh coordinates: numbers or SX) of a plane-mesh pair, ``expand``'s
    formulas: point = R v + p, dist = n · (point − plane origin), pos = point − n dist / 2, gate = n · (point − p)."""
    (R1, p1), (R2, p2) = plane, geom
    n = _col(R1, 2)
    point = vadd(_mat_vec(R2, vertex), p2)
    dist = dot(vsub(point, p1), n)
    return Candidate(dist, vadd(point, _scl(n, -dist / 2)), n, gate=dot(vsub(point, p2), n))


def _sphere_sphere(c1, r1, c2, r2, fallback):
    """mjraw_SphereSphere: spheres (c1, r1) and (c2, r2); ``fallback`` is the normal where the
    centres coincide (``_fallback``)."""
    d = vsub(c2, c1)
    length = _sqrt(dot(d, d))
    dist = length - r1 - r2
    inv = 1.0 / _where(length < MINVAL, 1.0, length)
    n = _where3(length < MINVAL, fallback, _scl(d, inv))
    return Candidate(dist, vadd(_scl(n, r1 + dist / 2), c1), n)


def _fallback(R1, R2):
    """The geoms' z axes' normalised cross product (x where parallel): MuJoCo's normal for
    spheres whose centres coincide."""
    return _normalize(cross(_col(R1, 2), _col(R2, 2)))[0]


def sphere_sphere(first, second, size1, size2):
    """mjc_SphereSphere."""
    (R1, p1), (R2, p2) = first, second
    return [_sphere_sphere(p1, size1[0], p2, size2[0], _fallback(R1, R2))], []


def sphere_capsule(first, second, size1, size2):
    """mjc_SphereCapsule: the sphere against the capsule axis's nearest point, clipped to the segment."""
    (R1, p1), (R2, p2) = first, second
    axis = _col(R2, 2)
    x = _clip(dot(axis, vsub(p1, p2)), -size2[1], size2[1])
    return [_sphere_sphere(p1, size1[0], vadd(_scl(axis, x), p2), size2[0], _fallback(R1, R2))], []


def capsule_capsule(first, second, size1, size2):
    """mjc_CapsuleCapsule: the nearest points of skew axes (slot 0), the 4 end tests of parallel
    ones (slots 1-4); the pair's numbers: the parallel test (negative: parallel) and axis 2's
    +end and −end along axis 1."""
    (R1, p1), (R2, p2) = first, second
    a1, a2 = _scl(_col(R1, 2), size1[1]), _scl(_col(R2, 2), size2[1])
    dif = vsub(p1, p2)
    ma, mb, mc = dot(a1, a1), -dot(a1, a2), dot(a2, a2)
    u, v = -dot(a1, dif), dot(a2, dif)
    det = ma * mc - mb * mb
    test = det - PARALLEL * ma * mc
    det = _where(test < 0, 1.0, det)
    x1, x2 = (mc * u - mb * v) / det, (ma * v - mb * u) / det
    # MuJoCo's order: x1 clipped and x2 following it, then x2 clipped and x1 following it
    x2 = _where(x1 > 1, (v - mb) / mc, _where(x1 < -1, (v + mb) / mc, x2))
    x1 = _clip(x1, -1, 1)
    x1 = _where(x2 > 1, _clip((u - mb) / ma, -1, 1), _where(x2 < -1, _clip((u + mb) / ma, -1, 1), x1))
    x2 = _clip(x2, -1, 1)
    fallback = _fallback(R1, R2)

    def pair(y1, y2):
        return _sphere_sphere(vadd(_scl(a1, y1), p1), size1[0], vadd(_scl(a2, y2), p2), size2[0], fallback)
    ends = (u - mb) / ma, (u + mb) / ma               # axis 2's +end and −end along axis 1
    return [pair(x1, x2),
            pair(1.0, _clip((v - mb) / mc, -1, 1)), pair(-1.0, _clip((v + mb) / mc, -1, 1)),
            pair(_clip(ends[0], -1, 1), 1.0), pair(_clip(ends[1], -1, 1), -1.0)], [test, ends[0], ends[1]]


KINDS = {"plane-sphere": plane_sphere, "plane-capsule": plane_capsule, "plane-box": plane_box,
         "plane-cylinder": plane_cylinder, "plane-ellipsoid": plane_ellipsoid, "plane-mesh": plane_mesh,
         "sphere-sphere": sphere_sphere, "sphere-capsule": sphere_capsule, "capsule-capsule": capsule_capsule}


# -- the layout: slots, rules and the static data they need -----------------------------------------
@dataclass
class PairSlots:
    """A GeomPair's slots ``start:stop`` among all candidates, its rule ("each", "capsules",
    "mesh"), the most contacts it keeps, its reach (margin + gap), its numbers ``aux`` and, for
    a mesh, the hull's vertices (mesh coordinates) and, per vertex, the hull polygons around it:
    their normals (k x 3) and each one's other quadrilateral corners (slots of this pair)."""
    pair: object
    start: int
    stop: int
    rule: str
    cap: int
    reach: float
    aux: slice
    vertices: np.ndarray | None = None
    faces: list = field(default_factory=list)


@dataclass
class ContactLayout:
    """Every candidate slot of a model's GeomPairs (mujoco_model/pairs.py) in MuJoCo's contact
    order; ``analytic`` are the slots the SX gives (the rest are mesh vertices, ``expand``)."""
    pairs: list
    nslot: int
    naux: int
    analytic: np.ndarray


def _area(points, a, b, c, d):
    """Area of the quadrilateral a, b, c, d: half the norm of its diagonals' cross product."""
    return 0.5 * np.linalg.norm(np.cross(points[a] - points[c], points[b] - points[d]))


def _moved(points, corners, best, k):
    """(corners with corner k one on, its area) when that area is larger than ``best``, else None."""
    trial = list(corners)
    trial[k] = (trial[k] + 1) % len(points)
    area = _area(points, *trial)
    return (trial, area) if area > best else None


def quadrilateral(points, a):
    """hull4f: the corners (indices into ``points``, a polygon in order) of a large-area
    quadrilateral through corner ``a``, ``a`` first: from the next three, move the fourth corner
    one on while the area grows, each time then the third and the second as far as it grows."""
    n = len(points)
    corners = [a, (a + 1) % n, (a + 2) % n, (a + 3) % n]
    if n <= 4:
        return corners[:n]
    best = _area(points, *corners)
    while step := _moved(points, corners, best, 3):
        corners, best = step
        for k in (2, 1):
            while step := _moved(points, corners, best, k):
                corners, best = step
    return corners


def _hull(model, g):
    """(vertices (V x 3, mesh coordinates), faces per vertex) of geom g's mesh: the vertices of
    its convex hull in the hull graph's order (by vertex id below ``GRAPH_ORDER_MIN`` vertices; all
    of them without a hull graph) and,
    per vertex, (normals, other corners) of the hull polygons around it (``PairSlots``)."""
    mesh = int(model.geom_dataid[g])
    vadr = int(model.mesh_vertadr[mesh])
    points = np.asarray(model.mesh_vert[vadr:vadr + model.mesh_vertnum[mesh]], dtype=float)
    adr = int(model.mesh_graphadr[mesh])
    ids = np.arange(len(points)) if adr < 0 else np.asarray(
        model.mesh_graph[adr + 2 + model.mesh_graph[adr]:adr + 2 + 2 * model.mesh_graph[adr]], dtype=int)
    padr = int(model.mesh_polyadr[mesh])
    polys = [np.asarray(model.mesh_polyvert[model.mesh_polyvertadr[padr + k]:model.mesh_polyvertadr[padr + k]
                                            + model.mesh_polyvertnum[padr + k]], dtype=int)
             for k in range(int(model.mesh_polynum[mesh]))]
    if polys:                       # polygon corners are hull vertices; any not in the graph after its own
        ids = np.concatenate([ids, np.setdiff1d(np.concatenate(polys), ids)])
    if len(points) < GRAPH_ORDER_MIN:
        ids = np.sort(ids)
    slot = {int(v): i for i, v in enumerate(ids)}
    faces = []
    for v in ids:
        around = model.mesh_polymap[model.mesh_polymapadr[vadr + v]:model.mesh_polymapadr[vadr + v]
                                    + model.mesh_polymapnum[vadr + v]] if polys else []
        normals = np.array([model.mesh_polynormal[padr + k] for k in around], dtype=float).reshape(-1, 3)
        corners = []
        for k in around:
            face = polys[k]
            where = np.flatnonzero(face == v)
            quad = quadrilateral(points[face], int(where[0]) if len(where) else 0)
            corners.append(np.array([slot[int(face[c])] for c in quad[1:]], dtype=int))
        faces.append((normals, corners))
    return points[ids], faces


def contact_layout(model, label=None):
    """The ContactLayout of ``model`` (ModelErrors from mujoco_model/pairs.py)."""
    pairs, slots, analytic = [], 0, []
    aux = 0
    for p in collision_pairs(model, label):
        rule = {"capsule-capsule": "capsules", "plane-mesh": "mesh"}.get(p.kind, "each")
        n = SLOTS.get(p.kind, 1)
        naux = {"capsule-capsule": 3, "plane-mesh": MESH_AUX}.get(p.kind, 0)
        ps = PairSlots(p, slots, 0, rule, CAPS[p.kind], p.margin + p.gap, slice(aux, aux + naux))
        if rule == "mesh":
            ps.vertices, ps.faces = _hull(model, p.geom2)
            n = len(ps.vertices)
        else:
            analytic.extend(range(slots, slots + n))
        ps.stop = slots = slots + n
        aux += naux
        pairs.append(ps)
    return ContactLayout(pairs, slots, aux, np.array(analytic, dtype=int))


def _pair_candidates(model, ps, pose):
    """A pair's candidates and numbers from ``pose(g)`` = (R by rows, p) of a geom."""
    p = ps.pair
    g1, g2 = p.geom1, p.geom2
    size1, size2 = [float(x) for x in model.geom_size[g1]], [float(x) for x in model.geom_size[g2]]
    if p.kind.startswith("plane-"):
        return KINDS[p.kind](pose(g1), pose(g2), size2)
    return KINDS[p.kind](pose(g1), pose(g2), size1, size2)


def pair_candidates(model, ps, pose):
    """(dist, pos, frame, gate, aux) of one PairSlots as lists of scalars over its analytic slots (slot-major), from
    ``pose(g)`` = (R by rows, p) of a geom."""
    dist, pos, frame, gate = [], [], [], []
    cands, numbers = _pair_candidates(model, ps, pose)
    for c in cands:
        dist.append(c.dist)
        pos += c.pos
        frame += make_frame(c.normal, c.tangent)
        gate.append(-1.0 if c.gate is None else c.gate)
    return dist, pos, frame, gate, list(numbers)


def _flatten(layout, model, pose):
    """(dist, pos, frame, gate, aux) as lists of scalars over the analytic slots (slot-major)."""
    out = [], [], [], [], []
    for ps in layout.pairs:
        for whole, part in zip(out, pair_candidates(model, ps, pose)):
            whole += part
    return out


OUTPUTS = ("dist", "pos", "frame", "gate", "aux")


def candidates_function(model, robot, layout=None):
    """casadi.Function ``contact_candidates``: q (MuJoCo's qpos) → dist (K), pos (3K), frame
    (9K), gate (K) over the analytic slots, and the pairs' numbers aux; ``robot`` =
    robot_from_mjmodel(model, ...)."""
    layout = layout or contact_layout(model)
    q = ca.SX.sym("q", robot.nq)
    outs = [column(x) if x else ca.SX(0, 1) for x in _flatten(layout, model, sx_poses(model, robot, layout, q))]
    return ca.Function("contact_candidates", [q], outs, ["q"], list(OUTPUTS))


def sx_poses(model, robot, layout, q):
    """``pose(g)`` = (R by rows, p) of the layout's geoms as SX of q (lists of floats for geoms fixed to the world)."""
    geoms = sorted({g for ps in layout.pairs for g in (ps.pair.geom1, ps.pair.geom2)})
    poses = geom_poses(robot, geom_placements(model, robot, geoms), q)

    def pose(g):
        R, p = poses[g]
        if isinstance(R, np.ndarray):
            return [[float(x) for x in row] for row in R], [float(x) for x in p]
        return [[R[i, j] for j in range(3)] for i in range(3)], [p[i] for i in range(3)]
    return pose


def mesh_candidates(model, robot, layout, q, vertex):
    """Per plane-mesh pair of the layout (in its order), the Candidate of a hull vertex ``vertex`` (SX 3, mesh
    coordinates) as SX of q (``mesh_vertex``): one contact's position, normal and dist, whichever vertex ``_mesh``
    keeps."""
    pose = sx_poses(model, robot, layout, q)
    return [mesh_vertex(pose(ps.pair.geom1), pose(ps.pair.geom2), [vertex[k] for k in range(3)])
            for ps in layout.pairs if ps.rule == "mesh"]


def candidates_from_poses(model, layout, xpos, xmat):
    """The candidates of N states from geom world poses (MuJoCo's ``geom_xpos`` N x ngeom x 3 and
    ``geom_xmat`` N x ngeom x 9, or ours): {dist: N x K, pos: N x K x 3, frame: N x K x 9,
    gate: N x K, aux: N x A}, the same formulas as the SX, in NumPy."""
    xpos, xmat = np.asarray(xpos, float), np.asarray(xmat, float)
    n = len(xpos)

    def pose(g):
        return [[xmat[:, g, 3 * i + j] for j in range(3)] for i in range(3)], [xpos[:, g, i] for i in range(3)]

    def stack(values, width):
        arr = np.stack([np.broadcast_to(np.asarray(v, float), (n,)) for v in values], axis=1) if values else np.zeros((n, 0))
        return arr.reshape(n, -1, width) if width > 1 else arr
    dist, pos, frame, gate, aux = _flatten(layout, model, pose)
    return dict(dist=stack(dist, 1), pos=stack(pos, 3), frame=stack(frame, 9), gate=stack(gate, 1), aux=stack(aux, 1))


def candidates_at(function, q):
    """The candidate arrays of ``candidates_function`` at N states (N x nq), as
    ``candidates_from_poses`` gives them."""
    q = np.atleast_2d(np.asarray(q, float))
    outs = function.map(len(q))(q.T)
    return {name: np.asarray(out).T.reshape((len(q), -1, w) if w > 1 else (len(q), -1))
            for name, out, w in zip(OUTPUTS, outs, (1, 3, 9, 1, 1))}


# -- the numeric stage: mesh vertices, then MuJoCo's rule ---------------------------------------------
def expand(layout, cand):
    """Every slot's (dist N x S, pos N x S x 3, frame N x S x 9, gate N x S) from the candidate
    arrays: the analytic slots as given, a mesh pair's hull vertices from its poses (vertex
    point = R v + p, dist = n · (point − plane origin), pos = point − n dist / 2, gate =
    n · (point − p): above the mesh origin)."""
    n = len(cand["dist"])
    dist, gate = np.zeros((n, layout.nslot)), -np.ones((n, layout.nslot))
    pos, frame = np.zeros((n, layout.nslot, 3)), np.zeros((n, layout.nslot, 9))
    dist[:, layout.analytic], gate[:, layout.analytic] = cand["dist"], cand["gate"]
    pos[:, layout.analytic], frame[:, layout.analytic] = cand["pos"], cand["frame"]
    for ps in layout.pairs:
        if ps.rule != "mesh":
            continue
        a = cand["aux"][:, ps.aux]
        fr, R, p2, p1 = a[:, :9], a[:, 9:18].reshape(n, 3, 3), a[:, 18:21], a[:, 21:24]
        point = np.einsum("nij,vj->nvi", R, ps.vertices) + p2[:, None, :]
        d = np.einsum("nvi,ni->nv", point - p1[:, None, :], fr[:, :3])
        dist[:, ps.start:ps.stop] = d
        gate[:, ps.start:ps.stop] = np.einsum("nvi,ni->nv", point - p2[:, None, :], fr[:, :3])
        pos[:, ps.start:ps.stop] = point - 0.5 * d[:, :, None] * fr[:, None, :3]
        frame[:, ps.start:ps.stop] = fr[:, None, :]
    return dict(dist=dist, pos=pos, frame=frame, gate=gate, aux=cand["aux"])


def _each(slots, dist, gate, reach, cap):
    """The first ``cap`` of ``slots`` within reach whose gate is not positive."""
    return [s for s in slots if gate[s] <= 0 and dist[s] <= reach][:cap]


def select(layout, dist, pos, frame, gate, aux):
    """MuJoCo's contacts at one state: the slots it keeps, in its order, from that state's slot
    arrays (dist S, pos S x 3, frame S x 9, gate S, aux A); a pure function the C assembler
    mirrors."""
    out = []
    for ps in layout.pairs:
        slots = range(ps.start, ps.stop)
        if ps.rule == "each":
            out += _each(slots, dist, gate, ps.reach, ps.cap)
        elif ps.rule == "capsules":
            out += _each(_capsule_slots(ps, aux[ps.aux]), dist, gate, ps.reach, ps.cap)
        else:
            out += _mesh(ps, dist, gate, aux[ps.aux])
    return out


def _capsule_slots(ps, aux):
    """A capsule pair's slots to test: the nearest points of skew axes; for parallel axes the
    two ends of the overlap of axis 2 with axis 1, along axis 1 (an end of axis 1, slots 1 and
    2, or of axis 2, slots 3 and 4; both the nearest ends where they do not overlap)."""
    test, plus, minus = aux
    if test >= 0:
        return [ps.start]
    low = ps.start + (2 if min(plus, minus) <= -1 else 3 if plus < minus else 4)
    high = ps.start + (1 if max(plus, minus) >= 1 else 3 if plus > minus else 4)
    return [low, high]


def _mesh(ps, dist, gate, aux):
    """A plane-mesh pair's contacts: the support vertex, then the other corners of the
    quadrilateral of the polygon around it most against the plane normal."""
    local = dist[ps.start:ps.stop]
    best = int(np.argmin(local))
    if local[best] > ps.reach:
        return []
    out = [ps.start + best]
    normals, corners = ps.faces[best]
    if not len(normals):
        return out
    n, R = aux[:3], aux[9:18].reshape(3, 3)
    dots = normals @ (R.T @ n)                         # the polygons' normals against n, in mesh axes
    if dots.min() >= 1:
        return out
    for k in corners[int(np.argmin(dots))]:
        s = ps.start + int(k)
        if dist[s] <= ps.reach and gate[s] <= 0:
            out.append(s)
    return out


@dataclass
class Contacts:
    """Active contacts at one state, MuJoCo's ``data.contact`` fields: geom (C x 2), pos (C x 3),
    frame (C x 9), dist, includemargin, friction (C x 5), solref, solreffriction (C x 2), solimp
    (C x 5), dim, mu, exclude."""
    geom: np.ndarray
    pos: np.ndarray
    frame: np.ndarray
    dist: np.ndarray
    includemargin: np.ndarray
    friction: np.ndarray
    solref: np.ndarray
    solreffriction: np.ndarray
    solimp: np.ndarray
    dim: np.ndarray
    mu: np.ndarray
    exclude: np.ndarray


def contacts(layout, slots, arrays, i=0):
    """The Contacts of ``slots`` (``select``'s answer) at state i of the ``expand``ed arrays."""
    owner = np.empty(layout.nslot, dtype=int)
    for k, ps in enumerate(layout.pairs):
        owner[ps.start:ps.stop] = k
    pairs = [layout.pairs[owner[s]].pair for s in slots]

    def param(name, width=None):
        vals = [getattr(p, name) for p in pairs]
        return np.array(vals, float).reshape(len(pairs), width) if width else np.array(vals, float)
    dist = arrays["dist"][i, slots]
    margin = param("margin")
    exclude = dist >= margin                  # the gap band: listed, no constraint rows, so no mu
    return Contacts(np.array([[p.geom1, p.geom2] for p in pairs], dtype=int).reshape(-1, 2), arrays["pos"][i, slots],
                    arrays["frame"][i, slots], dist, margin, param("friction", 5), param("solref", 2),
                    param("solreffriction", 2), param("solimp", 5), np.array([p.condim for p in pairs], dtype=int),
                    np.where(exclude, 0.0, param("mu")), exclude)


def mujoco_contacts(data):
    """MuJoCo's ``data.contact`` (after mj_forward) as Contacts, for comparisons."""
    cons = [data.contact[i] for i in range(data.ncon)]
    return Contacts(*[np.array([getattr(c, name) for c in cons]) for name in Contacts.__dataclass_fields__])
