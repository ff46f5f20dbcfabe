"""The documentation: README.md stays a short front door, the MkDocs site under docs/ builds with
`mkdocs build --strict`, and every example marked runnable (an HTML comment `<!-- runnable -->` on
the line before its fence) runs: a page's ```python blocks in order in one namespace, its
```console blocks line by line through bash (`$ ` starts a command, a trailing backslash continues
it), all in one scratch folder so that pages share the compiled-code cache."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
RUNNABLE = re.compile(r"^<!-- runnable -->\n```(\w+)\n(.*?)^```$", re.M | re.S)


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


def test_commands_joins_continuations_and_skips_output():
    block = "$ casadi-delassus count go1 \\\n      -s 4F3\noutput line\n$ ls\n"
    assert commands(block) == ["casadi-delassus count go1 -s 4F3", "ls"]


def test_site_builds_strictly(tmp_path):
    site = tmp_path / "site"
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=REPO,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    api = (site / "python" / "index.html").read_text()
    assert "Trace, count, emit, compile and load" in api     # the reference is rendered from the docstrings


@pytest.mark.parametrize("page", pages_with("python"))
def test_python_examples_run(page, scratch, monkeypatch):
    monkeypatch.chdir(scratch)
    namespace = {"__name__": f"docs_{page.stem}"}
    for i, code in enumerate(examples(page, "python")):
        exec(compile(code, f"{page.name}, runnable python block {i + 1}", "exec"), namespace)


@pytest.mark.parametrize("page", pages_with("console"))
def test_console_examples_run(page, scratch):
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    for block in examples(page, "console"):
        for command in commands(block):
            run = subprocess.run(["bash", "-c", command], cwd=scratch, env=env, capture_output=True, text=True,
                                 timeout=600)
            assert run.returncode == 0, f"{page.name}: {command}\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}"
            assert run.stdout.strip(), f"{page.name}: {command} printed nothing"


def test_layout_page_names_every_package():
    layout = (REPO / "docs" / "layout.md").read_text()
    packages = [p.name for p in (REPO / "casadi_delassus").iterdir() if (p / "__init__.py").is_file()]
    assert packages and not [p for p in packages if f"{p}/" not in layout]
