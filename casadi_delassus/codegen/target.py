"""What a function is compiled for: the target (C, or CUDA beside its C), the precision and
the CUDA kernel's internal layout, resolved and refused in one place for ``generate``,
``check`` and the API (docs/gpu.md, docs/precision.md)."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import DelassusError, InputError, unknown_name
from .cuda import LAYOUTS, check_options  # noqa: F401 (LAYOUTS: the CLI's choices)

TARGETS = ("c", "cuda")


@dataclass(frozen=True)
class Target:
    """A resolved compile target: ``target`` c or cuda, ``precision`` double or single, ``layout`` soa or aos."""
    target: str = "c"
    precision: str = "double"
    layout: str = "soa"

    @property
    def single_c(self):
        """Single precision on the C target: functions to call from Python, checked against their double build."""
        return self.precision == "single" and self.target == "c"


def resolve(target="c", precision="double", layout="soa"):
    """The Target, or a DelassusError naming what is unknown."""
    if target not in TARGETS:
        raise DelassusError(unknown_name("target", target, TARGETS) + f" (known: {', '.join(TARGETS)})")
    check_options(precision, layout)
    return Target(target, precision, layout)


def refuse(t, *, package=False, stages=False, derivatives=False):
    """An InputError for what Target ``t`` cannot be combined with (the CLI shows it as a usage error)."""
    if t.single_c and (package or stages):
        raise InputError("--precision single makes functions to call from Python: not with --package or --stages")
    if derivatives and t.precision == "single":
        raise InputError("--derivative checks double builds against finite differences: not with --precision single")
    if derivatives and t.target == "cuda":
        raise InputError("--derivative checks C builds against finite differences: not with --target cuda")
    return t
