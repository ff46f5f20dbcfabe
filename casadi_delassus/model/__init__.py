"""Robot models: the ``Robot`` tree and its loaders (URDF, SDF with closed loops, spatial_v2
JSON, MJCF compiled by MuJoCo, synthetic mechanisms, the named registry)."""
from __future__ import annotations

from pathlib import Path

from ..errors import ModelError, unknown_name
from .mjcf import is_urdf
from .robot import Body, Frame, Joint, Robot

MODEL_SUFFIXES = (".urdf", ".sdf", ".json", ".xml")


def load_robot(spec, floating_base=None):
    """A robot from a registry name (``talos``), a model file (``.urdf``/``.sdf``/``.json``, or
    ``.xml``: MJCF, or a URDF when its root element is <robot>) or a synthetic spec
    (``chain:n=20``).  ``floating_base`` overrides the default for URDF files (floating).  An SDF model that closes loops gets the scenario ``loops``."""
    if isinstance(spec, Robot):
        return spec
    from . import registry
    from .synthetic import is_synthetic, parse_synthetic

    spec = str(spec)
    if spec in registry.registry():
        return registry.load_registered(spec)
    if spec.lower().endswith(MODEL_SUFFIXES) or Path(spec).exists():
        path = Path(spec)
        if not path.is_file():
            raise ModelError(f"model file not found: {spec}")
        if path.suffix.lower() == ".json":
            from .spatial_v2 import load_spatial_v2_json
            robot = load_spatial_v2_json(path)
        elif path.suffix.lower() == ".xml" and not is_urdf(path):
            from .mjcf import load_mjcf
            robot = load_mjcf(path)
        elif path.suffix.lower() in (".urdf", ".xml"):
            from .urdf import load_urdf
            robot = load_urdf(path, floating_base=True if floating_base is None else floating_base)
        elif path.suffix.lower() == ".sdf":
            from .sdf import load_sdf
            robot = load_sdf(path)
        else:
            raise ModelError(f"unsupported model file {spec}: expected .urdf, .sdf, .json or .xml (MJCF)")
        # an SDF model's loop-closing joints, an MJCF model's equality constraints
        robot.scenarios = {n: getattr(robot, n) for n in ("loops", "equality") if getattr(robot, n, None)}
        robot.model_file = path.resolve()       # names its output folder (codegen/artifact.py)
        return robot
    from .synthetic_contact import is_contact_synthetic, parse_contact_synthetic
    if is_contact_synthetic(spec):
        robot, default = parse_contact_synthetic(spec)
        robot.scenarios = {"default": default}
        return robot
    if is_synthetic(spec):
        robot, default = parse_synthetic(spec)
        robot.scenarios = {"default": default}
        return robot
    raise ModelError(unknown_name("robot", spec, registry.names()) +
                     " (give a registry name, a .urdf/.sdf/.json/.xml model file, or a synthetic spec such as chain:n=20)")


__all__ = ["Body", "Frame", "Joint", "Robot", "load_robot"]
