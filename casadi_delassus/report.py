"""Plain-text tables, CSV and JSON for op counts and checks."""
from __future__ import annotations

import csv
import io
import json

from .names import printable


def table(rows, headers):
    """A fixed-width text table; numbers right-aligned with thousands separators; text cells
    through :func:`printable`."""
    def fmt(v):
        if isinstance(v, bool) or v is None:
            return "" if v is None else str(v)
        if isinstance(v, int):
            return f"{v:,}"
        if isinstance(v, float):
            return f"{v:.2e}" if (v != 0 and (abs(v) < 1e-3 or abs(v) >= 1e6)) else f"{v:.3g}"
        return printable(v)
    headers = [printable(h) for h in headers]
    cells = [[fmt(v) for v in r] for r in rows]
    widths = [max(len(h), *(len(c[k]) for c in cells)) if cells else len(h) for k, h in enumerate(headers)]
    numeric = [all((isinstance(r[k], (int, float)) and not isinstance(r[k], bool)) or r[k] is None for r in rows)
               and any(r[k] is not None for r in rows) for k in range(len(headers))]
    def line(vals):
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(vals, widths, numeric)).rstrip()
    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(c) for c in cells])


def to_csv(rows, headers):
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(headers)
    w.writerows(rows)
    return buf.getvalue().rstrip("\n")


def count_record(robot, constraints, counts):
    """The object `count --format json` prints (see the README)."""
    return {"robot": robot.name, "nq": robot.nq, "nv": robot.nv, "n_bodies": robot.n_bodies,
            "depth": robot.depth(), "m": constraints.m,
            "constraints": [{"link": c.link, "type": c.kind, "rows": c.rows} for c in constraints.constraints],
            "algorithms": counts}


def dumps(obj):
    return json.dumps(obj, indent=1)
