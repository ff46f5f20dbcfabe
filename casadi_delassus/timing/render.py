"""The timing programs' jinja2 templates (timing/templates), rendered through the escaping
environment of codegen/escape.py: every interpolated string passes a filter."""
from __future__ import annotations

from ..codegen.escape import environment

ENV = environment("casadi_delassus", "timing/templates")
