"""Contact modes: which of a library's k constraints are active, as a bit mask (bit i = the
i-th constraint given), and how users name them.

``--modes`` (Python ``modes=``) chooses the modes of a library:

- ``all`` (the default): every subset, 2^k modes, the empty one included (k ≤ MAX_ALL);
- ``N-of-k``: every set of exactly N of the k constraints (k is checked against the number
  given);
- one mode: a mask (``5``, ``0x5``, ``0b0101``), or its active constraints (specs as
  given, or a link name that names one constraint only) joined by commas, or ``-`` for the
  empty set;
- a FILE: one mode per line, written as above (constraints may also be separated by
  spaces); ``#`` starts a comment.

``--modes`` may be repeated (Python: a list of the above, where a mode may also be a list of
constraint names); the modes are united and sorted by mask.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..errors import ConstraintError, DelassusError, unknown_name

MAX_ALL = 12          # "all" of 12 constraints: 4096 functions; list the modes beyond that
MAX_CONSTRAINTS = 63  # masks are uint64_t in C
_N_OF_K = re.compile(r"(\d+)-of-(\d+)")
_MASK = re.compile(r"0x[0-9a-fA-F]+|0b[01]+|\d+")
EMPTY = ("-",)


def check_count(specs):
    if len(specs) > MAX_CONSTRAINTS:
        raise ConstraintError(f"a library takes at most {MAX_CONSTRAINTS} constraints (one bit each), "
                              f"got {len(specs)}")


def mode_name(mask, k):
    """``m`` and the mask in hexadecimal, as many digits as k bits need (m5, m05): a folder
    and a C name part."""
    return f"m{mask:0{max(1, -(-k // 4))}x}"


def active(mask, specs):
    """The active constraints of ``mask``, in the order given."""
    return [s for i, s in enumerate(specs) if mask >> i & 1]


def link_of(spec):
    return spec.split(":", 1)[0]


def bit_of(name, specs):
    """The bit of the constraint ``name``: a spec as given, or a link with exactly one constraint."""
    if name in specs:
        return specs.index(name)
    hits = [i for i, s in enumerate(specs) if link_of(s) == name]
    if len(hits) == 1:
        return hits[0]
    if hits:
        raise ConstraintError(f"{name!r} names {len(hits)} constraints of this library "
                              f"({', '.join(specs[i] for i in hits)}): give the spec")
    raise ConstraintError(unknown_name("constraint", str(name), [*specs, *{link_of(s) for s in specs}]) +
                          f" (this library's constraints: {', '.join(specs)})")


def mask_of(mode, specs):
    """The mask of ``mode``: an int (checked against the k constraints), a constraint name, or
    an iterable of names."""
    k = len(specs)
    if isinstance(mode, bool):
        raise ConstraintError(f"a mode is a mask or constraint names, not {mode!r}")
    if isinstance(mode, int) or type(mode).__name__.startswith(("int", "uint")):
        mask = int(mode)
        if mask < 0 or mask >> k:
            raise ConstraintError(f"mask {mask:#x} has bits beyond the library's {k} constraints (0 .. {(1 << k) - 1:#x})")
        return mask
    if isinstance(mode, str):
        mode = [mode]
    try:
        names = list(mode)
    except TypeError:
        raise ConstraintError(f"a mode is a mask (int) or constraint names, not {type(mode).__name__}") from None
    mask = 0
    for name in names:
        if not isinstance(name, str):
            raise ConstraintError(f"constraint names are strings, got {name!r}")
        mask |= 1 << bit_of(name, specs)
    return mask


def _split_names(text, specs):
    """Constraint names in ``text``, separated by whitespace or commas; a spec that holds
    commas itself (``LINK:3d@x,y,z``) is recognised whole by joining pieces until they name
    a constraint."""
    known = {*specs, *(link_of(s) for s in specs)}
    names = []
    for word in text.split():
        if word in known:
            names.append(word)
            continue
        piece = None
        for part in word.split(","):
            piece = part if piece is None else f"{piece},{part}"
            if piece in known:
                names.append(piece)
                piece = None
            elif piece == "":
                piece = None
        if piece is not None:
            names.append(piece)           # unknown: mask_of names it
    return names


def _parse_mask(word, specs, where):
    """The mask written as ``word`` (decimal, 0x…, 0b…); one longer than any mask of
    MAX_CONSTRAINTS bits is refused before Python reads it (int() of 4,300 digits raises)."""
    if len(word.lstrip("0")) > MAX_CONSTRAINTS + 2:
        raise ConstraintError(f"{where}: a mask of {len(word)} characters, wider than the library's {len(specs)} "
                              f"constraints (0 .. {(1 << len(specs)) - 1:#x})")
    return mask_of(int(word, 0), specs)


def _parse_line(line, specs, where):
    words = _split_names(line, specs)
    if tuple(words) == EMPTY:
        return 0
    if len(words) == 1 and _MASK.fullmatch(words[0]):
        return _parse_mask(words[0], specs, where)
    try:
        return mask_of(words, specs)
    except ConstraintError as exc:
        raise ConstraintError(f"{where}: {exc}") from None


def _from_file(path, specs):
    """The masks of a modes file.  Until a line has read as a mode, the file may be anything
    (--modes /etc/shadow): a line that is no mode is then named by its number, not shown."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise DelassusError(f"cannot read the modes file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    masks = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            masks.append(_parse_line(line, specs, f"{path}:{n}"))
        except ConstraintError:
            if masks:
                raise
            raise ConstraintError(f"{path}:{n} is not a mode of this library (a mask, '-', or names among "
                                  f"{', '.join(specs)}): is {path} a modes file?") from None
    if not masks:
        raise DelassusError(f"the modes file {path} lists no mode")
    return masks


def _is_file(text):
    """Whether ``text`` names an existing file (a value no file system takes as a path is not)."""
    try:
        return Path(text).is_file()
    except (OSError, ValueError):
        return False


def _one(spec, specs):
    k = len(specs)
    if not isinstance(spec, str):
        return [mask_of(spec, specs)]
    if spec == "all":
        if k > MAX_ALL:
            raise ConstraintError(f"{k} constraints give 2^{k} modes: list the ones you need "
                                  f"(--modes N-of-{k}, or a file of modes)")
        return list(range(1 << k))
    if m := _N_OF_K.fullmatch(spec):
        n, of = int(m[1]), int(m[2])
        if of != k:
            raise ConstraintError(f"--modes {spec}: the library has {k} constraints, not {of}")
        if n > k:
            raise ConstraintError(f"--modes {spec}: N is at most k")
        return [mask for mask in range(1 << k) if bin(mask).count("1") == n]
    if not spec.strip():
        raise ConstraintError("--modes '' names no mode: give all, N-of-k, a mask, constraint names, '-' "
                              "(the empty mode) or a file")
    if _is_file(spec):
        return _from_file(spec, specs)
    return [_parse_line(spec, specs, f"--modes {spec!r}")]


def parse_modes(modes, specs):
    """The sorted masks of ``modes`` (see the module docstring) for the constraints ``specs``."""
    check_count(specs)
    if modes is None:
        modes = "all"
    if isinstance(modes, (str, int)) and not isinstance(modes, bool):
        modes = [modes]
    try:
        items = list(modes)
    except TypeError:
        raise ConstraintError(f"modes: expected 'all', 'N-of-k', a file, masks or lists of constraint names, "
                              f"not {type(modes).__name__}") from None
    masks = set()
    for spec in items:
        masks.update(_one(spec, specs))
    if not masks:
        raise ConstraintError("no modes selected")
    return sorted(masks)
