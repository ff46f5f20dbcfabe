"""A drop-in C package for one robot and constraint set: the generated .c/.h (and the JSON
manifests) of each function, a Makefile and a CMakeLists.txt building a static and a shared
library, a README.md describing inputs, outputs, the q layout and the constraint rows, and
an example ``main.c``.  Everything is rendered from the manifests; a C user needs nothing of
casadi_delassus to build it."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np

from ..version import __version__
from ..errors import DelassusError
from ..model.robot import neutral_q as model_neutral_q
from ..runtime import artifact
from .build import COMPILER_SPECIFIC
from .emit import TEMPLATES

PACKAGE_FILES = ("Makefile", "CMakeLists.txt", "README.md", "main.c")


def neutral_q(manifest):
    """Zeros with the quaternions' w = 1 (free and ball joints, in their order) and cos = 1
    (continuous joints): model/robot.py's neutral_q on the manifest's q layout."""
    return model_neutral_q(manifest["q_layout"])


def example_input(spec):
    """The example's value of an input after q: K = [I 0] selections, weights R = 1, else 0."""
    shape = spec["shape"]
    if spec["name"].startswith("K_") and len(shape) == 2:
        a = np.eye(shape[0], shape[1])
    elif spec["name"] == "R":
        a = np.ones(shape)
    else:
        a = np.zeros(shape)
    return a.reshape(-1, order="F")


def _opt_level(cflags):
    """The optimisation level and math flags the function was generated with (not the ones
    for this compiler or CPU only: the package is portable)."""
    return [f for f in cflags if f.startswith(("-O", "-f")) and f not in COMPILER_SPECIFIC] or ["-O2"]


def _function_context(manifest, stem):
    counts = manifest["op_count"]
    return {
        "fname": manifest["function"], "stem": stem, "algorithm": manifest["algorithm"],
        "chosen": manifest.get("auto", {}).get("chosen"), "instructions": f"{counts['instructions']:,}",
        "flops": f"{counts['flops']:,}", "cse": manifest.get("cse", True), "opt": _opt_level(manifest["cflags"]),
        "sz_iw": manifest["sz_iw"], "sz_w": manifest["sz_w"],
        "inputs": [dict(i, size=int(np.prod(i["shape"])), example=example_input(i),
                        example_rows=example_input(i).reshape(i["shape"], order="F").reshape(-1))
                   for i in manifest["inputs"]],
        "outputs": [dict(o, size=int(np.prod(o["shape"]))) for o in manifest["outputs"]],
    }


def _manifest_path(f):
    p = Path(getattr(f, "manifest_path", f))
    return p.with_suffix(".json") if p.suffix in (".so", ".c", ".h") else p


def render_package(manifests):
    """{file name: text} of the package files for [(manifest, stem)] of one robot and scenario."""
    first = manifests[0][0]
    for m, _ in manifests[1:]:
        if (m["robot"], m["scenario"], m["nq"]) != (first["robot"], first["scenario"], first["nq"]) or \
                [c["spec"] for c in m["constraints"]] != [c["spec"] for c in first["constraints"]]:
            raise DelassusError(f"a package holds one robot and one constraint set: {m['function']} is for "
                                f"{m['robot']}/{m['scenario']}, {first['function']} for {first['robot']}/{first['scenario']}")
    functions = [_function_context(m, stem) for m, stem in manifests]
    rows, start = [], 0
    names = first["row_names"]
    for c in first["constraints"]:
        rows.append({"spec": c["spec"], "first": start, "last": start + c["rows"] - 1,
                     "names": [n.split(".")[-1] for n in names[start:start + c["rows"]]]})
        start += c["rows"]
    scenario = first["scenario"]
    regen = [w for c in first["constraints"] for w in ("-c", c["spec"])] if artifact.is_custom(scenario) \
        else ["-s", scenario]
    regen += [w for f in functions for w in ("-a", f["algorithm"])]
    model_file = first.get("model_file")
    ctx = dict(first, lib=artifact.library_name(first["model_name"], scenario), version=__version__,
               functions=functions, f=functions[0], neutral=neutral_q(first),
               floating=any(j["kind"] == "free" for j in first["q_layout"]),
               has_ball=any(j["kind"] == "ball" for j in first["q_layout"]),
               mujoco=first.get("q_convention") == "mujoco",
               has_continuous=any(j["kind"] == "continuous" for j in first["q_layout"]),
               constraint_rows=rows, regen_args=regen, model=model_file or first["robot"],
               source_name=Path(model_file).name if model_file else "")
    return {"Makefile": TEMPLATES.get_template("package_Makefile.j2").render(ctx),
            "CMakeLists.txt": TEMPLATES.get_template("package_CMakeLists.txt.j2").render(ctx),
            "README.md": TEMPLATES.get_template("package_README.md.j2").render(ctx),
            "main.c": TEMPLATES.get_template("package_main.c.j2").render(ctx)}


def write_package(package_dir, functions):
    """Write the C package for ``functions`` (CompiledFunctions, or paths of their manifests)
    into ``package_dir``; files are built in a temporary folder and moved in, so an
    interrupted call leaves no half-written file.  Returns the written paths."""
    paths = [_manifest_path(f) for f in functions]
    if not paths:
        raise DelassusError("no function to package")
    manifests = [(artifact.verify(p), p.stem) for p in paths]
    for kind, values in (("file name", [s for _, s in manifests]), ("function name", [m["function"] for m, _ in manifests])):
        if len(set(values)) != len(values):
            raise DelassusError(f"two functions with the same {kind} in one package: {values}")
    out = Path(package_dir)
    names = []
    with artifact.build_folder(out, "package") as tmp:
        for p in paths:
            for ext in (".c", ".h", ".json"):
                shutil.copyfile(p.with_suffix(ext), tmp / (p.stem + ext))
                names.append(p.stem + ext)
        for name, text in render_package(manifests).items():
            (tmp / name).write_text(text)
            names.append(name)
        for name in names:
            os.replace(tmp / name, out / name)
    return [out / n for n in names]
