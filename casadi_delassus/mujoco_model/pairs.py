"""Which geom pairs of an MjModel can collide, in the order MuJoCo lists their contacts, and
the contact parameters each pair gets.

The method is MuJoCo's collision driver (MuJoCo's documentation, "Computation/Collision
detection"; engine_collision_driver.c: mj_collision, mj_broadphase, filterBodyPair,
filterCollisionPair, mj_contactParam, mj_setContact; engine_core_constraint.c / engine_core_util.c:
mj_assignMargin, mj_assignRef, mj_assignImp, mj_assignFriction).  What is decided once per model:

- Body pairs: two bodies welded together (``body_weldid``) never collide, nor (unless
  ``mjDSBL_FILTERPARENT``) a body and the one its weld root hangs from, when neither is the
  world; bodies welded to the world never collide with each other; ``<exclude>`` removes a
  body pair (``exclude_signature``); the bodies' contype/conaffinity (OR over their geoms)
  must match.  Within a body pair, every geom pair whose contype/conaffinity match, unless an
  explicit ``<pair>`` names the same two geoms.
- Explicit ``<pair>``s collide whatever the filters say, with their own parameters.
- Parameters: an explicit pair's own (condim, friction, solref, solreffriction, solimp, margin,
  gap).  Otherwise the geom of higher ``priority`` gives condim, solref, solimp and friction; at
  equal priority condim and friction are the maxima, solimp is mixed by solmix (weight
  s₁/(s₁+s₂)), solref too when both are standard (positive) and the minimum when not;
  margin and gap are the geoms' sums.  Friction is at least ``mjMINMU``; ``mjENBL_OVERRIDE``
  replaces margin, solref, solreffriction, solimp and friction by the ``o_`` options.
- Order: MuJoCo's broadphase sorts body pairs by signature (lower body id << 16 | higher), an
  explicit pair goes before the body pair of its signature.  Within a body pair the geom pairs
  follow the geoms' order (the lower body's geom first) when both bodies have one geom or
  ``mjDSBL_MIDPHASE`` is set; otherwise the midphase (a bounding-volume tree per body) finds
  them and MuJoCo sorts its contacts by their (geom1, geom2).  A contact's first geom is the
  one of lower geom type; a pair's own contacts keep their narrowphase order.

What a state decides (the bounding-sphere and box filters, which only drop pairs farther apart
than margin + gap) is left to the narrowphase candidates (mujoco_model/collision.py): they give
no active contact there either.  A pair kind without candidates here is refused by name, never
ignored: whether it could ever come within reach is not provable in general.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ModelError
from ..model.mjcf import _model_name, body_name, mujoco_module

MINMU = 1e-5            # mjMINMU: the least friction coefficient MuJoCo keeps
MINVAL = 1e-15          # mjMINVAL
TYPES = ("plane", "hfield", "sphere", "capsule", "ellipsoid", "cylinder", "box", "mesh", "sdf")
# the narrowphase kinds mujoco_model/collision.py generates, as (lower type, higher type)
SUPPORTED = {("plane", t) for t in ("sphere", "capsule", "ellipsoid", "cylinder", "box", "mesh")} | {
    ("sphere", "sphere"), ("sphere", "capsule"), ("capsule", "capsule")}


@dataclass(frozen=True)
class GeomPair:
    """Two geoms that can collide: ``geom1`` and ``geom2`` as MuJoCo's contacts name them (the
    lower geom type first; the contact normal points from geom1 to geom2), the explicit pair
    behind it (-1: none) and the parameters every contact between them gets."""
    geom1: int
    geom2: int
    kind: str
    pair: int
    condim: int
    friction: tuple
    solref: tuple
    solreffriction: tuple
    solimp: tuple
    margin: float           # MuJoCo's includemargin: the contact is excluded at dist ≥ margin
    gap: float              # the narrowphase reaches margin + gap
    mu: float               # contact.mu as MuJoCo's constraint stage sets it: friction[0] / sqrt(impratio), 0 at condim 1


def geom_label(model, g):
    """A geom's name, or ``geom<id>`` for an unnamed one."""
    mujoco = mujoco_module()
    return mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g) or f"geom{g}"


def _describe(model, g):
    return f"'{geom_label(model, g)}' ({TYPES[int(model.geom_type[g])]})"


