"""Names from models, files and specs on their way into generated text.

Every string a user controls (robot, joint, link and body names, scenario names, specs, file
names, meanings built from them) reaches generated C, headers, Makefiles, CMake files,
Markdown and shell lines only through this module:

- *identifiers* (C function names, ``K_<link>`` input names, include guards, library and
  folder names) come from one sanitiser, names.ident_part, that is injective and never
  yields a CasADi-invalid name; the ``c_ident`` and ``file_name`` filters check them again;
- *text* is escaped for the context it lands in by a jinja2 filter (``c_comment``,
  ``c_string``, ``line_comment``, ``md``, ``md_code``, ``sh``), and the template environment
  refuses to render any string that did not pass through one (:func:`_finalize`): a template
  cannot forget to escape.

The JSON manifest is written with ``json.dumps``, which escapes by construction.
"""
from __future__ import annotations

import re
import shlex
import unicodedata

import jinja2

from ..errors import DelassusError


class Safe(str):
    """Text already escaped for the place it is rendered (what the filters return)."""


# -- text ---------------------------------------------------------------------------------
def visible(text) -> str:
    """Control, format (bidi overrides), surrogate, private and line/paragraph-separator
    characters as \\uXXXX text; every other character, non-ASCII letters included, as is."""
    def show(ch):
        cp = ord(ch)
        return f"\\u{cp:04x}" if cp <= 0xFFFF else f"\\U{cp:08x}"
    return "".join(show(c) if unicodedata.category(c)[0] == "C" or unicodedata.category(c) in ("Zl", "Zp") else c
                   for c in str(text))


def _pad(text, risky):
    """A space before/after ``text`` where its first/last character could join the template's
    neighbouring characters into something else (a comment end, a line splice)."""
    return (" " if text[:1] in risky else "") + text + (" " if text[-1:] in risky else "")


def c_comment(text) -> Safe:
    """Text inside a C block comment: no newline, no ``*/`` or ``/*`` (any adjacent two of
    ``*``, ``/``, ``?`` get a space between: no comment end, no trigraph such as ``??/``), no
    trailing backslash (a line splice)."""
    t = re.sub(r"(?<=[*/?])(?=[*/?])", " ", visible(text))
    return Safe(_pad(t, "*/?\\"))


def line_comment(text) -> Safe:
    """Text in a line comment (``#`` in a Makefile or CMake file, ``//`` in C++): one line, no
    trailing backslash (which would continue the comment onto the next line)."""
    return Safe(_pad(visible(text), "\\"))


def c_string(text) -> Safe:
    """A C string literal, quotes included: printable ASCII as is (``"``, ``\\`` and ``?``
    escaped: no trigraph), everything else as octal escapes of its UTF-8 bytes."""
    out = []
    for b in str(text).encode("utf-8", "surrogatepass"):
        ch = chr(b)
        out.append("\\" + ch if ch in '"\\?' else ch if 0x20 <= b < 0x7F else f"\\{b:03o}")
    return Safe('"' + "".join(out) + '"')


def c_ident(name) -> Safe:
    """An identifier (made from names.ident_part parts), checked: anything else is refused."""
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise DelassusError(f"not a C identifier: {name!r}")
    return Safe(name)


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~&$:])")


def md(text) -> Safe:
    """Markdown text (paragraphs, headings, table cells): every Markdown/HTML character
    backslash-escaped, so it renders as the literal text."""
    return Safe(_MD_SPECIAL.sub(r"\\\1", visible(text)))


def md_code(text) -> Safe:
    """A Markdown code span, backticks included, safe in a table cell (``|`` as ``\\|``)."""
    t = visible(text).replace("|", "\\|")
    fence = "`" * (max((len(r) for r in re.findall(r"`+", t)), default=0) + 1)
    return Safe(fence + _pad(t, "` ") + fence)


def sh(text) -> Safe:
    """One shell word (POSIX quoting), on one line."""
    return Safe(shlex.quote(visible(text)))


_FLAG = re.compile(r"-[A-Za-z0-9_=.,+:/-]+")


def flag(text) -> Safe:
    """A compiler flag for a Makefile recipe or a CMake list: plain characters only."""
    if not isinstance(text, str) or not _FLAG.fullmatch(text):
        raise DelassusError(f"refusing compiler flag {text!r} in generated build files "
                            f"(allowed: -, letters, digits and _=.,+:/)")
    return Safe(text)


def file_name(name) -> Safe:
    """A file name (names.path_part plus a suffix), checked: anything else is refused."""
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_+.-]*", name):
        raise DelassusError(f"not a plain file name: {name!r}")
    return Safe(name)


def dims(shape) -> Safe:
    """A shape such as [12, 6] as "12 x 6"."""
    return Safe(" x ".join(str(int(d)) for d in shape))


def c_numbers(values) -> Safe:
    """Numbers for a C initialiser, comma-separated (each checked to be a finite float)."""
    out = []
    for v in values:
        x = float(v)
        if x != x or x in (float("inf"), float("-inf")):
            raise DelassusError(f"not a finite number for generated C: {v!r}")
        out.append(repr(x))
    return Safe(", ".join(out))


FILTERS = {"c_comment": c_comment, "c_string": c_string, "c_ident": c_ident, "line_comment": line_comment,
           "md": md, "md_code": md_code, "sh": sh, "flag": flag, "file_name": file_name, "dims": dims, "c_numbers": c_numbers}


def _finalize(value):
    """Every ``{{ … }}``: escaped text or a number, nothing else."""
    if isinstance(value, Safe) or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        return value
    raise DelassusError(f"template bug: unescaped value {value!r}; pass it through one of {sorted(FILTERS)}")


def environment(package, folder):
    """The jinja2 environment for the templates in ``package``/``folder``: strict about
    undefined names and about unescaped strings."""
    env = jinja2.Environment(loader=jinja2.PackageLoader(package, folder), keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined, finalize=_finalize, autoescape=False)
    env.filters.update(FILTERS)
    return env
