"""The single call's sin and cos of the joint angles: once, up front, vectorised.

CasADi prints ``sin`` and ``cos`` of a joint angle where an algorithm first needs them, and
gcc merges each pair into one libm ``sincos`` call (~12-13 ns per angle on Zen 3,
bench/peak.py) in the middle of the straight-line code, where the call clobbers every vector
register: what is live around it is stored and reloaded.  ``hoist`` rewrites CasADi's scalar
function body so that every sin/cos of an input entry (q[k] of a revolute joint) reads
``cd_sin[j]``/``cd_cos[j]``, arrays a prologue fills CD_SINCOS_LANES angles at a time with
glibc's vector math library (libmvec, ~2 ns per angle for both; its results are within a few
ulp of libm's, tests/codegen/test_sincos.py); the body then makes no call at all.  Without libmvec
(not x86-64 glibc, not GNU C, or ``-DCD_SINCOS_LIBM``) the prologue calls libm's sin and cos.
A sin/cos of anything else (a mimic joint's scaled angle) stays where it is.

Like codegen/vectorise.py, the rewrite recognises CasADi's statements exactly and changes only
the ``aN=sin(aM);``/``aN=cos(aM);`` lines whose argument holds an input entry at that point.
"""
from __future__ import annotations

import re

from .escape import Safe
from .precision import C_REAL, libm_name
from .statements import ASSIGN, DECL, INPUT, function_bodies

_SINCOS = re.compile(r"  (a\d+)=(sin|cos)\((a\d+)\);")
# angles are computed in groups of the widest lane count used: 4 doubles, 8 floats (32 bytes)
PAD = {"double": 4, "single": 8}


def hoisted_body(body):
    """(the body's lines with each sin/cos of an input entry replaced, [(input, entry)] of
    the angles in order of first use)."""
    holds, angles, out = {}, {}, []
    for line in body:
        m = _SINCOS.fullmatch(line)
        if m and holds.get(m[3]) is not None:
            j = angles.setdefault(holds[m[3]], len(angles))
            out.append(f"  {m[1]}=cd_{m[2]}[{j}];")
            holds[m[1]] = None
            continue
        if mi := INPUT.fullmatch(line):
            holds[mi[1]] = (int(mi[2]), int(mi[3]))
        elif ma := ASSIGN.fullmatch(line):
            holds[ma[1]] = None
        out.append(line)
    return out, list(angles)


def hoist(casadi_code, env, precision="double", functions=1):
    """(CasADi's code with its function's sin/cos of input entries computed up front (the
    helper of template sincos.c.j2 placed before the function), number of angles); in
    single precision with float vectors and libmvec's float sin/cos.  ``functions`` k > 1: the
    file's first k functions (casadi_f0 … casadi_f<k-1>) each computes its own up front with the
    one helper (the rollout's kinematics, codegen/contact_step.py render; the MuJoCo rollout's forward and
    contact-pair functions, codegen/mujoco_rollout.py render); the number is f0's."""
    lines, helper, count = casadi_code.splitlines(), None, 0
    bodies = function_bodies(lines, range(functions))
    for (first, end), index in sorted(zip(bodies, range(functions)), reverse=True):    # from the last, so that the
        body = lines[first:end]                                                        # earlier keep their lines
        new, angles = hoisted_body(body)
        count = len(angles) if index == 0 else count
        if angles:
            lines[first:first + len(body)] = with_prologue(new, angles, precision)
            helper = first - 1, len(angles)
    if helper is None:
        return casadi_code, 0
    pad, real = PAD[precision], C_REAL[precision]
    signature, angles = helper
    lines[signature:signature] = [env.get_template("sincos.c.j2").render(
        angles=angles, pad=pad, real=Safe(real), sin=Safe(libm_name("sin", precision)),
        cos=Safe(libm_name("cos", precision))).rstrip("\n")]
    return "\n".join(lines) + "\n", count


def with_prologue(body, angles, precision):
    """A hoisted body's lines with the prologue that fills cd_sin/cd_cos after its declarations."""
    pad, real = PAD[precision], C_REAL[precision]
    n = -(-len(angles) // pad) * pad
    values = ", ".join(f"arg[{i}]? arg[{i}][{k}] : 0" for i, k in angles) + ", 0" * (n - len(angles))
    decls = next(k for k, line in enumerate(body) if not DECL.fullmatch(line))
    prologue = [f"  {real} cd_angle[{n}] = {{{values}}}, cd_sin[{n}], cd_cos[{n}];",
                f"  cd_sincos({n}, cd_angle, cd_sin, cd_cos);"]
    return [*body[:decls], *prologue, *body[decls:]]


def target(macros):
    """The manifest's ``sincos`` entry from the compiled file's CD_ macros (vectorise.macros):
    how many angles the prologue computes and how (libmvec and its lane count, or libm)."""
    if "CD_SINCOS_ANGLES" not in macros:
        return {"angles": 0, "route": "none (no sin/cos of an input)"}
    return {"angles": int(macros["CD_SINCOS_ANGLES"]), "route": macros["CD_SINCOS_ROUTE"].strip('"')}
