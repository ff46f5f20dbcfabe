"""The documentation: README.md stays a short front door, the MkDocs site under docs/ builds with
`mkdocs build --strict` (no list swallowed by the paragraph before it, tables whose cells wrap),
and every code block on every page runs: the HTML comment `<!-- runnable -->` on the line before
its fence marks it, and a page's ```python blocks run in order in one namespace, its ```console
blocks line by line through bash (`$ ` starts a command, a trailing backslash continues it), all
in one scratch folder so that pages share the compiled-code cache.  A block that is not code to
run here says so and why on that line, `<!-- not run: REASON -->`: an output listing, a C
declaration, a command for `make`, an installer, a GPU or a benchmark of minutes.  Every
```python block runs."""
import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runner import run_cli

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
RUNNABLE = re.compile(r"^<!-- runnable -->\n```(\w+)\n(.*?)^```$", re.M | re.S)
NOT_RUN = re.compile(r"<!-- not run: (\S.*\S) -->")
FENCE = re.compile(r"^```(\w*)$")


def blocks(page):
    """(line number, marker line, language) of every fenced block of a page."""
    out, lines, inside = [], page.read_text().splitlines(), False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            if not inside:
                out.append((i + 1, lines[i - 1] if i else "", FENCE.match(line)[1] if FENCE.match(line) else line))
            inside = not inside
    return out


def examples(page, language):
    """The runnable blocks of one language in a page, in order."""
    return [code for lang, code in RUNNABLE.findall(page.read_text()) if lang == language]


def commands(block):
    """The shell commands of a console block: `$ ` lines with their backslash continuations."""
    out = []
    for line in block.splitlines():
        if out and out[-1].endswith("\\"):
            out[-1] = out[-1][:-1].rstrip() + " " + line.strip()
        elif line.startswith("$ "):
            out.append(line[2:].strip())
    return out


def pages_with(language):
    """pytest params: the pages that hold runnable blocks of a language."""
    return [pytest.param(p, id=p.name) for p in PAGES if examples(p, language)]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("docs_examples")


def test_readme_is_a_short_front_door():
    text = README.read_text()
    first_block = text.split("```")[1]
    assert len(text.splitlines()) <= 200
    assert "make demo" in first_block and "make test" in first_block
    assert "../shared" not in text          # nothing outside the repository
    assert examples(README, "python") and examples(README, "console")


def test_every_runnable_marker_opens_a_block_the_test_runs():
    marked = sum(p.read_text().count("<!-- runnable -->") for p in PAGES)
    found = sum(len(RUNNABLE.findall(p.read_text())) for p in PAGES)
    languages = {lang for p in PAGES for lang, _ in RUNNABLE.findall(p.read_text())}
    assert marked == found and languages <= {"python", "console"}


def test_every_block_runs_or_says_why_not():
    """Issue 34 point 8: a block is marked runnable (python or console with a command), or not
    run with its reason; every python block runs."""
    wrong = []
    for page in PAGES:
        for line, marker, language in blocks(page):
            where = f"{page.name}:{line} ({language or 'no language'})"
            if marker == "<!-- runnable -->":
                if language not in ("python", "console"):
                    wrong.append(f"{where}: runnable but neither python nor console")
            elif not NOT_RUN.fullmatch(marker):
                wrong.append(f"{where}: neither <!-- runnable --> nor <!-- not run: REASON --> on the line before")
            elif language == "python":
                wrong.append(f"{where}: a python block that does not run")
    assert not wrong, "\n".join(wrong)
    for page in PAGES:
        assert all(commands(b) for b in examples(page, "console")), f"{page.name}: a console block without a $ command"


