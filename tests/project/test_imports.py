"""The package's imports run one way (../shared/DESIGN.md, issue 12):

    model → symbolic → sweeps → {delassus, dynamics, operators} → registry → runtime → codegen → api → cli

with errors, names (identifiers), progress (progress lines) and version importable everywhere, constraints between symbolic and sweeps, opcount (counting)
beside the registry, verify (the oracles), stepping (the compiled contact step's entry points), report and executor (jobs) beside codegen, contact_modes (libraries) beside api, contact (the contact problem, its solvers and the SX of the compiled step) and then mujoco_model (MuJoCo's model as mathematics, its soft contact step on contact's) after the algorithms, below the registry, simulation (the loop, scenes, feedback, CSV/plots) and mujoco above api, timing above them.
The runtime (loading and calling generated code) never imports codegen (the compile side) but
for the one import RUNTIME_COMPILES names, and no module imports itself through others (no
import circle, lazy imports in functions included).  The
mathematics (symbolic, sweeps, delassus, dynamics, operators, mujoco_model) never imports codegen, timing,
verify, the registry or the counting; the algorithm packages do not import each other's
modules, except where the paper defines one algorithm as another's driver with a policy; the
NumPy reference shares no code with the algorithms.  contact/ (issue 35 point 1) neither loads nor emits C: no
ctypes, no jinja2, no template.  Read from the sources with ``ast``."""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "casadi_delassus"
RANK = {"errors": 0, "names": 0, "progress": 0, "version": 0, "model": 1, "symbolic": 2, "constraints": 3, "sweeps": 4,
        "delassus": 5, "dynamics": 5, "operators": 5, "opcount": 6, "registry": 7,
        "runtime": 7.5, "codegen": 8, "stepping": 8, "verify": 8, "report": 8, "executor": 8, "contact_modes": 9, "contact": 5.6, "mujoco_model": 5.7, "api": 9, "simulation": 9.5, "mujoco": 9.5, "timing": 10, "cli": 11, "__init__": 12, "__main__": 12}
# contact (the contact problem: NumPy solvers, the step's SX) and mujoco_model (MuJoCo's model as SX and NumPy) are
# mathematics too; mujoco_model reads contact (MuJoCo's soft step is built on the contact step's SX and its ADMM
# twin on admm.py's iteration, issue 35 point 5), never the other way; codegen/ and runtime/ read both
MATH = {"symbolic", "sweeps", "delassus", "dynamics", "operators", "mujoco_model", "contact"}
# what the mathematics may import besides itself (names: user strings shown in one-line errors)
MATH_MAY_IMPORT = {"errors", "names", "model", "constraints"}
ALGORITHMS = {"delassus", "dynamics", "operators"}
# PV paper Sec. VIII: PV-early is Alg. 1 with early elimination at every joint (pv.py's driver and
# its policy); Sec. VI: PV-soft is ABA on augmented inertias (aba.py's solve with hooks)
COMPOSITIONS = {("dynamics.pv_early", "dynamics.pv"), ("dynamics.pv_soft", "dynamics.aba")}
REFERENCE_FORBIDDEN = MATH | {"registry", "codegen", "opcount"}
# a dask worker that cannot see a function's .so compiles it from the manifest (runtime/distributed.py)
RUNTIME_COMPILES = {("runtime.distributed", "codegen.rebuild")}


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
            if (mod, target) in RUNTIME_COMPILES:
                continue
            if RANK[tlayer] > RANK[layer]:
                bad.append(f"{mod} imports {target}: {tlayer} is above {layer}")
            if layer in ALGORITHMS and tlayer in ALGORITHMS and (mod, target) not in COMPOSITIONS:
                bad.append(f"{mod} imports {target}: an algorithm imports another algorithm's module")
            elif layer in MATH and tlayer not in MATH | MATH_MAY_IMPORT:
                bad.append(f"{mod} imports {target}: the mathematics imports {tlayer}")
            elif mod == "verify.reference" and tlayer in REFERENCE_FORBIDDEN:
                bad.append(f"{mod} imports {target}: the NumPy reference shares code with the algorithms")
    return bad


