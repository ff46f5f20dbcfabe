"""Batched evaluation: ``<fn>_batch(n, x0, …, y0, …)`` evaluates a generated function on n
instances at once, SIMD across instances, and ``f(Q)`` calls it from Python on all cores.

Memory order (C and Python alike): batch first, then each instance's entries in C (row-major)
order -- entry (i, a, b) of an input or output whose per-instance shape is rows x cols sits
at ``i*rows*cols + a*cols + b``; vectors are rows x 1.  A C-contiguous float64 numpy array
of shape (n, *shape) is therefore passed without a copy, and outputs come back as one.  (The
scalar function's own matrices are column-major; the batched entry point transposes each
instance while it moves it into and out of SIMD registers anyway, so row-major costs
nothing.)  A NULL input reads as zeros (CasADi's convention), a NULL output is not written.

Inside, CasADi's straight-line code for one instance is rewritten (``vectorize``) so that
every scalar becomes a GCC vector of CD_BATCH_LANES doubles, one instance per lane: the
lane count is the CPU's vector width (AVX-512 8, AVX 4, SSE2/NEON 2; the preprocessor
decides, so the same .c is portable), sin/cos go through glibc's vector math library
(libmvec) where it exists, comparisons and ``?:`` become bit masks (GNU C has no vector
ternary), and rarer functions (fmin, pow, …) are applied lane by lane with the very scalar
function the single call uses.  Without GNU C vectors (or with ``-DCD_BATCH_LANES=1``) the
entry point loops over the scalar function.  The last, partial group of instances is padded
with copies of its last instance, so every instance goes through the same vector code: an
instance's result does not depend on n, on its position or on how a batch is split across
threads.

The rewrite parses every statement of the function body and fails loudly (CompilerError
naming the line) on anything it does not know; it never passes text through unchecked.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import re
import shlex
import subprocess
import threading
from pathlib import Path

import numpy as np

from ..errors import BatchInputError, CompilerError, DelassusError, InputError
from .escape import Safe, c_comment, c_ident
from ..model.robot import unit_blocks
from .inputs import UNIT_TOL, as_input, out_array, refuse_masked
from .sincos import hoisted_body
from .statements import ASSIGN, DECL, INPUT, OUTPUT, fail, function_body

# -- the rewrite of CasADi's function body ------------------------------------------------
_HOISTED = re.compile(r"  (a\d+)=cd_(?:sin|cos)\[\d+\];")
_TOKEN = re.compile(r"\s*(?:(?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)|(?P<name>[A-Za-z_]\w*)|"
                    r"(?P<op><=|>=|==|!=|&&|\|\||[-+*/<>!?:(),]))")

# vector forms exact by construction (bit operations, correctly rounded sqrt) or, for
# sin/cos, libmvec's (a few ulp; lane by lane libm without it)
_VECTOR_FUNCTIONS = {"sin": ("cd_batch_sin", 1), "cos": ("cd_batch_cos", 1), "sqrt": ("cd_batch_sqrt", 1),
                     "casadi_sq": ("cd_batch_sq", 1), "casadi_fabs": ("cd_batch_fabs", 1),
                     "fabs": ("cd_batch_fabs", 1), "copysign": ("cd_batch_copysign", 2)}
# applied lane by lane: the same scalar function as the single call (CasADi's helpers are
# defined earlier in the same file, and only when the scalar code uses them)
_LANEWISE = {**{f: 1 for f in ("exp", "log", "tan", "asin", "acos", "atan", "floor", "ceil", "erf", "sinh", "cosh",
                               "tanh", "asinh", "acosh", "atanh", "casadi_sign", "casadi_log1p", "casadi_expm1")},
             **{f: 2 for f in ("pow", "fmod", "atan2", "remainder", "fmin", "fmax", "casadi_fmin", "casadi_fmax",
                               "casadi_hypot")}}
_CONSTANTS = ("casadi_inf", "casadi_nan")
_COMPARE = ("<", "<=", ">", ">=", "==", "!=")


def _fail(lineno, line, why):
    fail(lineno, line, why, "vectorise")


class _Expression:
    """Recursive-descent parser of one C expression of CasADi's scalar code (C precedence),
    printing its vector form: every value a cd_batch_v, literals splat, comparisons and logic
    as 1.0/0.0, ``c ? x : y`` a bitwise select."""

    def __init__(self, text, variables, lineno, line):
        self.variables, self.lineno, self.line = variables, lineno, line
        self.tokens, pos = [], 0
        text = text.rstrip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if not m or m.end() == pos:
                _fail(lineno, line, f"unknown token at {text[pos:pos + 10]!r}")
            self.tokens.append((m.lastgroup, m.group(m.lastgroup)))
            pos = m.end()
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
            args = [value] + args
        else:
            self.fail(f"function {value!r} has no vector form")
        if len(args) - (name.startswith("cd_batch_lanewise")) != arity:
            self.fail(f"{value} takes {arity} argument(s)")
        return f"{name}({', '.join(args)})"


def vectorize(casadi_code, n_in, n_out, in_sizes, out_sizes):
    """The body of ``cd_batch_kernel(const cd_batch_v** arg, cd_batch_v** res)``: CasADi's
    scalar body with every statement rewritten for vectors.  Inputs and outputs must be read
    and written within ``in_sizes`` / ``out_sizes`` entries (checked)."""
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
            out.append(f"  res[{i}][{k}]={_Expression(m[3], variables, lineno, line).parse()};")
        elif m := ASSIGN.fullmatch(line):
            if m[1] not in variables:
                _fail(lineno, line, f"assignment to undeclared {m[1]!r}")
            out.append(f"  {m[1]}={_Expression(m[2], variables, lineno, line).parse()};")
        elif line == "  return 0;":
            out.append(line)
        else:
            _fail(lineno, line, "unknown statement")
    if not out or out[-1] != "  return 0;":
        raise CompilerError("cannot vectorise: the CasADi function body does not end with 'return 0;'")
    if angles:
        decls = next(k for k, line in enumerate(out) if not line.startswith("  cd_batch_v "))
        out[decls:decls] = [f"  cd_batch_v cd_sin[{len(angles)}], cd_cos[{len(angles)}];"] + \
            [f"  cd_sin[{j}]=cd_batch_sin(arg[{i}][{k}]); cd_cos[{j}]=cd_batch_cos(arg[{i}][{k}]);"
             for j, (i, k) in enumerate(angles)]
    return "\n".join(out)


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
                    "label": c_comment(f"{s['name']} [{' x '.join(map(str, s['shape']))}]")})
    return out


def signature(fname, inputs, outputs):
    params = ["casadi_int n"] + [f"const double* x{i['k']}" for i in io_layout(inputs)] + \
             [f"double* y{o['k']}" for o in io_layout(outputs)]
    return f"int {fname}_batch({', '.join(params)})"


def render(f, manifest, casadi_code, env):
    """The C of the batched entry point (appended to the .c after ``casadi_code``, CasADi's
    code of ``f``) and its declaration (for the .h), from the templates of jinja2 ``env``."""
    inputs, outputs = io_layout(manifest["inputs"]), io_layout(manifest["outputs"])
    if len(inputs) != f.n_in() or len(outputs) != f.n_out():
        raise CompilerError(f"{f.name()}: manifest and function disagree on inputs/outputs")
    kernel = vectorize(casadi_code, f.n_in(), f.n_out(), [i["size"] for i in inputs], [o["size"] for o in outputs])
    fname = c_ident(f.name())
    for spec, x in zip(manifest["inputs"], inputs):
        x["positive"] = spec["name"] == "R"
    q = [x["k"] for spec, x in zip(manifest["inputs"], inputs) if spec["name"] == "q"]
    units = [{"k": q[0], "start": sl.start, "stop": sl.stop}
             for _, sl, _ in unit_blocks(manifest.get("q_layout", ()))] if q else []
    ctx = dict(fname=fname, inputs=inputs, outputs=outputs, kernel=Safe(kernel), units=units, unit_tol=UNIT_TOL,
               signature=Safe(signature(fname, manifest["inputs"], manifest["outputs"])),
               sz_iw=max(int(f.sz_iw()), 1), sz_w=max(int(f.sz_w()), 1), sz_arg=max(int(f.sz_arg()), len(inputs), 1),
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


# -- the Python call path -------------------------------------------------------------------
# SX instructions per thread's share below which another thread costs more than it saves:
# handing a share to a worker and waking it takes tens of µs, a batch runs about 15
# instructions per ns per core (bench/batch.py), so a share is at least ~200 µs of work
MIN_SHARE_INSTRUCTIONS = 3_000_000


def cores():
    """The cores this process may run on (taskset / cgroups respected)."""
    return len(_allowed_cpus())


class _Worker:
    """A thread bound to one CPU, running the jobs put in its queue."""

    def __init__(self, cpu):
        self.jobs = queue.SimpleQueue()
        threading.Thread(target=self._work, args=(cpu,), name=f"cd-batch-cpu{cpu}", daemon=True).start()

    def _work(self, cpu):
        _bind(cpu)
        while True:
            fn, shares, done = self.jobs.get()
            try:
                done.put(([fn(*s) for s in shares], None))
            except BaseException as exc:   # noqa: BLE001 - handed to the caller
                done.put((None, exc))


_pool_lock = threading.Lock()
_pool = {}


def _worker(cpu):
    with _pool_lock:
        if cpu not in _pool:
            _pool[cpu] = _Worker(cpu)
        return _pool[cpu]


def _allowed_cpus():
    try:
        return tuple(sorted(os.sched_getaffinity(0)))
    except AttributeError:
        return tuple(range(os.cpu_count() or 1))


def _libc_sched_getcpu():
    try:
        fn = ctypes.CDLL(None).sched_getcpu
    except (AttributeError, OSError):
        return None
    fn.restype, fn.argtypes = ctypes.c_int, []
    return fn


_sched_getcpu = _libc_sched_getcpu()


def _bind(cpu):
    """The calling thread bound to ``cpu``, where that is possible (not on macOS, in a sandbox
    that forbids it, or for a CPU taken away: the thread then stays unbound)."""
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setaffinity(0, {cpu})


def share_out(fn, shares):
    """[fn(*share)] for every share, share k on the (k mod c)-th of the c CPUs the calling thread
    may use, starting with the one it runs on: the calling thread takes the shares of its own
    CPU, a worker thread bound to each other CPU the rest.  Left alone, the kernel's wake-up
    placement often put a just-woken worker on the CPU of the thread that woke it and moved
    it only at the next load balance, milliseconds later: the two threads of a 2-core batch
    then ran one after the other (bench/batch.py measured no gain from the second core).
    The caller itself is left unbound: with every other CPU held by a bound worker the kernel
    has no reason to move it, and binding and unbinding it on every call cost more than it
    saved (README "Batches")."""
    cpus = _allowed_cpus()
    if len(cpus) == 1 or len(shares) == 1:
        return [fn(*s) for s in shares]
    here = _sched_getcpu() if _sched_getcpu else -1
    here = here if here in cpus else cpus[0]
    others = [c for c in cpus if c != here]
    width = len(others) + 1
    boxes = []
    for j, cpu in enumerate(others[:len(shares) - 1], 1):
        boxes.append(queue.SimpleQueue())
        _worker(cpu).jobs.put((fn, shares[j::width], boxes[-1]))
    out = [None] * len(shares)
    out[::width] = [fn(*s) for s in shares[::width]]
    for j, box in enumerate(boxes, 1):
        results, exc = box.get()
        if exc is not None:
            raise exc
        out[j::width] = results
    return out


def _forget_pool():      # a forked child has the pool's objects but not its threads
    global _pool, _pool_lock
    _pool, _pool_lock = {}, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


class BatchFunction:
    """ctypes binding of ``<fn>_batch`` of one compiled function (stateless: safe from threads)."""

    def __init__(self, f):
        """The entry point of the CompiledFunction ``f``, from the library ``f`` loaded and
        checked (codegen/loader.py: only symbols that library itself defines)."""
        from .loader import own_symbol
        manifest, so_path = f.manifest, f.so_path
        info = manifest.get("batch")
        if not info:
            raise DelassusError(f"{so_path.name} was generated without a batched entry point: regenerate it (--force)")
        self.manifest, self.inputs, self.outputs = manifest, manifest["inputs"], manifest["outputs"]
        entry = f"{manifest['function']}_batch"
        if info.get("entry") != entry:
            raise DelassusError(f"{so_path.name}: the manifest's batched entry point is not {entry}: regenerate it")
        argtypes = [ctypes.c_longlong] + [ctypes.c_void_p] * (len(self.inputs) + len(self.outputs))
        self._fn = own_symbol(f._lib, f._mapped, entry, ctypes.c_int, argtypes, label=so_path)
        self.lanes = int(own_symbol(f._lib, f._mapped, entry + "_lanes", ctypes.c_int, [], label=so_path)())
        self.per_instance = max(int(manifest.get("op_count", {}).get("instructions", 0)), 1)
        if self.lanes != info["lanes"]:
            raise DelassusError(f"{so_path.name} computes {self.lanes} lanes, its manifest says {info['lanes']}")

    def chunks(self, n, threads):
        """[(start, stop)] splitting n instances over at most ``threads`` threads at multiples of
        the lane count, each at least MIN_SHARE_INSTRUCTIONS of work."""
        threads = max(1, min(threads, n * self.per_instance // MIN_SHARE_INSTRUCTIONS))
        groups = -(-n // self.lanes)
        per = -(-groups // threads) * self.lanes
        return [(s, min(s + per, n)) for s in range(0, n, per)] or [(0, 0)]

    def run(self, n, ins, outs, threads):
        """``ins``/``outs``: C-contiguous float64 arrays (batch first) or None, in manifest order."""
        arrays = [(a.ctypes.data, a.nbytes // n) if a is not None else None for a in ins + outs]

        def call(start, stop):
            return self._fn(stop - start, *[None if a is None else a[0] + start * a[1] for a in arrays])
        parts = self.chunks(n, threads)
        codes = share_out(call, parts)
        for (start, _), code in zip(parts, codes):
            if code < 0:
                self.refuse(start - 1 - code, ins)
        if any(codes):
            raise DelassusError(f"{self.manifest['function']}_batch returned an error")

    def refuse(self, i, ins):
        """Raise the single call's one-line InputError for instance i, which the batched code
        refused (codegen/inputs.as_input says why)."""
        try:
            for spec, a in zip(self.inputs, ins):
                as_input(spec, a[i], self.manifest)
        except InputError as exc:
            raise BatchInputError(i, str(exc)) from None
        raise BatchInputError(i, "an input the single call refuses")


def door_binding(f):
    """(address of ``<fn>_batch``, lanes, instructions per instance, MIN_SHARE_INSTRUCTIONS):
    what the door's own batch path (door.c, batch_call) needs to split a batch as ``chunks``
    and ``share_out`` do, for a function of q alone with a batched entry point and at most 4
    outputs; None otherwise (its batches all come here)."""
    if [i["name"] for i in f.inputs] != ["q"] or not f.manifest.get("batch") or not 1 <= len(f.output_specs) <= 4:
        return None
    f._batch = b = BatchFunction(f)
    return ctypes.cast(b._fn, ctypes.c_void_p).value, b.lanes, b.per_instance, MIN_SHARE_INSTRUCTIONS


def _first_value(f, first, inputs):
    name = f.inputs[0]["name"]
    return first[0] if first else inputs.get(name)


def is_batched(f, first, inputs, threads=None):
    """Whether a call of ``f`` is a batch: its first input (q, or a stage's own first input) is
    given with a leading batch dimension, i.e. has one dimension more than one instance
    (a column vector of the right size stays a single call)."""
    x = _first_value(f, first, inputs)
    spec = f.inputs[0]["shape"]
    try:
        shape = np.shape(x)
    except ValueError:          # ragged: not a batch; the single call's checks name the problem
        shape = ()
    batched = len(shape) == len(spec) + 1 and not (len(spec) == 1 and shape == (spec[0], 1))
    check_threads(threads)
    return batched


def check_threads(threads):
    """An InputError unless ``threads`` is None or a count (an integer >= 1; a bool is no count)."""
    if threads is not None and (not isinstance(threads, (int, np.integer)) or isinstance(threads, (bool, np.bool_))
                                or threads < 1):
        raise InputError(f"threads must be a positive integer, got {threads!r}")


def _batch_inputs(f, first, inputs):
    """(n, [arrays]) from the call's inputs: each (n, *shape), C-contiguous float64; an input
    given for one instance is repeated for all."""
    if first:
        inputs = {f.inputs[0]["name"]: first[0], **inputs}
    names = [s["name"] for s in f.inputs]
    extra = set(inputs) - set(names)
    if extra:
        raise InputError(f"unexpected inputs {sorted(extra)}; this function takes {names}")
    lead = np.asarray(inputs[names[0]])
    n = lead.shape[0]
    values = []
    for spec in f.inputs:
        if spec["name"] not in inputs:
            raise InputError(f"missing input {spec['name']} ({' x '.join(map(str, spec['shape']))})")
        shape = tuple(spec["shape"])
        refuse_masked(spec["name"], inputs[spec["name"]])
        a = np.asarray(inputs[spec["name"]])
        if a.dtype.kind not in "fiub":
            raise InputError(f"input {spec['name']} holds {a.dtype}, not numbers")
        if a.shape == shape and spec is not f.inputs[0]:
            a = np.broadcast_to(a, (n, *shape))
        elif len(shape) == 1 and a.shape == (n, *shape, 1):    # vectors as outputs give them: N x r x 1
            a = a.reshape(n, *shape)
        elif a.shape != (n, *shape):
            want = " x ".join(map(str, (n, *shape)))
            raise InputError(f"input {spec['name']} has shape {a.shape}; a batch of {n} needs {want}"
                             + (f" (nq = {f.manifest['nq']})" if spec["name"] == "q" else ""))
        values.append(np.ascontiguousarray(a, dtype=np.float64))
    return n, values


def aligned_empty(shape, align=64):
    """np.empty(shape) whose data starts at a multiple of ``align`` bytes (the batched code
    streams large outputs with aligned vector stores)."""
    size = int(np.prod(shape))
    raw = np.empty(size + align // 8)
    start = (-raw.ctypes.data % align) // 8
    return raw[start:start + size].reshape(shape)


def _output_buffer(spec, n, given):
    shape = (n, *spec["shape"])
    return aligned_empty(shape) if given is None else out_array(spec["name"], shape, given)


def evaluate(f, first, inputs, threads=None, out=None, only_first=False):
    """Outputs {name: (n, *shape) array} of a batched call of the CompiledFunction ``f``.
    ``out``: an array for the first output (``only_first``) or {name: array}; ``threads``:
    default all cores."""
    if getattr(f, "_batch", None) is None:
        f._batch = BatchFunction(f)
    n, ins = _batch_inputs(f, first, inputs)
    specs = f.output_specs
    wanted = specs[:1] if only_first else specs
    given = {specs[0]["name"]: out} if only_first else dict(out or {})
    unknown = set(given) - {s["name"] for s in specs}
    if unknown:
        raise InputError(f"out names unknown outputs {sorted(unknown)}; this function has {[s['name'] for s in specs]}")
    bufs = {s["name"]: _output_buffer(s, n, given.get(s["name"])) for s in wanted}
    # an out= over an input's memory would be written before all of that input is read
    ins = [a.copy() if any(np.may_share_memory(a, b) for b in bufs.values()) else a for a in ins]
    if n:
        f._batch.run(n, ins, [bufs.get(s["name"]) for s in specs], cores() if threads is None else int(threads))
    return bufs
