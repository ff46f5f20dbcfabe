"""Batched evaluation, the compile side: ``<fn>_batch(n, x0, …, y0, …)`` evaluates a generated
function on n instances at once, SIMD across instances (``f(Q)`` calls it from Python on all
cores through the runtime's door: runtime/batch.py, runtime/door.c).

Memory order (C and Python alike): batch first, then each instance's entries in C (row-major)
order -- entry (i, a, b) of an input or output whose per-instance shape is rows x cols sits
at ``i*rows*cols + a*cols + b``; vectors are rows x 1.  A C-contiguous float64 numpy array
of shape (n, *shape) is therefore passed without a copy, and outputs come back as one.  (The
scalar function's own matrices are column-major, and so are the vector kernel's; the entry
point moves CD_BATCH_LANES consecutive entries of CD_BATCH_LANES instances into and out of the
lanes by one register transpose, whatever the shape, each entry to or from its column-major
slot: go1 4F3's 12 x 12 output in 18 transposes of 8 floats, not 24 row by row.)  A NULL input reads as zeros (CasADi's convention), a NULL output is not written.

Inside, CasADi's straight-line code for one instance is rewritten (``vectorize``) so that
every scalar becomes a GCC vector of CD_BATCH_LANES doubles, one instance per lane: the
lane count is the CPU's vector width (AVX-512 8, AVX 4, SSE2/NEON 2; floats in single
precision, codegen/precision.py: twice that; the preprocessor decides, so the same .c is
portable), sin/cos go through glibc's vector math library
(libmvec) where it exists, comparisons and ``?:`` become bit masks (GNU C has no vector
ternary), and rarer functions (pow, atan2, …) are applied lane by lane with the very scalar
function the single call uses.  Without GNU C vectors (or with ``-DCD_BATCH_LANES=1``) the
entry point loops over the scalar function.  The last, partial group of instances is padded
with copies of its last instance, so every instance goes through the same vector code: an
instance's result does not depend on n, on its position or on how a batch is split across
threads.

The rewrite parses every statement of the function body and fails loudly (CompilerError
naming the line) on anything it does not know; it never passes text through unchecked.
"""
from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

from ..errors import CompilerError
from .escape import Safe, c_comment, c_ident
from .precision import C_REAL, libm_name
from ..model.robot import unit_blocks
from ..runtime.inputs import UNIT_TOL
from .sincos import PAD, hoisted_body
from .statements import ASSIGN, DECL, INPUT, OUTPUT, fail, function_body, tokens

# -- the rewrite of CasADi's function body ------------------------------------------------
_HOISTED = re.compile(r"  (a\d+)=cd_(?:sin|cos)\[\d+\];")
# vector forms exact by construction (bit operations, correctly rounded sqrt, fmin/fmax as glibc's
# rule on x86-64, batch_vector.c.j2) or, for sin/cos, libmvec's (a few ulp; lane by lane libm without it)
_VECTOR_FUNCTIONS = {"sin": ("cd_batch_sin", 1), "cos": ("cd_batch_cos", 1), "sqrt": ("cd_batch_sqrt", 1),
                     "casadi_sq": ("cd_batch_sq", 1), "casadi_fabs": ("cd_batch_fabs", 1),
                     "fabs": ("cd_batch_fabs", 1), "copysign": ("cd_batch_copysign", 2),
                     **{f: ("cd_batch_fmax", 2) for f in ("fmax", "casadi_fmax")},
                     **{f: ("cd_batch_fmin", 2) for f in ("fmin", "casadi_fmin")}}
# applied lane by lane: the same scalar function as the single call (CasADi's helpers are
# defined earlier in the same file, and only when the scalar code uses them)
_LANEWISE = {**{f: 1 for f in ("exp", "log", "tan", "asin", "acos", "atan", "floor", "ceil", "erf", "sinh", "cosh",
                               "tanh", "asinh", "acosh", "atanh", "casadi_sign", "casadi_log1p", "casadi_expm1")},
             **{f: 2 for f in ("pow", "fmod", "atan2", "remainder", "casadi_hypot")}}
