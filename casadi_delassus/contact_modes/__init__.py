"""Contact-mode libraries: one generated function per contact set of a robot's constraints,
chosen at run time by a bit mask of the active constraints.

    lib = cd.library("go1", "4F3")                 # 16 modes, each with the cheapest Delassus algorithm
    D = lib(0b0101, q)                             # FL_foot and RL_foot active: 6 x 6
    D = lib(["FL_foot", "RL_foot"], q)             # the same by name
    D = lib(0b0101, Q)                             # N x 6 x 6 for Q of shape N x nq
    lib(0, q)                                      # the empty set: 0 x 0

Modules: ``modes`` (masks and how modes are named and chosen), ``plan`` (what a library
computes, the function of each mode), ``build`` (cache, executor, assembly), ``dispatch``
(the C dispatcher and the Python :class:`Library`), ``package`` (the C package).
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ..api import DEFAULT_OUT
from ..constraints import ConstraintsLike
from ..model import RobotLike
from ..codegen.build import DEFAULT_CFLAGS
from ..progress import silenced
from .build import build_library
from .dispatch import Library, load_library


def library(robot: RobotLike, constraints: ConstraintsLike | None = None, algorithm: str = "auto",
            modes: str | Sequence[Any] = "all", out_dir: str | os.PathLike[str] = DEFAULT_OUT,
            cflags: Sequence[str] = DEFAULT_CFLAGS, cc: str | None = None, cse: bool = True, osim: bool = False,
            force: bool = False, name: str | None = None, jobs: int | None = None, client: Any = None,
            package: str | os.PathLike[str] | None = None, backend: str = "ctypes", quiet: bool = False) -> Library:
    """Build (or take from the cache) a contact-mode library and load it.

    ``constraints``: a scenario name or a list of specs (default: the robot's first scenario),
    bit i = the i-th; ``algorithm``: ``auto`` (Delassus), a Delassus algorithm, a dynamics
    solver or ``auto_hard``/``auto_soft``, an operator or ``auto_apply``/``auto_damped``
    (contact_modes/plan.py); ``modes``: ``"all"``, ``"N-of-k"``, a file, masks or lists of names
    (contact_modes/modes.py); ``jobs``: local processes (default all cores, 1 = this process);
    ``client``: a ``dask.distributed.Client`` to build on; ``package``: also write the C
    package there.  Files go to ``out_dir/<model>/<scenario>/modes-<algorithm>/``.  ``quiet=True``: no progress
    bar or lines on stderr (progress.py)."""
    with silenced(quiet):
        path = build_library(robot, constraints, algorithm, modes, out_dir=out_dir, cflags=cflags, cc=cc, cse=cse,
                             osim=osim, force=force, name=name, jobs=jobs, client=client)
    if package is not None:
        from .package import write_library_package
        write_library_package(package, path)
    return Library(path, backend)


__all__ = ["library", "load_library", "Library", "build_library"]
