"""Check every mode of a contact-mode library, through its dispatcher, against the NumPy reference
(verify/check.py's oracles and tolerance rule) and against the function generated
directly for that contact set (its CasADi function, traced again and evaluated by CasADi:
no C, no dispatch, no library naming).  The library comes built (contact_modes/'s Library: its modes, input and
output specs, ``outputs``); this module imports nothing of contact_modes/, which ranks above verify/."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..codegen.trace import trace
from ..constraints import ConstraintSet
from . import reference
from .check import DEFAULT_TOL, ORACLES, Comparison, NumpySession, allowed_error, condition, relative_error


@dataclass
class ModeCheck:
    """One mode's check: its comparisons with the NumPy reference and with the directly generated function."""
    mask: int
    name: str
    algorithm: str | None
    reference: dict = field(default_factory=dict)     # output -> Comparison against the NumPy oracle
    direct: dict = field(default_factory=dict)        # output -> Comparison against the direct function
    shapes_ok: bool = True

    @property
    def passed(self):
        """Shapes right and every comparison within its allowed error."""
        return self.shapes_ok and all(c.passed for c in (*self.reference.values(), *self.direct.values()))

    def worst(self, which):
        """The largest error of the ``which`` ("reference" or "direct") comparisons."""
        comps = getattr(self, which)
        return max((c.error for c in comps.values()), default=0.0)


def _inputs(lib, md, cs, rng):
    """Random library inputs for mode ``md`` after q (vectors, R in [0.1, 1], a K for every
    runtime-input constraint of the full set), and the K of the active ones by the names the
    mode's own constraint set gives them."""
    library = {}
    for spec in lib.input_specs[1:]:
        shape = [md["m"] if d == "m" else int(d) for d in spec["shape"]]
        library[spec["name"]] = rng.uniform(0.1, 1.0, shape) if spec["name"] == "R" else rng.normal(size=shape)
    k_names = [n for n in md["inputs"] if n.startswith("K_")]
    return library, {c.input_name: library[n] for c, n in zip(cs.inputs, k_names)}


def check_library(lib, robot, samples=20, seed=0, tol=DEFAULT_TOL, direct=True):
    """[ModeCheck] of every mode of the Library ``lib`` over ``samples`` random inputs
    (``direct=False``: against the NumPy reference only, which saves tracing every mode again)."""
    rng = np.random.default_rng(seed)
    results = []
    for mask, md in sorted(lib.modes.items()):
        cs = ConstraintSet.parse_or_empty(robot, md["active"])
        chosen = md["algorithm"]
        fn = trace(robot, cs, chosen, cse=lib.manifest["cse"], osim=lib.manifest["osim"] and bool(md["active"]))[0] \
            if chosen and direct else None
        res = ModeCheck(mask, md["name"], chosen)
        for _ in range(samples):
            q = robot.random_q(rng)
            args, own_K = _inputs(lib, md, cs, rng)
            got = lib.outputs(mask, q, **args)
            x = {"q": q, "K": own_K, **{k: v for k, v in args.items() if not k.startswith("K_") and np.size(v)}}
            if fn is not None:
                values = fn(q, *[x[n] if n in x else own_K[n] for n in fn.name_in()[1:]])
                values = dict(zip(fn.name_out(), values if isinstance(values, (list, tuple)) else [values]))
            for spec, f_name in zip(lib.output_specs, md["outputs"]):
                name, value = spec["name"], got[spec["name"]]
                shape = tuple(md["m"] if d == "m" else int(d) for d in spec["shape"])
                res.shapes_ok &= value.shape == shape
                if f_name is None:                 # not computed in this mode: empty, or EMPTY_VALUES'
                    res.shapes_ok &= bool(np.all(value == md["constants"].get(name, 0.0)))
                    continue
                kappa = condition(name, x, NumpySession(robot, cs).delassus) if md["active"] else 1.0
                allowed = allowed_error(tol, kappa)
                if not md["active"]:               # the empty mode of a dynamics library: ABA
                    expected = reference.forward_dynamics(robot, q, x["v"], x["tau"])
                else:
                    expected = ORACLES[name](robot, cs, x) if name in ORACLES else None   # pivot: no oracle
                if expected is not None:
                    res.reference.setdefault(name, Comparison()).add(relative_error(value, expected), allowed, kappa)
                if fn is not None:
                    d = np.array(values[f_name], dtype=float).reshape(value.shape, order="F")
                    res.direct.setdefault(name, Comparison()).add(relative_error(value, d), allowed, kappa)
        results.append(res)
    return results


__all__ = ["check_library", "ModeCheck"]