def _enabled(model, flag):
    return bool(model.opt.enableflags & int(flag))


def _disabled(model, flag):
    return bool(model.opt.disableflags & int(flag))


def _check_model(model, label):
    """ModelErrors for what the driver does that we do not: flexes, sleeping bodies."""
    mujoco = mujoco_module()
    if model.nflex:
        raise ModelError(f"model {label!r}: flex contacts are not supported ({model.nflex} flexes)")
    if _enabled(model, mujoco.mjtEnableBit.mjENBL_SLEEP):
        raise ModelError(f"model {label!r}: sleeping bodies (the 'sleep' enable flag) are not supported")


def _body_pair_allowed(model, b1, b2, filterparent, excluded):
    """MuJoCo's body-level filters for bodies b1 < b2 (weld, parent, static, contype, and the
    ``excluded`` signatures)."""
    w1, w2 = int(model.body_weldid[b1]), int(model.body_weldid[b2])
    if w1 == w2:                                      # welded together, both static included
        return False
    p1, p2 = int(model.body_weldid[model.body_parentid[w1]]), int(model.body_weldid[model.body_parentid[w2]])
    if filterparent and w1 and w2 and (w1 == p2 or w2 == p1):
        return False
    if not (model.body_contype[b1] & model.body_conaffinity[b2] or model.body_contype[b2] & model.body_conaffinity[b1]):
        return False
    return (b1 << 16) + b2 not in excluded


def _geoms_match(model, g1, g2):
    return bool(model.geom_contype[g1] & model.geom_conaffinity[g2] or model.geom_contype[g2] & model.geom_conaffinity[g1])


def _mixed(model, g1, g2):
    """mj_contactParam for two geoms: (condim, friction(3), solref, solimp)."""
    pr1, pr2 = int(model.geom_priority[g1]), int(model.geom_priority[g2])
    if pr1 != pr2:
        g = g1 if pr1 > pr2 else g2
        return (int(model.geom_condim[g]), np.array(model.geom_friction[g], float),
                np.array(model.geom_solref[g], float), np.array(model.geom_solimp[g], float))
    s1, s2 = float(model.geom_solmix[g1]), float(model.geom_solmix[g2])
    if s1 >= MINVAL and s2 >= MINVAL:
        mix = s1 / (s1 + s2)
    else:
        mix = 0.5 if s1 < MINVAL and s2 < MINVAL else 0.0 if s1 < MINVAL else 1.0
    r1, r2 = np.array(model.geom_solref[g1], float), np.array(model.geom_solref[g2], float)
    solref = mix * r1 + (1 - mix) * r2 if r1[0] > 0 and r2[0] > 0 else np.minimum(r1, r2)
    solimp = mix * np.array(model.geom_solimp[g1], float) + (1 - mix) * np.array(model.geom_solimp[g2], float)
    return (max(int(model.geom_condim[g1]), int(model.geom_condim[g2])),
            np.maximum(model.geom_friction[g1], model.geom_friction[g2]), solref, solimp)


def _make_pair(model, g1, g2, k):
    """The GeomPair of geoms g1, g2 (explicit pair k, or -1), in MuJoCo's geom order."""
    mujoco = mujoco_module()
    if model.geom_type[g1] > model.geom_type[g2]:
        g1, g2 = g2, g1
    if k >= 0:
        condim, friction = int(model.pair_dim[k]), np.array(model.pair_friction[k], float)
        solref, solimp = np.array(model.pair_solref[k], float), np.array(model.pair_solimp[k], float)
        solreffriction = np.array(model.pair_solreffriction[k], float)
        margin, gap = float(model.pair_margin[k]), float(model.pair_gap[k])
    else:
        condim, fri, solref, solimp = _mixed(model, g1, g2)
        friction = np.array([fri[0], fri[0], fri[1], fri[2], fri[2]])
        solreffriction = np.zeros(2)
        margin = float(model.geom_margin[g1] + model.geom_margin[g2])
        gap = float(model.geom_gap[g1] + model.geom_gap[g2])
    if _enabled(model, mujoco.mjtEnableBit.mjENBL_OVERRIDE):
        o = model.opt
        margin, solref, solreffriction = float(o.o_margin), np.array(o.o_solref, float), np.array(o.o_solref, float)
        solimp, friction = np.array(o.o_solimp, float), np.array(o.o_friction, float)
    friction = np.maximum(MINMU, friction)
    kind = f"{TYPES[int(model.geom_type[g1])]}-{TYPES[int(model.geom_type[g2])]}"
    return GeomPair(g1, g2, kind, k, condim, tuple(friction), tuple(solref), tuple(solreffriction), tuple(solimp),
                    margin, gap, float(friction[0] / np.sqrt(model.opt.impratio)) if condim > 1 else 0.0)


