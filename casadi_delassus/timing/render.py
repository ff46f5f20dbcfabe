"""The timing programs' jinja2 templates (timing/templates)."""
from __future__ import annotations

import jinja2

ENV = jinja2.Environment(loader=jinja2.PackageLoader("casadi_delassus", "timing/templates"),
                         keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