GRAPH = {module_name(p): imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def cycles(graph):
    """The import circles of ``graph``: its strongly connected components of more than one
    module, or of one that imports itself (Tarjan's algorithm, iterative)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in graph:
                    continue
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        component.append(m)
                        if m == node:
                            break
                    if len(component) > 1 or node in graph[node]:
                        found.append(sorted(component))
    return found


def test_no_import_circle():
    assert not cycles(GRAPH), cycles(GRAPH)


@pytest.mark.parametrize("graph, circles", [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"a"}}, [["a"]]),
    ({"a": {"b", "c"}, "b": {"c"}, "c": set()}, []),
    ({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c", "e"}, "e": set()}, [["a", "b"], ["c", "d"]]),
])
def test_the_circle_check_finds_circles(graph, circles):
    assert sorted(cycles(graph)) == circles


def test_the_runtime_never_imports_the_compile_side():
    bad = [(m, t) for m, targets in GRAPH.items() if m.startswith("runtime")
           for t in targets if t.split(".")[0] == "codegen" and (m, t) not in RUNTIME_COMPILES]
    assert not bad and RUNTIME_COMPILES <= {(m, t) for m, ts in GRAPH.items() for t in ts}, bad


def test_every_module_has_a_layer():
    assert not [m for m in GRAPH if (m.split(".")[0] if m else "__init__") not in RANK]


def test_imports_run_one_way():
    bad = violations(GRAPH)
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("graph, words", [
    ({"sweeps.tree": {"codegen.trace"}}, "codegen is above sweeps"),
    ({"runtime.loader": {"codegen.build"}}, "codegen is above runtime"),
    ({"operators.damped_inverse_explicit": {"opcount"}}, "opcount is above operators"),
    ({"delassus.kjr": {"delassus.efpa"}}, "an algorithm imports another algorithm's module"),
    ({"dynamics.ltl": {"dynamics.pv"}}, "an algorithm imports another algorithm's module"),
    ({"symbolic.frames": {"verify.check"}}, "verify is above symbolic"),
    ({"verify.reference": {"symbolic.frames"}}, "shares code with the algorithms"),
    ({"mujoco_model.smooth": {"codegen.trace"}}, "the mathematics imports codegen"),
    ({"mujoco_model.constraints": {"verify.mujoco_oracle"}}, "the mathematics imports verify"),
    ({"contact.step": {"simulation.simulate"}}, "simulation is above contact"),
    ({"mujoco_model.soft": {"simulation.feedback"}}, "simulation is above mujoco_model"),
    ({"contact.step": {"codegen.build"}}, "the mathematics imports codegen"),
    ({"contact.admm": {"mujoco_model.soft_admm"}}, "mujoco_model is above contact"),
    ({"contact.rollout": {"runtime.library"}}, "the mathematics imports runtime"),
    ({"contact.step": {"registry"}}, "the mathematics imports registry"),
    ({"contact.step_derivatives": {"stepping.derivatives"}}, "stepping is above contact"),
])
def test_the_rules_catch_a_wrong_import(graph, words):
    assert any(words in v for v in violations(graph))


def test_the_contact_problem_never_imports_the_simulation():
    """Issue 35 point 5: the simulation (loop, scenes, feedback, CSV/plots) is built on the contact problem and
    MuJoCo's model, never imported by them."""
    bad = [(m, t) for m, ts in GRAPH.items() if m.split(".")[0] in ("contact", "mujoco_model") for t in ts
           if t.split(".")[0] == "simulation"]
    assert not bad and "simulation.simulate" in GRAPH, bad


def test_the_graph_sees_relative_and_absolute_imports():
    assert "sweeps.articulated" in GRAPH["delassus.pv_osim"]
    assert "registry" in GRAPH["codegen.trace"]
    assert "dynamics.pv" in GRAPH["dynamics.pv_early"]
    assert {"delassus.naive", "dynamics.aba", "operators.delassus_apply"} <= GRAPH["registry"]
    assert {"api", "errors", "model"} <= GRAPH["__init__"]


@pytest.mark.parametrize("old", ["loader", "door", "inputs", "artifact", "distributed", "batch"])
def test_the_old_codegen_names_are_gone(old):
    """The runtime's modules left codegen/ (issue 24) and their deprecated re-exports went (issue 35): one name each."""
    assert f"codegen.{old}" not in GRAPH and f"runtime.{old}" in GRAPH


def test_the_version_has_one_definition():
    """``__version__`` is defined in version.py alone; modules import it from there, not from the package top."""
    top = [p for p in PACKAGE.rglob("*.py") for node in ast.walk(ast.parse(p.read_text()))
           if isinstance(node, ast.ImportFrom) and "__version__" in {a.name for a in node.names}
           and node.module in (None, "casadi_delassus")]
    assert not top and [m for m, t in GRAPH.items() if "version" in t and m != "__init__"]
    assert "__version__ =" not in (PACKAGE / "__init__.py").read_text()


def c_machinery(path):
    """What of the machinery that loads or emits C the module at ``path`` uses in its code (not its prose): imports of
    ctypes or jinja2, and the names that render templates, compile, load or seal."""
    used = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            used |= {a.name.split(".")[0] for a in node.names} & C_MACHINERY
        elif isinstance(node, ast.ImportFrom):
            used |= {(node.module or "").split(".")[0], *(a.name for a in node.names)} & C_MACHINERY
        elif isinstance(node, (ast.Name, ast.Attribute)):
            used |= {getattr(node, "id", None) or getattr(node, "attr", None)} & C_MACHINERY
    return used


C_MACHINERY = {"ctypes", "jinja2", "get_template", "render", "environment", "casadi_source", "build_cached",
               "open_sealed", "open_library", "CDLL", "external", "find_compiler"}


def test_the_contact_mathematics_neither_loads_nor_emits_c():
    """Issue 35 point 1: contact/ is the SX and NumPy of the contact problem; its C is codegen/'s (contact_step.py and
    the others, templates/), its loading and calling runtime/'s (ctypes, library.open_sealed)."""
    bad = {p.relative_to(PACKAGE).as_posix(): c_machinery(p) for p in sorted((PACKAGE / "contact").rglob("*.py"))}
    assert not {k: v for k, v in bad.items() if v} and "contact/step.py" in bad
    assert not [p for p in (PACKAGE / "contact").rglob("*") if p.suffix in (".j2", ".c", ".h", ".so")]
    assert c_machinery(PACKAGE / "runtime" / "contact_step.py") >= {"ctypes", "open_sealed"}      # the check sees them
    assert c_machinery(PACKAGE / "codegen" / "contact_step.py") >= {"get_template", "build_cached"}