def _refuse(model, label, g1, g2):
    """ModelError naming two geoms whose kind has no candidates here."""
    t1, t2 = sorted((TYPES[int(model.geom_type[g1])], TYPES[int(model.geom_type[g2])]), key=TYPES.index)
    b1, b2 = (body_name(model, int(model.geom_bodyid[g])) for g in (g1, g2))
    raise ModelError(f"model {label!r}: geoms {_describe(model, g1)} and {_describe(model, g2)} on bodies "
                     f"{b1!r} and {b2!r} can collide; {t1}-{t2} contacts are not supported")


def _check_kind(model, label, g1, g2):
    """True for a supported kind, False for one MuJoCo never collides (plane-plane,
    plane-hfield, hfield-hfield), a ModelError for the rest; geoms on mocap bodies refused."""
    types = sorted((TYPES[int(model.geom_type[g1])], TYPES[int(model.geom_type[g2])]), key=TYPES.index)
    if types[1] in ("plane", "hfield"):
        return False
    for g in (g1, g2):
        b = int(model.geom_bodyid[g])
        if model.body_mocapid[b] >= 0:
            raise ModelError(f"model {label!r}: geom {_describe(model, g)} on the mocap body "
                             f"{body_name(model, b)!r} can collide; contacts of mocap bodies are not supported")
    if tuple(types) not in SUPPORTED:
        _refuse(model, label, g1, g2)
    return True


def collision_pairs(model, label=None):
    """The GeomPairs of ``model`` in MuJoCo's contact order (see the module docstring); a
    ModelError naming the first pair of a kind mujoco_model/collision.py does not generate."""
    mujoco = mujoco_module()
    label = label or _model_name(model) or "mjcf"
    if _disabled(model, mujoco.mjtDisableBit.mjDSBL_CONSTRAINT) or _disabled(model, mujoco.mjtDisableBit.mjDSBL_CONTACT):
        return []
    _check_model(model, label)
    filterparent = not _disabled(model, mujoco.mjtDisableBit.mjDSBL_FILTERPARENT)
    excluded = {int(s) for s in model.exclude_signature}
    midphase = not _disabled(model, mujoco.mjtDisableBit.mjDSBL_MIDPHASE)
    explicit = {frozenset((int(model.pair_geom1[k]), int(model.pair_geom2[k]))) for k in range(model.npair)}
    keyed = []
    for k in range(model.npair):
        g1, g2 = int(model.pair_geom1[k]), int(model.pair_geom2[k])
        if _check_kind(model, label, g1, g2):
            keyed.append(((int(model.pair_signature[k]), 0, k, 0), _make_pair(model, g1, g2, k)))
    for b1 in range(model.nbody):
        for b2 in range(b1 + 1, model.nbody):
            if not _body_pair_allowed(model, b1, b2, filterparent, excluded):
                continue
            tree = midphase and min(model.body_bvhadr[b1], model.body_bvhadr[b2]) >= 0 and max(
                model.body_geomnum[b1], model.body_geomnum[b2]) > 1
            for g1 in range(model.body_geomadr[b1], model.body_geomadr[b1] + model.body_geomnum[b1]):
                for g2 in range(model.body_geomadr[b2], model.body_geomadr[b2] + model.body_geomnum[b2]):
                    if frozenset((g1, g2)) in explicit or not _geoms_match(model, g1, g2):
                        continue
                    if _check_kind(model, label, g1, g2):
                        pair = _make_pair(model, g1, g2, -1)
                        within = (pair.geom1, pair.geom2) if tree else (g1, g2)
                        keyed.append((((b1 << 16) + b2, 1) + within, pair))
    return [p for _, p in sorted(keyed, key=lambda kp: kp[0])]
