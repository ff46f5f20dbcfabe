"""Shared fixtures: one output folder for compiled code per test session, the shared/
folder that sits beside the repository (papers, anchors)."""
import importlib.metadata
from pathlib import Path

import numpy as np
import pytest

from casadi_delassus import load_robot
from casadi_delassus.model import Robot
from casadi_delassus.model.registry import is_available
from casadi_delassus.model.robot import Body, Joint

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
ANCHOR_JSON = SHARED / "anchors" / "talos_spatial_v2_model.json"


@pytest.fixture(scope="session")
def out_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("codegen_out")


def tilted_robot():
    """A floating base with two branches: revolute joints about tilted and coordinate axes,
    a tilted prismatic joint, a continuous joint, rotated joint frames."""
    rng = np.random.default_rng(5)
    spec = [("free", None, -1), ("revolute", [0.6, 0.8, 0], 0), ("prismatic", [0, 0.6, 0.8], 1),
            ("revolute", [0, 0, 1], 2), ("continuous", [1, 0, 0], 3), ("revolute", [0.48, 0.6, 0.64], 4),
            ("revolute", [0, 1, 0], 0), ("revolute", [1, 1, 1], 6)]
    bodies = []
    for i, (kind, axis, parent) in enumerate(spec):
        offset = rng.normal(size=3) * 0.3
        E = np.linalg.qr(rng.normal(size=(3, 3)))[0] if i % 2 else np.eye(3)
        bodies.append(Body(f"t{i}", parent, Joint(f"tj{i}", kind, None if axis is None else np.array(axis, float)),
                           E if parent >= 0 else np.eye(3), offset if parent >= 0 else np.zeros(3), 1.0 + i,
                           rng.normal(size=3) * 0.05, np.diag([0.02, 0.03, 0.025]) + 0.002))
    return Robot("tilted", bodies)


def model_for(spec, custom=None):
    """A robot for a test case: a key of ``custom`` ({name: factory}), 'tilted', a registry
    name (skipped when its package is missing), a synthetic spec, or 'erd:' + a file of
    example-robot-data."""
    custom = {"tilted": tilted_robot, **(custom or {})}
    if spec in custom:
        return custom[spec]()
    if spec.startswith("erd:"):
        try:
            root = importlib.metadata.distribution("example-robot-data").locate_file(
                "cmeel.prefix/share/example-robot-data/robots")
        except importlib.metadata.PackageNotFoundError:
            pytest.skip("example-robot-data is not installed")
        return load_robot(str(root / spec[4:]))
    if ":" not in spec and not is_available(spec):
        pytest.skip(f"robot {spec} is not installed")
    return load_robot(spec)
