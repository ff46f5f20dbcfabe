"""C emission: CasADi's generated code wrapped by jinja2 templates (header with the q
layout and a convenience ``*_eval`` call), plus the JSON manifest."""
from __future__ import annotations

import re

import casadi as ca
import jinja2

_ENV = jinja2.Environment(loader=jinja2.PackageLoader("casadi_delassus", "codegen/templates"),
                          keep_trailing_newline=True, undefined=jinja2.StrictUndefined)


def work_sizes(f: ca.Function):
    return {"sz_arg": int(f.sz_arg()), "sz_res": int(f.sz_res()), "sz_iw": int(f.sz_iw()), "sz_w": int(f.sz_w())}


def casadi_source(f: ca.Function):
    cg = ca.CodeGenerator(f.name() + ".c", {"with_header": False, "with_mem": False})
    cg.add(f)
    return cg.dump()


def render(f: ca.Function, manifest: dict, stem: str):
    """Returns {filename: text} for ``stem``.c and ``stem``.h."""
    fname = f.name()
    ctx = dict(manifest, fname=fname, header=stem + ".h", guard=re.sub(r"\W", "_", fname).upper() + "_H",
               casadi_code=casadi_source(f), counts=manifest["op_count"], cse=manifest["cse"])
    return {stem + ".c": _ENV.get_template("function.c.j2").render(ctx),
            stem + ".h": _ENV.get_template("function.h.j2").render(ctx)}