_CONSTANTS = ("casadi_inf", "casadi_nan")
_COMPARE = ("<", "<=", ">", ">=", "==", "!=")


def _fail(lineno, line, why):
    fail(lineno, line, why, "vectorise")


class _Expression:
    """Recursive-descent parser of one C expression of CasADi's scalar code (C precedence),
    printing its vector form: every value a cd_batch_v, literals splat, comparisons and logic
    as 1.0/0.0, ``c ? x : y`` a bitwise select."""

    def __init__(self, text, variables, lineno, line, precision="double"):
        self.variables, self.lineno, self.line, self.precision = variables, lineno, line, precision
        self.tokens = [(m.lastgroup, m[m.lastgroup]) for m in tokens(text, lineno, line, "vectorise")]
        self.pos = 0

    def fail(self, why):
        _fail(self.lineno, self.line, why)

    def peek(self):
        return self.tokens[self.pos][1] if self.pos < len(self.tokens) else None

    def take(self, expected=None):
        if self.pos >= len(self.tokens):
            self.fail("unexpected end of expression")
        kind, value = self.tokens[self.pos]
        if expected is not None and value != expected:
            self.fail(f"expected {expected!r}, found {value!r}")
        self.pos += 1
        return kind, value

    def parse(self):
        out = self.conditional()
        if self.pos != len(self.tokens):
            self.fail(f"unexpected {self.peek()!r}")
        return out

    def conditional(self):
        cond = self.binary(0)
        if self.peek() != "?":
            return cond
        self.take("?")
        yes = self.conditional()
        self.take(":")
        return f"cd_batch_select({cond}, {yes}, {self.conditional()})"

    _LEVELS = (("||",), ("&&",), ("==", "!="), ("<", "<=", ">", ">="), ("+", "-"), ("*", "/"))

    def binary(self, level):
        if level == len(self._LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek() in self._LEVELS[level]:
            _, op = self.take()
            right = self.binary(level + 1)
            if op in _COMPARE:
                left = f"cd_batch_bool({left}{op}{right})"
            elif op == "&&":
                left = f"cd_batch_and({left}, {right})"
            elif op == "||":
                left = f"cd_batch_or({left}, {right})"
            else:
                left = f"({left}{op}{right})"
        return left

    def unary(self):
        if self.peek() == "-":
            self.take()
            return f"(-{self.unary()})"
        if self.peek() == "!":
            self.take()
            return f"cd_batch_not({self.unary()})"
        if self.peek() == "+":
            self.take()
            return self.unary()
        return self.primary()

    def primary(self):
        kind, value = self.take()
        if kind == "num" or value in _CONSTANTS:
            return f"CD_BATCH_SPLAT({value})"
        if value == "(":
            inner = self.conditional()
            self.take(")")
            return f"({inner})"
        if kind != "name":
            self.fail(f"unexpected {value!r}")
        if self.peek() != "(":
            if value not in self.variables:
                self.fail(f"unknown name {value!r}")
            return value
        self.take("(")
        args = [self.conditional()]
        while self.peek() == ",":
            self.take(",")
            args.append(self.conditional())
        self.take(")")
        if value in _VECTOR_FUNCTIONS:
            name, arity = _VECTOR_FUNCTIONS[value]
        elif value in _LANEWISE:
            name, arity = f"cd_batch_lanewise{_LANEWISE[value]}", _LANEWISE[value]
            args = [libm_name(value, self.precision)] + args
        else:
            self.fail(f"function {value!r} has no vector form")
        if len(args) - (name.startswith("cd_batch_lanewise")) != arity:
            self.fail(f"{value} takes {arity} argument(s)")
        return f"{name}({', '.join(args)})"


def vectorize(casadi_code, n_in, n_out, in_sizes, out_sizes, precision="double", scalar_sincos=False):
    """The body of ``cd_batch_kernel(const cd_batch_v** arg, cd_batch_v** res)``: CasADi's
    scalar body with every statement rewritten for vectors (of floats in single
    ``precision``: lane-by-lane calls name libm's float functions).  Inputs and outputs must
    be read and written within ``in_sizes`` / ``out_sizes`` entries (checked).  ``scalar_sincos``:
    the joint angles' sin/cos by the scalar functions' own helper (sincos.c.j2's ``cd_sincos``,
    in the same file), whose results do not depend on the lane count, instead of libmvec at it."""
    first, body = function_body(casadi_code)
    body, angles = hoisted_body(body)          # sin/cos of inputs first, as the single call (codegen/sincos.py)
    variables, out = set(), []
    for lineno, line in enumerate(body, first + 1):
        if not line.strip():
            continue
        if m := _HOISTED.fullmatch(line):
            if m[1] not in variables:
                _fail(lineno, line, f"assignment to undeclared {m[1]!r}")
            out.append(line)
        elif m := DECL.fullmatch(line):
            names = m[1].split(", ")
            if variables & set(names):
                _fail(lineno, line, "variable declared twice")
            variables.update(names)
            out.append(f"  cd_batch_v {m[1]};")
        elif m := INPUT.fullmatch(line):
            var, i, k = m[1], int(m[2]), int(m[3])
            if var not in variables or i >= n_in or k >= in_sizes[i]:
                _fail(lineno, line, "input read out of range or into an undeclared variable")
            out.append(f"  {var}=arg[{i}][{k}];")
        elif m := OUTPUT.fullmatch(line):
            i, k = int(m[1]), int(m[2])
            if i >= n_out or k >= out_sizes[i]:
                _fail(lineno, line, "output written out of range")
            out.append(f"  res[{i}][{k}]={_Expression(m[3], variables, lineno, line, precision).parse()};")
        elif m := ASSIGN.fullmatch(line):
            if m[1] not in variables:
                _fail(lineno, line, f"assignment to undeclared {m[1]!r}")
            out.append(f"  {m[1]}={_Expression(m[2], variables, lineno, line, precision).parse()};")
        elif line == "  return 0;":
            out.append(line)
        else:
            _fail(lineno, line, "unknown statement")
    if not out or out[-1] != "  return 0;":
        raise CompilerError("cannot vectorise: the CasADi function body does not end with 'return 0;'")
    if angles:
        decls = next(k for k, line in enumerate(out) if not line.startswith("  cd_batch_v "))
        out[decls:decls] = (_scalar_sincos if scalar_sincos else _vector_sincos)(angles, precision)
    return "\n".join(out)


def _vector_sincos(angles, precision):
    """The prologue of the angles' sin/cos by the vector forms (libmvec at the lane count)."""
    return [f"  cd_batch_v cd_sin[{len(angles)}], cd_cos[{len(angles)}];"] + \
        [f"  cd_sin[{j}]=cd_batch_sin(arg[{i}][{k}]); cd_cos[{j}]=cd_batch_cos(arg[{i}][{k}]);"
         for j, (i, k) in enumerate(angles)]


def _scalar_sincos(angles, precision):
    """The prologue of the angles' sin/cos by sincos.c.j2's cd_sincos over every lane of every angle (a multiple of
    its padding in all, zeros above): entry by entry what the scalar functions' prologue computes."""
    n = -(-len(angles) // PAD[precision]) * PAD[precision]
    values = ", ".join(f"arg[{i}][{k}]" for i, k in angles)
    return [f"  cd_batch_v cd_sin[{n}], cd_cos[{n}], cd_angle[{n}] = {{{values}}};",
            f"  cd_sincos({n} * CD_BATCH_LANES, ({C_REAL[precision]}*)cd_angle, ({C_REAL[precision]}*)cd_sin, "
            f"({C_REAL[precision]}*)cd_cos);"]


# -- emitted C -----------------------------------------------------------------------------
def io_layout(specs):
    """Template view of inputs or outputs: per-instance rows x cols, vectors (and r x 1
    matrices) as 1 x r, which indexes them alike in row- and column-major order and lets the
    gather and scatter move whole vectors along them."""
    out = []
    for k, s in enumerate(specs):
        shape = list(s["shape"]) + [1] * (2 - len(s["shape"]))
        if shape[1] == 1:
            shape = [1, shape[0]]
        out.append({"k": k, "rows": int(shape[0]), "cols": int(shape[1]), "size": int(shape[0] * shape[1]),
                    "label": c_comment(f"{s['name']} [{' x '.join(map(str, s['shape']))}]"),
                    "slots": _slots(*shape)})
    return out


def _slots(rows, cols):
    """Where CasADi's (column-major) code keeps the row-major entries 0, 1, … of a rows x cols
    matrix, as C numbers; None for a vector (1 x r: in place)."""
    if rows == 1:
        return None
    return Safe(", ".join(str(a + rows * b) for a in range(rows) for b in range(cols)))


def signature(fname, inputs, outputs, precision="double"):
    real = C_REAL[precision]
    params = ["casadi_int n"] + [f"const {real}* x{i['k']}" for i in io_layout(inputs)] + \
             [f"{real}* y{o['k']}" for o in io_layout(outputs)]
    return f"int {fname}_batch({', '.join(params)})"


def transpose(lanes):
    """The body of CD_BATCH_TRANSPOSE(t) for ``lanes`` vectors of ``lanes`` lanes: log2(lanes)
    stages, stage b (1, 2, 4, …) swapping bit b of the row and of the column index of every
    entry (the off-diagonal b × b blocks of each 2b × 2b block) by two shuffles per row pair;
    after all of them t[j][l] is the former t[l][j]."""
    lines, b = [], 1
    while b < lanes:
        low = [p if (p // b) % 2 == 0 else lanes + p - b for p in range(lanes)]
        high = [p + b if (p // b) % 2 == 0 else lanes + p for p in range(lanes)]
        for i in (i for i in range(lanes) if (i // b) % 2 == 0):
            lines.append(f"    {{ cd_batch_v lo_ = CD_BATCH_SHUFFLE(t[{i}], t[{i + b}], {', '.join(map(str, low))}), "
                         f"hi_ = CD_BATCH_SHUFFLE(t[{i}], t[{i + b}], {', '.join(map(str, high))}); "
                         f"t[{i}] = lo_; t[{i + b}] = hi_; }}")
        b *= 2
    return " \
".join(lines)


def _c_names(precision):
    """The C names batch.c.j2 uses in ``precision``: libmvec's macros (templates/libmvec.c.j2),
    the square-root intrinsics of each vector width, libm's functions, the lane mask type,
    the intrinsics' suffix (ps, pd), the lane numbers of a 256-bit vector."""
    single = precision == "single"
    ps, m = ("ps", "") if single else ("pd", "d")
    names = {f"mv{b}": f"CD_MVEC_{'F' if single else ''}{b // (4 if single else 8)}" for b in (64, 32, 16)}
    for bits, pre in ((512, "_mm512"), (256, "_mm256"), (128, "_mm")):
        names |= {f"sqrt{bits}": f"{pre}_sqrt_{ps}", f"m{bits}": f"__m{bits}{m}"}
    names |= {name: libm_name(name, precision) for name in ("sqrt", "fabs", "sin", "cos", "fmax", "fmin")}
    names |= {"ps": ps, "iota256": ", ".join(map(str, range(8 if single else 4)))}     # 0, 1, … over a 256-bit vector
    return {k: Safe(v) for k, v in (names | {"mask": "int" if single else "long long"}).items()}


def vector_context(precision="double"):
    """What templates/batch_vector.c.j2 (the vector type, lane count and helpers) reads in ``precision``."""
    return dict(single=precision == "single", real=Safe(C_REAL[precision]), c=_c_names(precision),
                transposes=[(n, Safe(transpose(n))) for n in ((8, 16) if precision == "single" else (8,))])


def kernel_function(name, f, casadi_code, precision="double", scalar_sincos=False):
    """``static int name(const cd_batch_v** arg, cd_batch_v** res)``: CasADi's code of ``f`` (``casadi_code``, f
    alone in it) with every scalar a vector, lane l one instance (all inputs and outputs dense, column-major, as the
    scalar function reads and writes them); for code that keeps its instances in lanes (the rollout's lane groups,
    codegen/contact_rollout.py and mujoco_rollout.py) rather than in memory as the batched entry point does;
    ``scalar_sincos``: see vectorize."""
    sizes = [[int(f.numel_in(i)) for i in range(f.n_in())], [int(f.numel_out(i)) for i in range(f.n_out())]]
    body = vectorize(casadi_code, f.n_in(), f.n_out(), *sizes, precision, scalar_sincos)
    return f"static int {c_ident(name)}(const cd_batch_v** arg, cd_batch_v** res) {{\n{body}\n}}"


def render(f, manifest, casadi_code, env, precision="double"):
    """The C of the batched entry point (appended to the .c after ``casadi_code``, CasADi's
    code of ``f``) and its declaration (for the .h), from the templates of jinja2 ``env``;
    in single ``precision`` vectors of floats, twice the lanes."""
    inputs, outputs = io_layout(manifest["inputs"]), io_layout(manifest["outputs"])
    if len(inputs) != f.n_in() or len(outputs) != f.n_out():
        raise CompilerError(f"{f.name()}: manifest and function disagree on inputs/outputs")
    kernel = vectorize(casadi_code, f.n_in(), f.n_out(), [i["size"] for i in inputs], [o["size"] for o in outputs],
                       precision)
    fname = c_ident(f.name())
    for spec, x in zip(manifest["inputs"], inputs):
        x["positive"] = spec["name"] == "R"
    q = [x["k"] for spec, x in zip(manifest["inputs"], inputs) if spec["name"] == "q"]
    units = [{"k": q[0], "start": sl.start, "stop": sl.stop}
             for _, sl, _ in unit_blocks(manifest.get("q_layout", ()))] if q else []
    ctx = dict(fname=fname, inputs=inputs, outputs=outputs, kernel=Safe(kernel), units=units, unit_tol=UNIT_TOL,
               signature=Safe(signature(fname, manifest["inputs"], manifest["outputs"], precision)),
               **vector_context(precision), sz_iw=max(int(f.sz_iw()), 1), sz_w=max(int(f.sz_w()), 1), sz_arg=max(int(f.sz_arg()), len(inputs), 1),
               sz_res=max(int(f.sz_res()), len(outputs), 1))
    return env.get_template("batch.c.j2").render(ctx), env.get_template("batch.h.j2").render(ctx)


def macros(c_file, cflags, cc):
    """The CD_* macros the C preprocessor defines for ``c_file`` with ``cflags`` (what the
    target picks: lanes, instruction set, sin/cos routes), so that the manifest states what
    the .so holds."""
    try:
        proc = subprocess.run([*shlex.split(cc), *[f for f in cflags if not f.startswith("-O")], "-E", "-dM", str(c_file)],
                              capture_output=True, text=True, errors="replace")
    except OSError as exc:
        raise CompilerError(f"cannot run the C compiler {cc}: {exc}") from None
    if proc.returncode != 0:
        raise CompilerError(f"cannot read the targets of {Path(c_file).name}: {proc.stderr.strip()[:200]}")
    return dict(re.findall(r"^#define (CD_\w+) (.+)$", proc.stdout, re.M))


def target(manifest, macros):
    """The manifest's ``batch`` entry: the entry point and what the compiler picks for the
    batched code (``macros``: see macros())."""
    if not {"CD_BATCH_LANES", "CD_BATCH_ISA", "CD_BATCH_SINCOS"} <= set(macros):
        raise CompilerError(f"cannot read the batch target of {manifest['function']}: its CD_BATCH_ macros are missing")
    return {"entry": f"{manifest['function']}_batch", "lanes": int(macros["CD_BATCH_LANES"]), "isa": macros["CD_BATCH_ISA"].strip('"'),
            "sincos": macros["CD_BATCH_SINCOS"].strip('"'), "layout": "batch first, row-major (C order) per instance"}
