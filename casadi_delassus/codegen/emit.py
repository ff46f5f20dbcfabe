"""C emission: CasADi's generated code wrapped by jinja2 templates (header with the q
layout and a convenience ``*_eval`` call), plus the JSON manifest."""
from __future__ import annotations

import ctypes

import casadi as ca

from . import precision as fp, schedule, sincos, vectorise
from .escape import Safe, environment

# Every string a template prints passes an escaping filter (codegen/escape.py).
TEMPLATES = environment("casadi_delassus", "codegen/templates")


def work_sizes(f: ca.Function):
    """CasADi's work-array sizes (entries) and what they take in bytes on this machine:
    arg/res hold pointers, iw casadi_int (long long), w doubles."""
    sizes = {"sz_arg": int(f.sz_arg()), "sz_res": int(f.sz_res()), "sz_iw": int(f.sz_iw()), "sz_w": int(f.sz_w())}
    entry = {"sz_arg": ctypes.sizeof(ctypes.c_void_p), "sz_res": ctypes.sizeof(ctypes.c_void_p),
             "sz_iw": ctypes.sizeof(ctypes.c_longlong), "sz_w": ctypes.sizeof(ctypes.c_double)}
    return sizes | {"work_bytes": {k[3:]: n * entry[k] for k, n in sizes.items()}}


def casadi_source(f: ca.Function, companions=(), precision="double"):
    """CasADi's C for ``f`` first (its body is casadi_f0), then the ``companions`` (CasADi's
    derivative functions of f, codegen/derivatives.py) in the same file; its values of the C
    type of ``precision`` (codegen/precision.py)."""
    cg = ca.CodeGenerator(f.name() + ".c", {"with_header": False, "with_mem": False,
                                           "casadi_real": fp.C_REAL[precision]})
    for g in (f, *companions):
        cg.add(g)
    return cg.dump()


def manifest_precision(manifest):
    """The manifest's precision ("double" when it names none)."""
    return manifest.get("precision", {}).get("type", "double")


def render(f: ca.Function, manifest: dict, stem: str, companions=()):
    """Returns {filename: text} for ``stem``.c and ``stem``.h."""
    fname = f.name()
    precision = manifest_precision(manifest)
    code = schedule.reorder(casadi_source(f, companions, precision))
    batch_code, batch_decl = vectorise.render(f, manifest, code, TEMPLATES, precision)
    scalar_code, _ = sincos.hoist(code, TEMPLATES, precision)
    if precision == "single":
        scalar_code = fp.to_float(scalar_code)
    ctx = dict(manifest, fname=fname, real=Safe(fp.C_REAL[precision]), header=stem + ".h", manifest_file=stem + ".json", guard=fname + "_H",
               macro=fname, casadi_code=Safe(scalar_code), counts=manifest["op_count"], cse=manifest["cse"],
               batch_code=Safe(batch_code), batch_decl=Safe(batch_decl))
    return {stem + ".c": TEMPLATES.get_template("function.c.j2").render(ctx),
            stem + ".h": TEMPLATES.get_template("function.h.j2").render(ctx)}
