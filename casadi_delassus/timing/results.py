"""A benchmark's results: terminal rows, Markdown, CSV and a PNG bar chart per scenario."""
from __future__ import annotations

import os
import platform
import re
import shlex
import subprocess
import sys
from pathlib import Path

from .. import report
from ..codegen.build import find_compiler
from ..verify.check import relative_error
from .pinocchio_harnesses import PIN_CPP, pin_version

HEADERS = ["algorithm", "instructions", "µs/call (median)", "min µs", "max µs", "Pinocchio/ours",
           "instr/ns", "cflags", "codegen s", "gcc s", ".so KB", "rel. diff vs Pinocchio"]


def result_rows(res):
    """Rows for HEADERS: each algorithm (ratio against its Pinocchio counterpart), then Pinocchio."""
    t = res["timings"]
    rows = []
    for label, m in res["manifests"].items():
        if label not in t:
            continue
        pin_t = t.get(res.get("pin_labels", {}).get(label, ""))
        x, ins, ts = t[label], m["op_count"]["instructions"], m.get("timings_s", {})
        rows.append([label, ins, round(x.median / 1e3, 3), round(x.min / 1e3, 3), round(x.max / 1e3, 3),
                     round(pin_t.median / x.median, 2) if pin_t else None,
                     round(ins / x.median, 2), " ".join(m["cflags"]),
                     round(ts.get("trace", 0) + ts.get("emit", 0), 2), round(ts.get("compile", 0), 2),
                     int(round(m.get("so_bytes", 0) / 1024)),
                     relative_error(x.output, pin_t.output) if pin_t is not None and x.output is not None
                     and pin_t.output is not None else None])
    for label, pin_t in t.items():
        if label.startswith("pinocchio"):
            kind = "C++" if pin_t.method == PIN_CPP else "Python"
            rows.append([f"{label} ({kind})", None, round(pin_t.median / 1e3, 3), round(pin_t.min / 1e3, 3),
                         round(pin_t.max / 1e3, 3), 1.0, None, "", None, None, None, None])
    return rows


def describe(res):
    """Two lines above a scenario's table."""
    pin = res["pinocchio_method"] or "not measured"
    return (f"{res['robot']} / {res['scenario']} (nv = {res['nv']}, m = {res['m']}: {', '.join(res['specs'])})\n"
            f"median of {res['reps']} repetitions x {res['calls']:,} calls over {res['samples']} random q; "
            f"Pinocchio: {pin}")


def machine():
    cpu = platform.processor() or ""
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                   if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        gcc = subprocess.run([*shlex.split(find_compiler(None)), "--version"], capture_output=True,
                             text=True).stdout.splitlines()[0]
    except Exception:
        gcc = "?"
    return f"{cpu}, {os.cpu_count()} cores; {gcc}; Pinocchio {pin_version()}; Python {sys.version.split()[0]}"


def _slug(s):
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", s)


def write_results(results, out_dir, name="runtime", title="Runtime: generated C vs Pinocchio"):
    """``name``.md and ``name``.csv for a list of ``benchmark`` results, and one PNG bar
    chart per scenario (``name``_<robot>_<scenario>.png, if matplotlib is installed).
    Returns the written paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    md = [f"# {title}", "", f"Machine: {machine()}.", "",
          "`instr/ns` (the \"physical limit\" column) = instructions / measured ns per call: SX "
          "instructions executed per nanosecond. A core retires a few scalar floating-point "
          "operations per ns at most, so values near 4 mean the code runs close to that limit and only "
          "fewer instructions make it faster; values near 1 point at compiler flags (-O0) or memory.",
          "`codegen s` = trace + emit time, `gcc s` = compile time, both from the manifest "
          "(the time of the run that generated the cached code).", ""]
    csv_rows = []
    written = []
    for res in results:
        rows = result_rows(res)
        md += [f"## {res['robot']} / {res['scenario']}", "", *(f"{line}  " for line in describe(res).splitlines()), ""]
        md += ["| " + " | ".join(HEADERS) + " |", "|" + " --- |" * len(HEADERS)]
        md += ["| " + " | ".join("" if v is None else f"{v:,}" if isinstance(v, int) else
                                 f"{v:.2e}" if isinstance(v, float) and 0 < abs(v) < 1e-3 else
                                 f"{v:g}" if isinstance(v, float) else str(v) for v in r) + " |" for r in rows]
        md += [f"- {n}" for n in res["notes"]] + [""]
        csv_rows += [[res["robot"], res["scenario"], res["m"], *r] for r in rows]
        png = plot(res, out_dir / f"{name}_{_slug(res['robot'])}_{_slug(res['scenario'])}.png")
        if png:
            md += [f"![{res['robot']} {res['scenario']}]({png.name})", ""]
            written.append(png)
    (out_dir / f"{name}.md").write_text("\n".join(md))
    (out_dir / f"{name}.csv").write_text(report.to_csv(csv_rows, ["robot", "scenario", "m", *HEADERS]) + "\n")
    return [out_dir / f"{name}.md", out_dir / f"{name}.csv", *written]


def plot(res, path):
    """Bar chart of µs per call (median, min-max whiskers), Pinocchio last; None without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    t = res["timings"]
    labels = [k for k in res["manifests"] if k in t] + [k for k in t if k.startswith("pinocchio")]
    if not labels:
        return None
    med = [t[k].median / 1e3 for k in labels]
    lo = [m - t[k].min / 1e3 for k, m in zip(labels, med)]
    hi = [t[k].max / 1e3 - m for k, m in zip(labels, med)]
    fig, ax = plt.subplots(figsize=(1.4 * len(labels) + 2.5, 3.6))
    colors = ["tab:gray" if k.startswith("pinocchio") else "tab:blue" for k in labels]
    ax.bar([k.replace("pinocchio ", "pinocchio\n") for k in labels], med, yerr=[lo, hi], color=colors, capsize=4)
    for i, (k, m) in enumerate(zip(labels, med)):
        pin = t.get(res.get("pin_labels", {}).get(k, ""))
        text = f"{m:.2f} µs" + (f"\n×{pin.median / t[k].median:.2f}" if pin else "")
        ax.text(i, m + hi[i], text, ha="center", va="bottom", fontsize=8)
    log = max(med) / min(med) > 20
    ax.set_ylabel("µs per call (median, min–max)" + (", log scale" if log else ""))
    ax.set_title(f"{res['robot']} {res['scenario']} (nv {res['nv']}, m {res['m']}); ×: Pinocchio time / ours", fontsize=10)
    top = max(med[i] + hi[i] for i in range(len(med)))
    if log:
        ax.set_yscale("log")
        ax.set_ylim(min(med) / 2, top * 4)
    else:
        ax.set_ylim(0, top * 1.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)
