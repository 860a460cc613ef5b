"""Each notebook fits one sitting: at most 1,800 markdown words (about 30 minutes,
with the exercises), and learner-visible code cells of at most 15 lines, not counting
imports and blank lines.
"""

from __future__ import annotations

import ast

import pytest

pytest.importorskip("nbformat", reason="no nbformat: the notebook hygiene tests read "
                    "notebooks with it")
from conftest import NOTEBOOKS
from notebook_reading import IDS, read, strip_magics, tags

from tools.learner_time import markdown_words

pytestmark = pytest.mark.tooling  # the notebook files only: no torch runs

MAX_WORDS = 1_800  # markdown words per notebook: about 30 minutes with the exercises


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_word_budget(path):
    words = markdown_words(read(path))
    assert words <= MAX_WORDS, (
        f"{path.name}: {words} markdown words, over the budget of {MAX_WORDS}")


MAX_CELL_LINES = 15  # learner-visible code per cell, not counting imports and blanks


def _code_lines(source: str) -> int:
    """Count a cell's non-blank lines outside import statements and magics."""
    python = strip_magics(source)
    if python is None:
        return 0  # %%bash and the like: not Python code
    lines = python.split("\n")
    try:
        tree = ast.parse(python)
    except SyntaxError:
        return sum(1 for line in lines if line.strip())
    imports = {n for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))
               for n in range(node.lineno, node.end_lineno + 1)}
    return sum(1 for n, line in enumerate(lines, 1)
               if line.strip() and n not in imports)


def test_code_line_counter_skips_imports_and_blanks():
    cell = ("import os\nfrom helpers import (\n    check,\n    try_gpu,\n)\n\n"
            "x = 1\n%time y = 2")
    assert _code_lines(cell) == 1, _code_lines(cell)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_code_cells_are_short(path):
    long = [(i, n) for i, cell in enumerate(read(path).cells)
            if cell.cell_type == "code" and "solution" not in tags(cell)
            and not cell.source.startswith("#@title")
            and (n := _code_lines(cell.source)) > MAX_CELL_LINES]
    assert not long, (f"{path.name}: code cells over {MAX_CELL_LINES} lines "
                      f"(cell index, lines): {long}")
