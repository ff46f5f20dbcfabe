"""The faster single call (codegen/sincos.py, codegen/schedule.py): the joint angles' sin and
cos from libmvec in a prologue are within a few ulp of libm's (angle by angle, and through
go1 4F3 and a 16-joint chain to the outputs), the rewrite touches only sin/cos of input
entries, and the greedy emission order keeps every operation (the same bits without
multiply-add contraction) and refuses what it does not know."""
import ctypes
import math
import subprocess

import casadi as ca
import numpy as np
import pytest

import casadi_delassus as cd
from casadi_delassus.codegen import schedule, sincos
from casadi_delassus.codegen.build import accepts_native, find_compiler
from casadi_delassus.codegen.emit import TEMPLATES, casadi_source
from casadi_delassus.codegen.statements import function_bodies
from casadi_delassus.errors import CompilerError

_p = ctypes.POINTER(ctypes.c_double)


def compile_so(source, tmp_path, name, flags=()):
    cc = find_compiler()
    c, so = tmp_path / f"{name}.c", tmp_path / f"{name}.so"
    c.write_text(source)
    native = ["-march=native"] if accepts_native(cc) else []
    subprocess.run([cc, "-O1", "-fno-math-errno", *native, *flags, "-fPIC", "-shared", "-o", str(so), str(c), "-lm"],
                   check=True, capture_output=True, cwd=tmp_path)
    return ctypes.CDLL(str(so))


def evaluate(lib, fname, inputs, out_sizes, sz_w=4096):
    """CasADi's calling convention: every output for the flat inputs."""
    fn = getattr(lib, fname)
    outs = [np.empty(n) for n in out_sizes]
    ins = [np.ascontiguousarray(x, dtype=float) for x in inputs]
    arg = (_p * len(ins))(*[x.ctypes.data_as(_p) for x in ins])
    res = (_p * len(outs))(*[o.ctypes.data_as(_p) for o in outs])
    iw, w = (ctypes.c_longlong * 64)(), (ctypes.c_double * sz_w)()
    assert fn(arg, res, iw, w, 0) == 0
    return outs


def ulps(a, b):
    """Distance in units of the last place of b (at least the smallest normal's)."""
    return np.abs(a - b) / np.maximum(np.spacing(np.abs(b)), np.spacing(np.finfo(float).tiny))


# -- the rewrite ---------------------------------------------------------------------------
def test_only_sin_and_cos_of_input_entries_are_hoisted():
    body = ["  casadi_real a0, a1, a2;",
            "  a0=arg[0]? arg[0][3] : 0;",
            "  a1=sin(a0);",                 # an input entry: hoisted
            "  a2=cos(a0);",                 # the same angle: its cos
            "  a0=(a0*a1);",
            "  a1=sin(a0);",                 # a0 is a product now: stays
            "  a2=arg[1]? arg[1][0] : 0;",
            "  a2=cos(a2);",                 # another input's entry, read into the variable it sets
            "  if (res[0]!=0) res[0][0]=(a1+a2);",
            "  return 0;"]
    new, angles = sincos.hoisted_body(body)
    assert angles == [(0, 3), (1, 0)]
    assert new[2:4] == ["  a1=cd_sin[0];", "  a2=cd_cos[0];"] and new[5] == "  a1=sin(a0);"
    assert new[7] == "  a2=cd_cos[1];" and len(new) == len(body)


def angle_function(n):
    x = ca.SX.sym("x", n)
    return ca.Function("angles", [x], [ca.vertcat(ca.sin(x), ca.cos(x), x[0] * ca.sin(x[1]))], ["x"], ["r"])


def test_libmvec_sin_cos_are_within_four_ulp_of_libm(tmp_path):
    """13 angles (a padded last group) over 1e-300 ... 1e5 and their negatives, ±0."""
    f = angle_function(13)
    code, n = sincos.hoist(casadi_source(f), TEMPLATES)
    assert n == 13 and "cd_sincos(16, cd_angle, cd_sin, cd_cos);" in code
    fast = compile_so(code, tmp_path, "fast")
    libm = compile_so(code, tmp_path, "libm", ["-DCD_SINCOS_LIBM"])
    rng = np.random.default_rng(3)
    X = np.concatenate([rng.uniform(-4, 4, (300, 13)), rng.uniform(-1e5, 1e5, (100, 13)),
                        10.0 ** rng.uniform(-300, 2, (100, 13)) * rng.choice([-1, 1], (100, 13))])
    X[0, :2] = [0.0, -0.0]
    worst = 0.0
    for x in X:
        a, = evaluate(fast, "angles", [x], [27])
        b, = evaluate(libm, "angles", [x], [27])
        assert np.array_equal(b[:26], [math.sin(v) for v in x] + [math.cos(v) for v in x])     # libm's own
        worst = max(worst, ulps(a[:26], b[:26]).max())
        assert np.copysign(1, a[0]) == np.copysign(1, b[0])          # sin(-0) = -0 on both routes
    print(f"libmvec vs libm sin/cos: largest difference {worst:.0f} ulp over {X.size} angles")
    assert worst <= 4


