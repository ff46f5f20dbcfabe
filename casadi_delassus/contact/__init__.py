"""Frictional contact on the robot's own Delassus matrix: cones and the De Saxcé map
(cones.py), the NCP residuals (residuals.py), ADMM (admm.py) and PGS (pgs.py) as NumPy
references, and the compiled step built on the Delassus family (step.py)."""
from .result import Options, Result
from . import admm, pgs

SOLVERS = {"admm": admm.solve, "pgs": pgs.solve}

__all__ = ["Options", "Result", "SOLVERS", "admm", "pgs"]
