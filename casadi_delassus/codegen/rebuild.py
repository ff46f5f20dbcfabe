"""A generated function made again from its manifest alone: what a dask worker that cannot
see the .so does (runtime/distributed.py)."""
from __future__ import annotations

from ..constraints import ConstraintSet
from ..errors import DelassusError
from ..model import load_robot
from ..model.urdf import URDF_TEXT
from ..runtime import artifact
from .build import build


def rebuild(manifest, out_dir):
    """The manifest path of the function a manifest describes (robot by registry name or
    model file, its constraint specs, algorithm, flags), generated and compiled again under
    ``out_dir``."""
    if manifest.get("precision", {}).get("type", "double") != "double":
        raise DelassusError(f"{manifest['function']} computes in single precision, which a worker rebuilds only with the "
                            f"build's error measurement: put its folder where the workers see it")
    if "stage" in manifest:
        raise DelassusError(f"{manifest['function']} is a stage of a staged function: rebuild the whole function")
    if manifest["source"] == URDF_TEXT:
        raise DelassusError(f"{manifest['function']} was generated from a URDF given as text, which a worker cannot "
                            f"read again: put its folder where the workers see it")
    base = manifest.get("floating_base")            # --fixed-base / --floating-base builds
    try:
        robot = load_robot(manifest["robot"], floating_base=base)
    except DelassusError:
        robot = load_robot(manifest["source"], floating_base=base)
    cs = ConstraintSet.parse(robot, [c["spec"] for c in manifest["constraints"]])
    model, scenario = manifest["model_name"], manifest["scenario"]
    path = build(robot, cs, manifest["algorithm"], artifact.folder(out_dir, model, scenario), scenario,
                 cflags=("auto",), cse=manifest["cse"], osim=manifest.get("osim", False), model=model)
    built = artifact.verify(path)
    got, want = (built["function"], built["op_count"]["instructions"]), (manifest["function"],
                                                                       manifest["op_count"]["instructions"])
    if got != want:
        raise DelassusError(f"regenerating {manifest['function']} on this worker gave {got}, not {want}: "
                            "the worker's casadi_delassus or robot files differ")
    return path