def body_of(code, index):
    """The text of casadi_f<index>'s evaluation function in ``code``."""
    lines = code.splitlines()
    first, end = function_bodies(lines, [index])[0]
    return "\n".join(lines[first:end])


def test_every_function_of_a_file_hoisted_with_one_helper(tmp_path):
    """functions=2 (the rollout's kinematics beside prep, codegen/contact_step.py render): the second function's sin/cos
    of its inputs come from its own prologue too, the helper is emitted once, and both functions' outputs are libm's
    on the libm route and within 4 ulp of them on libmvec; functions=1 leaves the second as CasADi printed it."""
    y = ca.SX.sym("y", 2)
    second = ca.Function("second", [y], [ca.vertcat(ca.sin(y[0]), ca.cos(y[1]), y[0] * y[1])], ["y"], ["s"])
    source = casadi_source(angle_function(5), [second])
    first_only = sincos.hoist(source, TEMPLATES)[0]
    assert "=sin(" in body_of(first_only, 1)
    code, n = sincos.hoist(source, TEMPLATES, functions=2)
    assert n == 5 and code.count("static inline void cd_sincos(") == 1
    for index in (0, 1):
        body = body_of(code, index)
        assert "=sin(" not in body and "=cos(" not in body and "cd_sincos(" in body
    fast, libm = compile_so(code, tmp_path, "fast"), compile_so(code, tmp_path, "libm", ["-DCD_SINCOS_LIBM"])
    rng = np.random.default_rng(4)
    for x, v in zip(rng.uniform(-4, 4, (50, 5)), rng.uniform(-4, 4, (50, 2))):
        b, = evaluate(libm, "second", [v], [3])
        assert np.array_equal(b, [math.sin(v[0]), math.cos(v[1]), v[0] * v[1]])
        assert ulps(evaluate(fast, "second", [v], [3])[0], b).max() <= 4
        assert ulps(evaluate(fast, "angles", [x], [11])[0][:10], evaluate(libm, "angles", [x], [11])[0][:10]).max() <= 4


@pytest.mark.parametrize("robot, scenario", [("go1", "4F3"), ("chain:n=16,floating=1", None)])
def test_outputs_with_libmvec_match_the_libm_build(out_dir, tmp_path, robot, scenario):
    """The whole function: with the prologue on libmvec and on libm, the outputs differ by a
    few ulp of their largest entry."""
    f = cd.generate(robot, scenario, "auto", out_dir=out_dir)
    m = f.manifest
    assert m["sincos"]["angles"] == sum(j["kind"] == "revolute" for j in m["q_layout"]) > 10
    assert m["sincos"]["route"].startswith("libmvec")
    source = f.so_path.with_suffix(".c").read_text()
    body = body_of(source, 0)
    assert "=sin(" not in body and "=cos(" not in body and "cd_sincos(" in body
    libm = compile_so(source.replace(f'#include "{f.so_path.stem}.h"', f'#include "{f.so_path.with_suffix(".h")}"'),
                      tmp_path, "libm", ["-DCD_SINCOS_LIBM"])
    rng = np.random.default_rng(5)
    sizes = [int(np.prod(o["shape"])) for o in m["outputs"]]
    worst = 0.0
    for _ in range(40):
        q = f.robot.random_q(rng)
        a = f(q).reshape(-1, order="F")
        b = evaluate(libm, m["function"], [q], sizes, max(m["sz_w"], 1))[0]
        worst = max(worst, np.abs(a - b).max() / np.spacing(np.abs(b).max()))
    print(f"{robot}: libmvec vs libm prologue, largest output difference {worst:.0f} ulp of the largest entry")
    assert worst <= 64


# -- the emission order --------------------------------------------------------------------
def test_reorder_keeps_every_operation(tmp_path):
    """go1 4F3 pv_osim in CasADi's order and reordered, compiled without multiply-add
    contraction: the same bits."""
    from casadi_delassus.api import constraint_set
    from casadi_delassus.codegen.trace import trace
    robot = cd.load_robot("go1")
    cs, _ = constraint_set(robot, "4F3")
    f, _, _ = trace(robot, cs, "pv_osim", name="pv")
    code = casadi_source(f)
    new = schedule.reorder(code)
    assert new != code and sorted(new.splitlines()) != sorted(code.splitlines())
    flags = ["-ffp-contract=off"]
    libs = [compile_so(c, tmp_path, name, flags) for c, name in ((code, "casadi_order"), (new, "greedy"))]
    rng = np.random.default_rng(1)
    for _ in range(20):
        q = robot.random_q(rng)
        a, b = (evaluate(lib, "pv", [q], [144], max(int(f.sz_w()), 1))[0] for lib in libs)
        assert np.array_equal(a, b)


def test_reorder_refuses_what_it_does_not_know():
    code = casadi_source(angle_function(2))
    bad = code.replace("  return 0;", "  casadi_copy(w, 3, res[0]);\n  return 0;", 1)
    with pytest.raises(CompilerError, match=r"cannot reorder line \d+ .*unknown statement.*casadi_copy"):
        schedule.reorder(bad)
