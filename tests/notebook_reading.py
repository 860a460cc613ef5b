"""Read the course's notebooks for the hygiene tests (tests/test_nb_*.py).

Those tests check the notebook files alone: they read cells, tags, outputs and code
with these functions, and run no notebook.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
from conftest import NOTEBOOKS

IDS = [p.stem for p in NOTEBOOKS]
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
PYTHON_CELL_MAGICS = {"time", "timeit", "capture", "prun"}  # their body is Python
DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def read(path: Path) -> nbformat.NotebookNode:
    """Return the notebook at `path`, as nbformat 4."""
    return nbformat.read(path, as_version=4)


def tags(cell: nbformat.NotebookNode) -> list[str]:
    """Return a cell's tags."""
    return cell.metadata.get("tags", [])


def output_text(out: nbformat.NotebookNode) -> str:
    """Return every textual part of one output, tracebacks included."""
    parts = [out.get("text", ""), out.get("evalue", ""), *out.get("traceback", [])]
    for key, value in out.get("data", {}).items():
        if key.startswith("text/") or key == "application/json":
            parts.append(value if isinstance(value, str) else str(value))
    return "\n".join(parts)


def output_texts(cell: nbformat.NotebookNode) -> str:
    """Return the text of all of a cell's outputs."""
    return "\n".join(output_text(o) for o in cell.get("outputs", []))


def markdown(nb: nbformat.NotebookNode) -> list[tuple[int, str]]:
    """Return (cell index, source without fenced code blocks) of each markdown cell."""
    return [(i, FENCE.sub("", c.source)) for i, c in enumerate(nb.cells)
            if c.cell_type == "markdown"]


def strip_magics(source: str) -> str | None:
    """Return the cell as Python (magic lines blanked), or None if it is not Python
    (a cell magic such as %%bash or %%writefile)."""
    if source.lstrip().startswith("%%"):
        magic = source.lstrip()[2:].split(None, 1)[0] if source.lstrip()[2:] else ""
        if magic not in PYTHON_CELL_MAGICS:
            return None
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line
                     for line in source.split("\n"))


def call_name(func: ast.expr) -> str:
    """Return the called name: `f` for f(...), `attr` for x.y.attr(...)."""
    return func.id if isinstance(func, ast.Name) else (
        func.attr if isinstance(func, ast.Attribute) else "")
