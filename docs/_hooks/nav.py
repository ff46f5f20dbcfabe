"""MkDocs hook that keeps the nav in step with the pages present: nav entries whose page is not in
docs/ (yet) are left out, so the nav can name the pages other branches bring (docs/contact.md) and
`mkdocs build --strict` still passes without them; a page in docs/ that the nav does not name is
added at its end (titled by its first heading) rather than left unreachable."""
import logging
from pathlib import Path

log = logging.getLogger("mkdocs.hooks.nav")


def on_config(config):
    """Drop nav entries whose Markdown file is missing; append the pages no entry names."""
    if config.nav:
        docs = Path(config.docs_dir)
        config.nav = _existing(config.nav, docs)
        named = set(_pages(config.nav))
        extra = sorted(str(p.relative_to(docs)) for p in docs.rglob("*.md")
                       if not p.relative_to(docs).parts[0].startswith("_") and str(p.relative_to(docs)) not in named)
        for page in extra:
            log.info("page %s is not in mkdocs.yml's nav: added at its end", page)
        config.nav += extra
    return config


def _existing(entries, docs):
    """The entries of one nav level whose page exists, sections kept while they hold one."""
    kept = []
    for entry in entries:
        title, target = next(iter(entry.items())) if isinstance(entry, dict) else (None, entry)
        if isinstance(target, list):
            target = _existing(target, docs)
            if target:
                kept.append({title: target})
        elif "://" in target or (docs / target).is_file():
            kept.append(entry)
    return kept


def _pages(entries):
    """Every page path a nav level names, sections included."""
    for entry in entries:
        target = next(iter(entry.values())) if isinstance(entry, dict) else entry
        yield from _pages(target) if isinstance(target, list) else [target]
