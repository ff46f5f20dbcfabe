"""The ``casadi-delassus`` command (also ``python -m casadi_delassus``): one thin module per
command, the shared options and the target resolution in options.py, the group and the entry
point in main.py.  Checking itself is verify/workflow.py's."""
from .. import api  # noqa: F401 (tests patch cli.api)
from . import bench, check, count, demo, generate, library, robots, simulate, step  # noqa: F401 (they register)
from .main import cli, main

__all__ = ["cli", "main"]
