"""Every Python example in the documentation runs: README.md's and each page's under docs/.

A page's ```python blocks are put together in order into one script, which runs in a fresh
interpreter (tests/fresh_process.py) from a temporary directory, so that files an example
writes land there; the test fails when the script exits with an error. A page names the
environment its examples need in a comment the rendered page hides, e.g.
`<!-- docs-test: CPU_NUM_DEVICES=4 -->` (variables laid over the test run's own).
Examples that start processes (`xmp.spawn`) keep the process-starting code under
`if __name__ == "__main__":`, as a script must, so each page is run as a script file.
"""
import pathlib
import re

import pytest

from tests.fresh_process import python

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
PAGES = [p for p in PAGES if "_build" not in p.parts and "_api" not in p.parts]

# A fence opening a Python block: ```python or ```py (MyST's ```{code-block} python is
# not run: the pages use it nowhere).
_BLOCK = re.compile(r"^(`{3,})(?:python|py)[ \t]*\n(.*?)^\1[ \t]*$", re.M | re.S)
_ENV = re.compile(r"<!--\s*docs-test:\s*(.*?)\s*-->")


def python_blocks(text):
    """The Python code blocks of a Markdown text, in order."""
    return [m.group(2) for m in _BLOCK.finditer(text)]


def page_env(text):
    """The variables a page's `<!-- docs-test: NAME=VALUE ... -->` comment sets."""
    env = {}
    for m in _ENV.finditer(text):
        for item in m.group(1).split():
            name, _, value = item.partition("=")
            env[name] = value
    return env


def script(text):
    """The page's blocks as one script, each preceded by a comment naming its place."""
    parts = []
    for i, block in enumerate(python_blocks(text), 1):
        parts.append(f"# --- block {i} ---\n{block}")
    return "\n".join(parts)


def test_blocks_are_found_and_a_broken_one_fails(tmp_path):
    """The test can fail: a page with a block that raises makes its script exit nonzero."""
    text = ("<!-- docs-test: A=1 B=2 -->\n\n```python\nx = 1\n```\n\n```bash\nexit 1\n```\n\n"
            "````python\nraise SystemExit(x + 2)\n````\n")
    assert python_blocks(text) == ["x = 1\n", "raise SystemExit(x + 2)\n"]
    assert page_env(text) == {"A": "1", "B": "2"}
    path = tmp_path / "page.py"
    path.write_text(script(text))
    assert python(path, cwd=tmp_path, check=False).returncode == 3


def _pages_with_examples():
    """The pages with Python blocks; a page whose blocks are another's (README.md's first
    example is getting-started's) runs once, as the first of them."""
    pages, seen = [], set()
    for page in PAGES:
        code = script(page.read_text())
        if code and code not in seen:
            seen.add(code)
            pages.append(page)
    return pages


@pytest.mark.parametrize("page", _pages_with_examples(),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_page_examples_run(page, tmp_path):
    text = page.read_text()
    path = tmp_path / "examples.py"
    path.write_text(script(text))
    python(path, cwd=tmp_path, env=page_env(text), timeout=600)


def test_every_page_is_in_a_toctree():
    """Sphinx warns of a page no toctree lists; this says which one before the build does."""
    docs = ROOT / "docs"
    listed = set()
    for page in docs.rglob("*.md"):
        for m in re.finditer(r"```\{toctree\}\n(.*?)```", page.read_text(), re.S):
            for line in m.group(1).splitlines():
                if line.strip() and not line.startswith(":"):
                    listed.add((page.parent / line.strip()).relative_to(docs).as_posix())
    pages = {p.relative_to(docs).with_suffix("").as_posix() for p in docs.rglob("*.md")
             if "_build" not in p.parts and "_api" not in p.parts}
    assert pages - listed == {"index"}


def test_the_release_table_is_where_test_matrix_writes_it():
    """scripts/test-matrix writes its rows between these lines of the page it names."""
    source = (ROOT / "scripts" / "test-matrix").read_text()
    page = re.search(r'^RELEASES = "(.+)"$', source, re.M).group(1)
    text = (ROOT / page).read_text()
    begin, end = text.index("<!-- test-matrix: begin -->"), text.index("<!-- test-matrix: end -->")
    assert "| torch | jax | date | commit |" in text[begin:end]