def test_commands_joins_continuations_and_skips_output():
    block = "$ casadi-delassus count go1 \\\n      -s 4F3\noutput line\n$ ls\n"
    assert commands(block) == ["casadi-delassus count go1 -s 4F3", "ls"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(the site folder, the CompletedProcess) of one `mkdocs build --strict`, which both site tests read."""
    site = tmp_path_factory.mktemp("docs_site") / "site"
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)]
    return site, subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)


def test_site_builds_strictly(built):
    site, run = built
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    api = (site / "python" / "index.html").read_text()
    assert "Trace, count, emit, compile and load" in api     # the reference is rendered from the docstrings
    swallowed = [f"{p.relative_to(site)}: {m[1][:80]!r}" for p in site.rglob("*.html")
                 for m in re.finditer(r"<p>((?:(?!</p>).)*\n\s*(?:[-*]|\d+\.) (?:(?!</p>).)*)</p>", p.read_text(), re.S)]
    assert not swallowed, "lists rendered inside the paragraph before them (no blank line):\n" + "\n".join(swallowed)


def test_table_cells_wrap_in_the_theme(built):
    """The readthedocs theme keeps every table cell on one line (white-space: nowrap) inside a
    scrolled box, so a wide table shows its first column only: docs/css/tables.css lets them wrap,
    and every page links it."""
    site, run = built
    assert run.returncode == 0, run.stderr[-4000:]
    css = (site / "css" / "tables.css").read_text()
    rule = re.search(r"\.wy-table-responsive table td,\s*\.wy-table-responsive table th\s*\{([^}]*)\}", css)
    assert rule and re.search(r"white-space:\s*normal", rule[1]), css
    pages = list(site.rglob("index.html"))
    assert pages and all('href="' in p.read_text() and "css/tables.css" in p.read_text() for p in pages)

def printed_listings(page):
    """{index among the page's runnable python blocks: the listing the page shows as its output}
    (a block marked `<!-- not run: output of the block above -->` right after it)."""
    text, out = page.read_text(), {}
    for i, m in enumerate(m for m in RUNNABLE.finditer(text) if m[1] == "python"):
        after = re.match(r"\s*(?:\S[^\n]*\n)?\s*<!-- not run: output of the block above -->\n```\w*\n(.*?)^```$",
                         text[m.end():], re.M | re.S)
        if after:
            out[i] = after[1]
    return out


@pytest.mark.parametrize("page", pages_with("python"))
def test_python_examples_run(page, scratch, monkeypatch):
    """Each block runs; one whose output the page lists prints exactly that listing."""
    monkeypatch.chdir(scratch)
    namespace, listings = {"__name__": f"docs_{page.stem}"}, printed_listings(page)
    for i, code in enumerate(examples(page, "python")):
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, f"{page.name}, runnable python block {i + 1}", "exec"), namespace)
        if i in listings:
            assert printed.getvalue().strip() == listings[i].strip(), f"{page.name}, block {i + 1} printed otherwise"


# what makes a command need bash: pipes, redirections, lists, expansions, quoting, globs
SHELL_SYNTAX = re.compile(r"[|&;<>$`'\"\\*?(){}\[\]~]")


def run_command(command, cwd, env):
    """A console block's command: a plain `casadi-delassus ARGS` (its trailing comment aside) runs as the CLI
    forked from the tests' preloaded server (tests/cli_runner.py: the same -m run without an interpreter's
    start-up each time); anything else through bash."""
    words = shlex.split(command, comments=True)
    if words[0] == "casadi-delassus" and not SHELL_SYNTAX.search(command.partition(" #")[0]):
        return run_cli(*words[1:], cwd=cwd, env=env, timeout=600)
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("page", pages_with("console"))
def test_console_examples_run(page, scratch):
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    for block in examples(page, "console"):
        for command in commands(block):
            run = run_command(command, scratch, env)
            assert run.returncode == 0, f"{page.name}: {command}\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}"
            assert run.stdout.strip(), f"{page.name}: {command} printed nothing"


@pytest.mark.parametrize("front", [README, REPO / "docs" / "index.md"], ids=["README.md", "index.md"])
def test_front_pages_link_every_page(front):
    """README's and index.md's tables of pages name every page of the site."""
    linked = set(re.findall(r"\]\((?:docs/)?([\w-]+\.md)\)", front.read_text()))
    pages = {p.name for p in (REPO / "docs").glob("*.md")} - {"index.md"}
    assert not pages - linked, f"{front.name} does not link {sorted(pages - linked)}"


def test_cli_page_lists_every_command_and_the_target_options():
    """cli.md's table of commands has a row for every command, and the rows of generate and
    check name the options that pick what is built (--precision, --target, --layout)."""
    from casadi_delassus.cli import cli
    text = (REPO / "docs" / "cli.md").read_text()
    rows = {}
    for m in re.finditer(r"^\| `(\w+)`? .*$", text, re.M):
        rows.setdefault(m[1], m[0])             # a command's first row: its synopsis
    assert not set(cli.commands) - set(rows), f"cli.md lists no {sorted(set(cli.commands) - set(rows))}"
    for command in ("generate", "check"):
        assert all(o in rows[command] for o in ("--precision", "--target", "--layout")), rows[command]


def test_layout_page_names_every_package():
    layout = (REPO / "docs" / "layout.md").read_text()
    packages = [p.name for p in (REPO / "casadi_delassus").iterdir() if (p / "__init__.py").is_file()]
    assert packages and not [p for p in packages if f"{p}/" not in layout]
