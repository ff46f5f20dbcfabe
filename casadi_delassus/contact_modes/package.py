"""The C package of a contact-mode library: the dispatcher (``<lib>.c``, ``<lib>.h`` with the
dispatch table), the library manifest, every mode's generated ``.c``/``.h``/manifest under
``modes/<mode>/``, a Makefile and a CMakeLists.txt building one static and one shared
library, a README.md and an example ``main.c`` that switches modes at run time and prints
each mode's outputs.  Everything is rendered from the verified manifests; a C user needs a
C compiler and make or CMake, nothing of casadi_delassus."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np

from ..version import __version__
from ..runtime import artifact
from ..codegen.emit import TEMPLATES
from ..codegen.package import _opt_level, example_input, neutral_q
from .dispatch import KIND_TEXT, NO_MODE, Library

PACKAGE_FILES = ("Makefile", "CMakeLists.txt", "README.md", "main.c")
MODES_DIR = "modes"


def _example_value(spec, rows):
    """The example's value of a library input for a mode with ``rows`` active rows: R and lam
    ones (so that an operator shows something), K = [I 0], else zeros; column-major."""
    if spec["name"] in ("R", "lam"):
        return np.ones(rows)
    return example_input(spec)


def _package_context(lib, modes):
    """The templates' view: the library manifest, ``functions`` (the modes with a function)."""
    m = lib.manifest
    max_rows = sum(c["rows"] for c in m["constraints"])
    inputs = []
    for spec in m["inputs"][1:]:
        sized = spec["shape"] == ["m"]
        shape = [max_rows] if sized else spec["shape"]
        col = _example_value(dict(spec, shape=shape), max_rows)
        rows = col.reshape(shape, order="F").reshape(-1) if len(shape) == 2 else col
        inputs.append(dict(spec, sized=sized, size=int(np.prod(shape)), example=col, example_rows=rows))
    outputs = [dict(o, dims=[("m" if d == "m" else int(d)) for d in o["shape"]]) for o in m["outputs"]]
    return dict(m, lib=m["library"], version=__version__, kind_text=KIND_TEXT[m["kind"]], functions=modes,
                max_rows=max_rows, neutral=neutral_q(m), extra_inputs=inputs, lib_outputs=outputs,
                macro=m["library"].upper(), no_mode=NO_MODE, floating=any(j["kind"] == "free" for j in m["q_layout"]))


def write_library_package(package_dir, manifest_path):
    """Write the C package of the library at ``manifest_path`` into ``package_dir`` (files
    built in a temporary folder and moved in); returns the written paths."""
    lib = Library(manifest_path)
    folder = lib.manifest_path.parent
    modes = []
    for md in lib.manifest["modes"]:
        if md["function"]:
            f = lib.function(md["mask"])          # verifies the mode's files against the library manifest
            modes.append(dict(md, stem=f.manifest_path.stem, opt=_opt_level(f.manifest["cflags"]),
                              source=f.manifest_path))
    out = Path(package_dir)
    names = []
    with artifact.build_folder(out, "package") as tmp:
        for ext in ("c", "h", "json"):
            shutil.copyfile(folder / f"{lib.name}.{ext}", tmp / f"{lib.name}.{ext}")
            names.append(f"{lib.name}.{ext}")
        for md in modes:
            (tmp / MODES_DIR / md["name"]).mkdir(parents=True)
            for ext in ("c", "h", "json"):
                rel = f"{MODES_DIR}/{md['name']}/{md['stem']}.{ext}"
                shutil.copyfile(md["source"].with_suffix("." + ext), tmp / rel)
                names.append(rel)
        ctx = _package_context(lib, modes)
        for name in PACKAGE_FILES:
            (tmp / name).write_text(TEMPLATES.get_template(f"library_{name}.j2").render(ctx))
            names.append(name)
        for name in names:
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp / name, out / name)
    return [out / n for n in names]
