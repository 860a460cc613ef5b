"""Write a course notebook from a list of cells, with the house conventions applied.

Authoring aid, not used at run time:

    from tools.nbbuild import code, md, write_notebook
    write_notebook("notebooks/01_cuda_queries.ipynb", [md("# 01 · ..."), code("1 + 1")])

The Colab badge, the Colab setup cell, the metadata and stable cell ids are added
here, so every notebook starts the same way. Run `make outputs` afterwards.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

from tools import notebook_conventions as conv

# What ipykernel reports (tests/test_notebooks.py checks): Lab then rewrites nothing.
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python",
              "name": "python3"}


def language_info() -> dict:
    """Return the language_info this Python's kernel reports (and Lab would write)."""
    from ipykernel.ipkernel import IPythonKernel

    return dict(IPythonKernel.language_info)


def md(source: str) -> nbformat.NotebookNode:
    """Return a Markdown cell."""
    return nbformat.v4.new_markdown_cell(source.strip("\n"))


def code(source: str, tags: list[str] | None = None) -> nbformat.NotebookNode:
    """Return a code cell, optionally tagged (e.g. ["raises-exception"])."""
    cell = nbformat.v4.new_code_cell(source.strip("\n"))
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


def write_notebook(path: str | Path, cells: list[nbformat.NotebookNode]) -> Path:
    """Write `cells` as a notebook at `path`, adding the Colab conventions."""
    path = Path(path)
    nb = nbformat.v4.new_notebook(cells=list(cells))
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = language_info()
    for i, cell in enumerate(nb.cells):
        cell.id = f"cell-{i:03d}"
    nbformat.write(nb, path)
    conv.sync(path)
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):  # renumber: sync may have added a cell
        cell.id = f"cell-{i:03d}"
    nbformat.write(nb, path)
    return path
