"""Robot models: the ``Robot`` tree and its loaders (URDF, SDF with closed loops, spatial_v2
JSON, MJCF, synthetic mechanisms, the named registry), and the one place that decides which
loader reads what (``load_robot``)."""
from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from xml.etree import ElementTree

from ..errors import ModelError, unknown_name
from .robot import Body, Frame, Joint, Robot, RobotLike

MODEL_SUFFIXES = (".urdf", ".sdf", ".json", ".xml")
# what ``load_robot`` accepts, for help texts and errors
FORMATS = ("a registry name (see `robots`), a model file: URDF (.urdf, or .xml with a <robot> root), "
           "SDF (.sdf), Featherstone spatial_v2 JSON (.json), MJCF (.xml with a <mujoco> root, loaded with "
           "MuJoCo when the mjcf extra is installed), or a synthetic spec such as chain:n=20, "
           "stem:n=10,branches=4,length=7, kchain:k=5, ladder:rungs=4")
_ROOTS = {"robot": "urdf", "sdf": "sdf", "mujoco": "mjcf"}


def load_robot(spec: RobotLike, floating_base: bool | None = None, mimic: bool = False) -> Robot:
    """A robot from a registry name (``talos``), a model file (``.urdf``, ``.sdf``,
    spatial_v2 ``.json``, ``.xml``: URDF or MJCF by its root element), a URDF document given as
    a string (its text, starting with ``<``: named by its ``<robot name>``), or a synthetic spec
    (``chain:n=20``).  ``floating_base`` (True/False) puts a URDF model on a free base or fixes
    its root to the world; None keeps the model's own choice (URDF files float, a registry
    robot as its entry says).  Other formats set their base in the model: asking for the other
    one is a ModelError.  An SDF model that closes loops gets the scenario ``loops``.

    Every robot records ``model_format`` (urdf, sdf, spatial_v2, mjcf, synthetic), and a
    model read from text its ``model_text``, for the outside oracles (verify/oracles.py).

    ``mimic=True`` couples the URDF ``<mimic>`` joints as Pinocchio 4's ``mimic=True`` does
    (model/mimic.py): ``robot.coupling`` maps the reduced q and v (nq and nv without the mimic
    joints) to the full ones, and only the ``naive`` algorithm accepts such a robot."""
    robot: Robot = _load(spec, floating_base)
    if mimic:
        from .mimic import coupling
        robot = copy.copy(robot) if robot is spec else robot     # a caller's Robot stays uncoupled
        robot.coupling = coupling(robot)
    return robot


def _load(spec, floating_base):
    """``load_robot`` without the mimic coupling."""
    if isinstance(spec, Robot):
        return _with_base(spec, floating_base, "a Robot object", spec.floating_base)
    from . import registry
    from .synthetic import is_synthetic, parse_synthetic

    if not isinstance(spec, (str, Path)):
        raise ModelError(f"a robot is a name, a path, a model's text or a Robot, not {type(spec).__name__}")
    spec = str(spec)
    if spec.lstrip().startswith("<"):
        return _from_text(spec, floating_base)
    if spec in registry.registry():
        robot = registry.load_registered(spec, floating_base=floating_base)
        robot.model_format = "sdf" if registry.model_path(spec).suffix.lower() == ".sdf" else "urdf"
        return _with_base(robot, floating_base, f"registry robot {spec!r}", registry.floats(spec))
    if spec.lower().endswith(MODEL_SUFFIXES) or on_disk(spec, Path.exists):
        return _from_file(Path(spec), floating_base)
    from .synthetic_contact import is_contact_synthetic, parse_contact_synthetic
    if is_contact_synthetic(spec) or is_synthetic(spec):
        robot, default = (parse_contact_synthetic if is_contact_synthetic(spec) else parse_synthetic)(spec)
        robot.scenarios = {"default": default}
        robot.model_format = "synthetic"
        return _with_base(robot, floating_base, f"synthetic spec {spec!r}", robot.floating_base,
                          hint=" (set floating=0 or floating=1 in the spec where it takes one)")
    raise ModelError(unknown_name("robot", spec, registry.names()) + f" (give {FORMATS})")


