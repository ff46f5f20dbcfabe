"""Griffe extension for the Python API page: the package's docstrings are plain text with ``code``
spans, where `<name>` placeholders (out_dir/<name>/<scenario>/, K_<link>) are text, not HTML.
Outside code spans, `<` and `>` become entities so that Markdown shows them."""
import re

import griffe

CODE_SPAN = re.compile(r"(``.*?``|`[^`]*`)", re.S)


def plain_text(text):
    """The docstring with `<` and `>` outside code spans escaped for Markdown."""
    parts = CODE_SPAN.split(text)
    return "".join(p if i % 2 else p.replace("<", "&lt;").replace(">", "&gt;") for i, p in enumerate(parts))


class PlainTextDocstrings(griffe.Extension):
    """Escape every docstring of the loaded package once, when it is loaded."""

    def on_package(self, *, pkg, **kwargs):
        """Walk the package's own objects (aliases are resolved to them) and escape their docstrings."""
        for obj in _objects(pkg):
            if obj.docstring:
                obj.docstring.value = plain_text(obj.docstring.value)


def _objects(obj):
    """The object and every member it defines itself, depth first."""
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from _objects(member)
