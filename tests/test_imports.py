"""The package's imports run one way (../shared/DESIGN.md, issue 12):

    model → symbolic → sweeps → {delassus, dynamics, operators} → registry → codegen → api → cli

with errors, names (identifiers) and progress (progress lines) importable everywhere, constraints between symbolic and sweeps, opcount (counting)
beside the registry, verify (the oracles), report and executor (jobs) beside codegen, contact_modes (libraries) and contact (solvers and the compiled step) beside api, timing above api.  The
mathematics (symbolic, sweeps, delassus, dynamics, operators) never imports codegen, timing,
verify, the registry or the counting; the algorithm packages do not import each other's
modules, except where the paper defines one algorithm as another's driver with a policy; the
NumPy reference shares no code with the algorithms.  Read from the sources with ``ast``."""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "casadi_delassus"
RANK = {"errors": 0, "names": 0, "progress": 0, "model": 1, "symbolic": 2, "constraints": 3, "sweeps": 4,
        "delassus": 5, "dynamics": 5, "operators": 5, "opcount": 6, "registry": 7,
        "codegen": 8, "verify": 8, "report": 8, "executor": 8, "contact_modes": 9, "contact": 9, "api": 9, "timing": 10, "cli": 11, "__init__": 12, "__main__": 12}
MATH = {"symbolic", "sweeps", "delassus", "dynamics", "operators"}
ALGORITHMS = {"delassus", "dynamics", "operators"}
# PV paper Sec. VIII: PV-early is Alg. 1 with early elimination at every joint (pv.py's driver and
# its policy); Sec. VI: PV-soft is ABA on augmented inertias (aba.py's solve with hooks)
COMPOSITIONS = {("dynamics.pv_early", "dynamics.pv"), ("dynamics.pv_soft", "dynamics.aba")}
REFERENCE_FORBIDDEN = MATH | {"registry", "codegen", "opcount"}


def module_name(path):
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts)


def imports(path):
    """The casadi_delassus modules (dotted, without the package prefix) that ``path`` imports."""
    name = module_name(path)
    package = [] if name == "__init__" else name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1] if node.level > 1 else package
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.startswith("casadi_delassus"):
                target = node.module[len("casadi_delassus"):].lstrip(".")
            else:
                continue
            for alias in node.names:       # `from . import x` imports the module x
                full = f"{target}.{alias.name}" if target else alias.name
                out.add(full if (PACKAGE / Path(*full.split("."))).with_suffix(".py").is_file()
                        or (PACKAGE / Path(*full.split("."))).is_dir() else target)
        elif isinstance(node, ast.Import):
            out |= {a.name[len("casadi_delassus."):] for a in node.names if a.name.startswith("casadi_delassus.")}
    out.discard("")
    return out


def violations(graph):
    """Every import of ``graph`` ({module: {imported modules}}) that breaks a rule above."""
    bad = []
    for mod, targets in graph.items():
        layer = mod.split(".")[0] if mod else "__init__"
        for target in targets:
            tlayer = target.split(".")[0]
            if RANK[tlayer] > RANK[layer]:
                bad.append(f"{mod} imports {target}: {tlayer} is above {layer}")
            elif layer in ALGORITHMS and tlayer in ALGORITHMS and (mod, target) not in COMPOSITIONS:
                bad.append(f"{mod} imports {target}: an algorithm imports another algorithm's module")
            elif layer in MATH and tlayer not in MATH | {"errors", "model", "constraints"}:
                bad.append(f"{mod} imports {target}: the mathematics imports {tlayer}")
            elif mod == "verify.reference" and tlayer in REFERENCE_FORBIDDEN:
                bad.append(f"{mod} imports {target}: the NumPy reference shares code with the algorithms")
    return bad


GRAPH = {module_name(p): imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def test_every_module_has_a_layer():
    assert not [m for m in GRAPH if (m.split(".")[0] if m else "__init__") not in RANK]


def test_imports_run_one_way():
    bad = violations(GRAPH)
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("graph, words", [
    ({"sweeps.tree": {"codegen.trace"}}, "codegen is above sweeps"),
    ({"operators.damped_inverse_explicit": {"opcount"}}, "opcount is above operators"),
    ({"delassus.kjr": {"delassus.efpa"}}, "an algorithm imports another algorithm's module"),
    ({"dynamics.ltl": {"dynamics.pv"}}, "an algorithm imports another algorithm's module"),
    ({"symbolic.frames": {"verify.check"}}, "verify is above symbolic"),
    ({"verify.reference": {"symbolic.frames"}}, "shares code with the algorithms"),
])
def test_the_rules_catch_a_wrong_import(graph, words):
    assert any(words in v for v in violations(graph))


def test_the_graph_sees_relative_and_absolute_imports():
    assert "sweeps.articulated" in GRAPH["delassus.pv_osim"]
    assert "registry" in GRAPH["codegen.trace"]
    assert "dynamics.pv" in GRAPH["dynamics.pv_early"]
    assert {"delassus.naive", "dynamics.aba", "operators.delassus_apply"} <= GRAPH["registry"]
    assert {"api", "errors", "model"} <= GRAPH["__init__"]