def _from_file(path, floating_base):
    if not on_disk(path):
        raise ModelError(f"model file not found: {path}")
    fmt = file_format(path)
    if fmt == "spatial_v2":
        from .spatial_v2 import load_spatial_v2_json
        robot = load_spatial_v2_json(path)
    elif fmt == "urdf":
        from .urdf import load_urdf
        robot = load_urdf(path, floating_base=True if floating_base is None else floating_base)
    elif fmt == "sdf":
        from .sdf import load_sdf
        robot = load_sdf(path)
    else:
        from .mjcf import load_mjcf
        robot = load_mjcf(path)
    # an SDF model's loop-closing joints, an MJCF model's equality constraints
    robot.scenarios = {n: getattr(robot, n) for n in ("loops", "equality") if getattr(robot, n, None)}
    robot.model_file = path.resolve()       # names its output folder (runtime/artifact.py)
    robot.model_format = fmt
    return _with_base(robot, floating_base, f"model file {path}", True if fmt == "urdf" else robot.floating_base)


def on_disk(spec, test=Path.is_file):
    """``test`` (Path.is_file, Path.exists) of the path ``spec``; False for a name no file can have (too long, a NUL
    byte), on which Path's tests raise."""
    try:
        return test(Path(spec))
    except (OSError, ValueError):
        return False


def file_format(path):
    """urdf, sdf, spatial_v2 or mjcf: by the suffix for .urdf, .sdf and .json, by the root
    element for anything else (a URDF named .xml, an MJCF model)."""
    suffix = path.suffix.lower()
    if suffix in (".urdf", ".sdf"):
        return suffix[1:]
    if suffix == ".json":
        return "spatial_v2"
    root = _root_tag(path, path)
    if root not in _ROOTS:
        raise ModelError(f"unsupported model file {path}: its root element is <{root}>; expected a URDF "
                         f"(<robot>), SDF (<sdf>) or MJCF (<mujoco>) document, or a .urdf/.sdf/.json file")
    return _ROOTS[root]


def _root_tag(source, label):
    """The root element's tag of an XML file or file object, reading no further than its start."""
    try:
        for _, elem in ElementTree.iterparse(source, events=("start",)):
            return elem.tag
    except ElementTree.ParseError as exc:
        raise ModelError(f"malformed model file {label}: {exc}") from None
    raise ModelError(f"malformed model file {label}: no root element")


def _from_text(text, floating_base):
    """A model given as its XML text: URDF (``<robot>``) or MJCF (``<mujoco>``).  Leading
    whitespace is dropped (an XML declaration must come first), so it does not name another
    model."""
    import io
    text = text.lstrip()
    root = _root_tag(io.BytesIO(text.encode()), "given as text")
    digest = hashlib.sha256(text.encode()).hexdigest()
    if root == "robot":
        from .urdf import load_urdf_string
        robot = load_urdf_string(text, floating_base=True if floating_base is None else floating_base)
        fmt = "urdf"
    elif root == "mujoco":
        from .mjcf import load_mjcf_string
        robot, fmt = load_mjcf_string(text), "mjcf"
    else:
        raise ModelError(f"a model given as text must be a URDF (<robot>) or MJCF (<mujoco>) document, "
                         f"not <{root}>")
    robot.scenarios = {}
    robot.model_format, robot.model_text, robot.model_sha256 = fmt, text, digest
    return _with_base(robot, floating_base, "the model text", True if fmt == "urdf" else robot.floating_base)


def _with_base(robot, floating_base, what, default, hint=""):
    """``robot`` with the base asked for (``floating_base`` None: the model's own, ``default``).
    Where that is not the default, ``robot.base_variant`` ("fixed" or "floating") says so: it
    names the output folder (runtime/artifact.py), so the two variants never share files.  A
    format that sets its base in the model (SDF, spatial_v2, synthetic specs) cannot change
    it: a ModelError."""
    if floating_base is None:
        return robot
    if bool(floating_base) != robot.floating_base:
        asked = "floating" if floating_base else "fixed"
        raise ModelError(f"{what} has a {'floating' if robot.floating_base else 'fixed'} base set in the model; "
                         f"a {asked} base (--{asked}-base, floating_base={bool(floating_base)}) applies to URDF "
                         f"models{hint}")
    if bool(floating_base) != default:
        robot.base_variant = "floating" if floating_base else "fixed"
    return robot


__all__ = ["Body", "Frame", "Joint", "Robot", "load_robot", "FORMATS"]
