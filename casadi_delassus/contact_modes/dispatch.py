"""The dispatcher of a contact-mode library: in C, ``<lib>_eval(mask, q, …, out…)`` and
``<lib>_batch(mask, n, q, …, out…)`` over a table of the modes (templates library.c.j2 and
library.h.j2, which document the memory layout); in Python, :class:`Library`:
``lib(mask_or_names, q, …)`` and ``lib(mask, Q)`` for a batch.

Both take the library's inputs in its order (q, then the vectors of the algorithm, then one
K per runtime-input constraint of the full set) and give its outputs; a mode reads and
writes only its active constraints' rows, in the order the constraints were given.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np

from ..runtime import artifact
from ..runtime.batch import check_threads
from ..runtime.inputs import as_input, refuse_masked
from ..codegen.vectorise import signature
from ..codegen.emit import TEMPLATES
from ..codegen.escape import Safe, c_ident
from ..runtime.loader import CompiledFunction
from ..errors import ArtifactError, InputError
from .modes import bit_of, link_of, mask_of, mode_name

LIBRARY_FORMAT = 1
KIND_TEXT = {"delassus": "Delassus matrices", "dynamics": "constrained dynamics", "operator": "operators"}
NO_MODE = -1          # what <lib>_eval returns for a mask that is not a mode of the library


# -- C ----------------------------------------------------------------------------------------
def _mode_context(mode, manifest):
    """The template view of one mode: argument positions of its function in library order."""
    lib_in = [i["name"] for i in manifest["inputs"]]
    lib_out = [o["name"] for o in manifest["outputs"]]
    view = dict(mode, rows=mode["m"], args=[], results=[], batch_args=[], constant_outputs=[],
                algorithm_text=mode["algorithm"] or "none")
    for name, value in mode["constants"].items():
        view["constant_outputs"].append({"k": lib_out.index(name), "value": [value]})
    if mode["function"] is None:
        return view
    fouts = mode["function_outputs"]
    view["args"] = [lib_in.index(n) for n in mode["inputs"]]
    where = {f: j for j, f in enumerate(mode["outputs"]) if f is not None}
    view["results"] = [where.get(f) for f in fouts]
    view["batch_args"] = [{"src": "in", "k": k} for k in view["args"]] + \
        [{"src": "out", "k": where[f]} if f in where else {"src": None} for f in fouts]
    view["prototype"] = Safe(signature(c_ident(mode["function"]), [{"name": n, "shape": [1]} for n in mode["inputs"]],
                                       [{"name": n, "shape": [1]} for n in fouts]))
    return view


def render_dispatcher(manifest):
    """{file name: text} of ``<lib>.c`` and ``<lib>.h`` for a library manifest."""
    lib = manifest["library"]
    ctx = dict(manifest, lib=lib, kind_text=KIND_TEXT[manifest["kind"]], header=f"{lib}.h", guard=f"{lib}_H", macro=lib.upper(),
               modes=[_mode_context(md, manifest) for md in manifest["modes"]],
               max_rows=sum(c["rows"] for c in manifest["constraints"]), no_mode=NO_MODE,
               kinds={i["name"]: i for i in manifest["inputs"]})
    return {f"{lib}.c": TEMPLATES.get_template("library.c.j2").render(ctx),
            f"{lib}.h": TEMPLATES.get_template("library.h.j2").render(ctx)}


# -- Python ---------------------------------------------------------------------------------------
class Library:
    """A built contact-mode library: ``lib(mode, q, **inputs)`` is the first output of
    ``mode``'s function (a mask, a constraint name or a list of them), ``lib.outputs(...)``
    all of them; q of shape N x nq is a batch.  ``lib.function(mode)`` is the mode's
    CompiledFunction (None when there is nothing to compute).  Mode functions are loaded on
    first use, each after checking it is the one the library manifest records."""

    def __init__(self, manifest_path, backend="ctypes"):
        self.manifest_path = Path(manifest_path)
        self.manifest = m = artifact.verify(self.manifest_path, kinds=("c", "h"), what="library")
        try:
            if m.get("library_format") != LIBRARY_FORMAT:
                raise ArtifactError(f"{self.manifest_path} is not a library manifest of format {LIBRARY_FORMAT}")
            self.specs = [c["spec"] for c in m["constraints"]]
            self.modes = {md["mask"]: md for md in m["modes"]}
            for mask, md in self.modes.items():     # folder names: only what casadi_delassus makes
                if md["name"] != mode_name(mask, len(self.specs)):
                    raise ArtifactError(f"library manifest {self.manifest_path} names mode {mask:#x} {md['name']!r}")
            self.input_specs, self.output_specs = m["inputs"], m["outputs"]
        except (KeyError, TypeError, ValueError) as exc:
            raise ArtifactError(f"library manifest {self.manifest_path} lacks or garbles {exc}: rebuild it") from None
        self.backend = backend
        self._functions, self._lock = {}, threading.Lock()
        self._direct = {}       # mask -> (its function, the input names it takes besides q): see __call__
        self._named = {}        # a mode given by names (a name, or a tuple of them) -> its mask: see __call__

    @property
    def name(self):
        return self.manifest["library"]

    def mask(self, mode):
        """The mask of ``mode`` (an int, a constraint name or names), checked to be in the library;
        names in another order than the library's are refused (the rows come in its order)."""
        mask = mask_of(mode, self.specs)
        if not isinstance(mode, (int, str, np.integer)):
            bits = [bit_of(n, self.specs) for n in mode]
            if bits != sorted(bits):
                raise InputError(f"the rows come in library order ({', '.join(link_of(self.specs[b]) for b in sorted(bits))})"
                                 f": give the names in that order, or a mask")
        if mask not in self.modes:
            raise InputError(f"mode {mask:#x} ({', '.join(s for i, s in enumerate(self.specs) if mask >> i & 1) or 'no constraints'}) "
                             f"is not in library {self.name} ({len(self.modes)} modes)")
        return mask

    def function(self, mode):
        """The CompiledFunction of ``mode``, or None (nothing to compute: the empty Delassus mode)."""
        mask = self.mask(mode)
        md = self.modes[mask]
        if md["function"] is None:
            return None
        with self._lock:
            if mask not in self._functions:
                rel = md["manifest"]
                path = Path(os.path.normpath(self.manifest_path.parent / rel))
                parts = Path(rel).parts      # a mode's folder, or ../ for the full set (the scenario's function)
                if Path(rel).is_absolute() or ".." in parts[1:] or (parts[:1] == ("..",) and len(parts) != 2):
                    raise ArtifactError(f"library manifest {self.manifest_path} points outside its folder: {rel!r}")
                f = CompiledFunction(path, self.backend)
                if f.manifest.get("manifest_sha256") != md["manifest_sha256"] or f.manifest["function"] != md["function"]:
                    raise ArtifactError(f"{path} is not the function library {self.name} was built with: rebuild it")
                self._functions[mask] = f
            return self._functions[mask]

    def outputs(self, mode, *first, threads=None, out=None, **inputs):
        """All outputs of ``mode`` by library name: q positionally or by name, the other
        inputs by name (those of the mode's active rows only; a runtime K of an inactive
        constraint may be given and is not read).  q of shape N x nq gives N x (shape) each."""
        mask = self.mask(mode)
        md = self.modes[mask]
        if len(first) > 1:
            raise InputError(f"{len(first)} positional inputs; pass the mode and q, and the others by name")
        if first:
            inputs = {"q": first[0], **inputs}
        names = {i["name"] for i in self.input_specs}
        unknown = set(inputs) - names
        if unknown:
            raise InputError(f"unexpected inputs {sorted(unknown)}; library {self.name} takes {sorted(names)}")
        if "q" not in inputs:
            raise InputError("missing input q")
        check_threads(threads)
        refuse_masked("q", inputs["q"])
        q = np.asarray(inputs["q"])
        n = q.shape[0] if q.ndim == 2 and q.shape != (self.manifest["nq"], 1) else None
        f = self.function(mask)
        if f is None:           # nothing to compute: q is checked as a mode's function checks it
            for row in (q if n is not None else [q]):
                as_input({"name": "q", "shape": [self.manifest["nq"]]}, row, self.manifest)
        given = {k: v for k, v in inputs.items() if k in md["inputs"]}
        for k, v in inputs.items():
            if k not in md["inputs"] and k != "q" and np.size(v) and not k.startswith("K_"):
                raise InputError(f"input {k} has {np.size(v)} values; {md['name']} has no active rows for it (0)")
        got = {}
        if f is not None:
            missing = [ln for ln in md["inputs"] if ln not in given]
            if missing:
                raise InputError(f"missing input {missing[0]} for {md['name']}")
            args = {fn: given[ln] for fn, ln in zip(md["function_inputs"], md["inputs"])}
            outs = {f_name: out[o["name"]] for o, f_name in zip(self.output_specs, md["outputs"])
                    if f_name is not None and o["name"] in (out or {})}
            got = f.outputs(args.pop("q"), threads=threads, out=outs or None, **args)
        result = {}
        for spec, f_name in zip(self.output_specs, md["outputs"]):
            if f_name is not None:
                result[spec["name"]] = got[f_name]
                continue
            shape = tuple(md["m"] if d == "m" else int(d) for d in spec["shape"])
            value = np.full(shape if n is None else (n, *shape), md["constants"].get(spec["name"], 0.0))
            if out and spec["name"] in out:
                out[spec["name"]][...] = value
                value = out[spec["name"]]
            result[spec["name"]] = value
        return result

    def __call__(self, mode, *first, threads=None, out=None, **inputs):
        """The first output of ``mode`` (see :meth:`outputs`).  A mode called before with q and
        exactly its other inputs goes straight to the mode's function: the checks and renaming
        of outputs() cost ten times the call of a small function, and resolving names to a mask
        as much again, so names resolved once are kept (bench/fast_routes.py)."""
        if type(mode) is not int:
            mode = self._mask_of_names(mode)
        direct = self._direct.get(mode)
        if direct is not None and len(first) == 1 and threads is None and out is None and direct[1] == inputs.keys():
            return direct[0](*first, **inputs)
        name = self.output_specs[0]["name"]
        value = self.outputs(mode, *first, threads=threads, out=None if out is None else {name: out}, **inputs)[name]
        if len(first) == 1:
            self._remember_direct(mode)
        return value

    def _mask_of_names(self, mode):
        """The mask of ``mode`` (mask()'s checks and errors), kept for a name or a list or tuple
        of names that resolved (a bounded set: the library's names in its order)."""
        key = tuple(mode) if type(mode) in (list, tuple) else mode
        try:
            return self._named[key]
        except (KeyError, TypeError):       # TypeError: unhashable (a list inside): mask() says what is wrong
            pass
        mask = self.mask(mode)
        if type(key) is str or (type(key) is tuple and all(type(n) is str for n in key)):
            self._named[key] = mask
        return mask

    def _remember_direct(self, mask):
        """Record ``mask``'s function for __call__'s direct path where the function takes the
        library's inputs under their own names and gives the library's first output first."""
        md, f = self.modes[mask], self._functions.get(mask)
        if f is not None and md["function_inputs"] == md["inputs"] and md["inputs"][0] == "q" and \
                md["outputs"][0] == f.output_specs[0]["name"]:
            self._direct[mask] = (f, frozenset(md["inputs"][1:]))

    def __repr__(self):
        m = self.manifest
        return f"<library {m['library']}: {m['kind']} ({m['algorithm']}), {len(self.modes)} modes, {self.manifest_path}>"


def load_library(path, backend="ctypes"):
    """A library built earlier: its manifest, or its folder (``…/modes-<algorithm>``)."""
    p = Path(path)
    if p.is_dir():
        found = sorted(p.glob("*_modes.json"))
        if len(found) != 1:
            raise ArtifactError(f"{p} holds {len(found)} library manifests (*_modes.json); name one")
        p = found[0]
    if not p.is_file():
        raise ArtifactError(f"no library at {path} (expected its manifest, <lib>.json)")
    return Library(p, backend)
