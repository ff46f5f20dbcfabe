"""The statements of CasADi's C for one SX function, as its code generator prints them
(CasADi 3.6-3.7, no memory objects): declarations, input reads, assignments, output writes.
The rewrites of that code (codegen/schedule.py, sincos.py, batch.py) recognise these lines
exactly and stop, naming the line, on anything else."""
from __future__ import annotations

import re

from ..errors import CompilerError

BODY_STARTS = ("static int casadi_f{}(const casadi_real** arg, casadi_real** res, casadi_int* iw, "
               "casadi_real* w, int mem) {{")
BODY_START = BODY_STARTS.format(0)
DECL = re.compile(r"  casadi_real (a\d+(?:, a\d+)*);")
INPUT = re.compile(r"  (a\d+)=arg\[(\d+)\]\? arg\[\2\]\[(\d+)\] : 0;")
OUTPUT = re.compile(r"  if \(res\[(\d+)\]!=0\) res\[\1\]\[(\d+)\]=(.+);")
ASSIGN = re.compile(r"  (a\d+)=(.+);")
# one token of an expression, with the white space before it (group 1): a number, a name or an operator
TOKEN = re.compile(r"(\s*)(?:(?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)|(?P<name>[A-Za-z_]\w*)|"
                   r"(?P<op><=|>=|==|!=|&&|\|\||[-+*/<>!?:(),]))")


def fail(lineno, line, why, what="rewrite"):
    raise CompilerError(f"cannot {what} line {lineno} of the generated code ({why}): {line.strip()[:120]}")


def tokens(text, lineno, line, what="rewrite"):
    """The TOKEN matches of the expression ``text`` (of line ``lineno``), in order; CompilerError
    naming the line at anything that is not a token."""
    found, pos, text = [], 0, text.rstrip()
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m or m.end() == pos:
            fail(lineno, line, f"unknown token at {text[pos:pos + 10]!r}", what)
        found.append(m)
        pos = m.end()
    return found


def function_body(casadi_code):
    """(index of its first line, the lines) of the evaluation function of the generated
    function (casadi_f0) in ``casadi_code``; CasADi's derivative functions follow it when the
    .so carries them (codegen/derivatives.py) and are left as they are."""
    lines = casadi_code.splitlines()
    first, end = function_bodies(lines, [0])[0]
    return first, lines[first:end]


def function_bodies(lines, indices):
    """[(index of its first line, index of its closing line)] of the evaluation functions
    casadi_f<k>, k in ``indices``, among the lines ``lines`` (one pass: a file of many functions)."""
    wanted = {BODY_STARTS.format(k): k for k in indices}
    starts = {}
    for i, line in enumerate(lines):
        if line in wanted:
            starts.setdefault(wanted[line], []).append(i)
    out = []
    for k in indices:
        found = starts.get(k, [])
        if len(found) != 1:
            raise CompilerError("cannot rewrite the generated code: expected exactly one CasADi function body "
                                f"'{BODY_STARTS.format(k)[:40]}…', found {len(found)}")
        end = next((i for i in range(found[0] + 1, len(lines)) if lines[i] == "}"), None)
        if end is None:
            raise CompilerError("cannot rewrite the generated code: the CasADi function body has no end")
        out.append((found[0] + 1, end))
    return out
