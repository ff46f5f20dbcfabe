"""Identifiers and file-name components made from names users choose (robot, link, scenario
and file names).  One sanitiser, :func:`ident_part`, makes every C identifier part (function,
library, include-guard and ``K_<link>`` input names): it is injective (a changed name carries
a hash of the original, and a name that merely looks hashed is hashed again) and its parts,
joined by "_" after a leading letter, are valid C identifiers and valid CasADi names
(``casadi.Function.check_name``: a letter first, then [A-Za-z0-9_], no double underscore).
:func:`path_part` does the same for one file-name component; :func:`printable` escapes a name
for a terminal or a log.  Escaping text for generated files is codegen/escape.py's."""
from __future__ import annotations

import hashlib
import re


def short_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]


# A part: ASCII letters and digits in groups joined by single underscores.
_PART = re.compile(r"[A-Za-z0-9]+(?:_[A-Za-z0-9]+)*")
# The mark of a sanitised part.  A name that already ends like this is sanitised too, so a
# part ends in _h<8 hex> exactly when it was changed: two different inputs never meet.
_HASHED = re.compile(r".*_h[0-9a-f]{8}")
PART_LIMIT = 48


def is_plain(name) -> bool:
    """Letters and digits joined by single underscores, at most PART_LIMIT characters, not
    hash-marked: a part :func:`ident_part` keeps as it is."""
    return isinstance(name, str) and bool(_PART.fullmatch(name)) and not _HASHED.fullmatch(name) \
        and len(name) <= PART_LIMIT


def readable(name) -> str:
    """The ASCII letters and digits of ``name`` joined by "_" (at most PART_LIMIT characters), or "x"."""
    return "_".join(re.findall(r"[A-Za-z0-9]+", str(name)))[:PART_LIMIT].strip("_") or "x"


def ident_part(name) -> str:
    """``name`` itself when it is plain (:func:`is_plain`), else its readable part plus ``_h``
    and 8 hex digits of its sha256: readable, injective, never empty.  Parts joined by "_"
    after a leading letter ("cd_…", "K_…") are valid C identifiers and CasADi names."""
    name = str(name)
    return name if is_plain(name) else f"{readable(name)}_h{short_hash(name)}"


def path_part(name: str) -> str:
    """One file-name component for ``name``: itself when it is letters, digits and ``_+-.``
    (not starting with "." or "-", at most PART_LIMIT characters, not hash-marked), else
    :func:`ident_part` of it.  Never a separator, "." or "..", a hidden or empty name."""
    name = str(name)
    if re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_+.-]*", name) and not _HASHED.fullmatch(name) and len(name) <= PART_LIMIT:
        return name
    return ident_part(name)


def printable(text):
    """``text`` with each character that is not printable (CR, LF, ESC, U+2028, …) written as
    its escape (\\r, \\x1b, \\u2028): a name read from a model cannot start a line of its own
    in a log or move a terminal's cursor."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def shown(value, limit=80):
    """``value`` as a one-line message shows what a user gave: the repr of a number or a short text (escaped, at most
    ``limit`` characters), the type and shape of an array (whose repr runs over lines)."""
    shape = getattr(value, "shape", ())
    if shape:
        return f"a {type(value).__name__} of shape {tuple(shape)}"
    text = printable(repr(value))
    return text if len(text) <= limit else text[:limit - 1] + "…"
