"""Helpers shared by the benchmark scripts: where results go, Markdown/CSV writers."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
SHARED = ROOT.parent / "shared"
ANCHOR_JSON = SHARED / "anchors" / "talos_spatial_v2_model.json"
ANCHOR_SPECS = ["leg_left_6_link:6d-input", "leg_right_6_link:6d-input",
                "gripper_left_motor_double_link:6d-input", "gripper_right_motor_single_link:6d-input"]
sys.path.insert(0, str(ROOT))

from casadi_delassus.report import table, to_csv  # noqa: E402


def write(name, rows, headers, title=""):
    """Print the table and write results/<name>.md and .csv."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    text = table(rows, headers)
    print(text)
    md = [f"# {title or name}", "", "| " + " | ".join(headers) + " |", "|" + " --- |" * len(headers)]
    md += ["| " + " | ".join(f"{v:,}" if isinstance(v, int) else f"{v:.3g}" if isinstance(v, float) else str(v)
                             for v in r) + " |" for r in rows]
    (RESULTS / f"{name}.md").write_text("\n".join(md) + "\n")
    (RESULTS / f"{name}.csv").write_text(to_csv(rows, headers) + "\n")
    print(f"-> {RESULTS / name}.md, .csv")
