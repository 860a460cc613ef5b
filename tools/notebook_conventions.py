"""Keep every notebook's Colab badge, Colab setup cell and metadata in sync.

The repository URL lives in one place, pyproject.toml's [project.urls] Repository.
`python -m tools.notebook_conventions` (or `make badges`) rewrites all notebooks from
it; tests/test_nb_colab.py checks that nothing has drifted.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: no tomllib, and tomli is not guaranteed
    tomllib = None

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
BADGE_IMG = "https://colab.research.google.com/assets/colab-badge.svg"
BADGE_RE = re.compile(r"\[!\[Open In Colab\]\([^)]*\)\]\([^)]*\)")
COLAB_TAG = "colab-setup"
SOLUTION_TAG = "solution"
# First lines of the collapsed cells: Colab shows the title of a `cellView: form` cell
# and hides its code; JupyterLab shows the first line of a cell with source_hidden.
COLAB_TITLE = "#@title Colab setup (does nothing elsewhere)"
SOLUTION_TITLE = "#@title Solution (hidden: expand the cell to read it)"
HIDDEN = {"cellView": "form", "jupyter": {"source_hidden": True}}
COLAB_METADATA = {"accelerator": "GPU", "colab": {"gpuType": "T4", "provenance": []}}


_REPOSITORY_LINE = re.compile(r'^Repository\s*=\s*"([^"]+)"', re.MULTILINE)


def _repo_url_by_regex(text: str) -> str:
    """Read the `Repository = "..."` line of pyproject.toml (for Python 3.10)."""
    match = _REPOSITORY_LINE.search(text)
    if match is None:
        raise ValueError('pyproject.toml has no `Repository = "..."` line')
    return match.group(1)


def repo_url() -> str:
    """Return the repository URL set in pyproject.toml's [project.urls]."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    if tomllib is None:
        return _repo_url_by_regex(text).rstrip("/")
    return tomllib.loads(text)["project"]["urls"]["Repository"].rstrip("/")


def badge(nb_path: Path) -> str:
    """Return the Markdown of the "Open in Colab" badge for `nb_path`."""
    slug = repo_url().removeprefix("https://github.com/")
    rel = nb_path.resolve().relative_to(ROOT).as_posix()
    target = f"https://colab.research.google.com/github/{slug}/blob/main/{rel}"
    return f"[![Open In Colab]({BADGE_IMG})]({target})"


def colab_cell_source() -> str:
    """Return the setup cell that runs only on Colab and is silent elsewhere."""
    return f'''\
{COLAB_TITLE}
# Colab only: fetch the course and install its helpers; Colab's own torch is kept.
import sys

if "google.colab" in sys.modules:
    import os
    import subprocess

    url = "{repo_url()}"
    if not os.path.isdir("/content/course"):
        subprocess.run(["git", "clone", "-q", "--depth=1", url, "/content/course"],
                       check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "-e", "/content/course"], check=True)
    sys.path.insert(0, "/content/course")
    os.chdir("/content/course/notebooks")'''


def title_cell_source(source: str, badge_md: str) -> str:
    """Return cell 0 laid out as the template says: H1, blank, badge, blank, rest."""
    head, *lines = BADGE_RE.sub("", source).split("\n")
    while lines and not lines[0].strip():  # blank lines, or where the badge was
        lines.pop(0)
    rest = "\n".join(lines).rstrip()
    return f"{head}\n\n{badge_md}\n\n{rest}" if rest else f"{head}\n\n{badge_md}"


def hide(cell: nbformat.NotebookNode, title: str) -> None:
    """Collapse `cell` in JupyterLab and on Colab, with `title` as its first line."""
    lines = cell.source.split("\n")
    if lines[0].startswith("#@title"):
        lines = lines[1:]
    cell.source = "\n".join([title, *lines])
    cell.metadata["cellView"] = HIDDEN["cellView"]
    cell.metadata.setdefault("jupyter", {}).update(HIDDEN["jupyter"])


def sync(nb_path: Path) -> bool:
    """Rewrite `nb_path`'s badge, Colab cell and metadata; return True if changed."""
    nb = nbformat.read(nb_path, as_version=4)
    before = nbformat.writes(nb)
    title = nb.cells[0]
    title.source = title_cell_source(title.source, badge(nb_path))
    code = [c for c in nb.cells if c.cell_type == "code"]
    if not code or COLAB_TAG not in code[0].metadata.get("tags", []):
        cell = nbformat.v4.new_code_cell(colab_cell_source())
        cell.metadata["tags"] = [COLAB_TAG]
        nb.cells.insert(1, cell)
    else:
        code[0].source = colab_cell_source()
    hide(next(c for c in nb.cells if c.cell_type == "code"), COLAB_TITLE)
    for cell in nb.cells:
        if SOLUTION_TAG in cell.metadata.get("tags", []):
            hide(cell, SOLUTION_TITLE)
    nb.metadata.update(COLAB_METADATA)
    after = nbformat.writes(nb)
    if after != before:
        nbformat.write(nb, nb_path)
    return after != before


def main() -> int:
    """Sync every notebook and report which ones changed."""
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        if sync(path):
            print(f"updated {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
