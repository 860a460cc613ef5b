"""Every exercise is set as the course sets them: a `**N. Title.**` paragraph, a
learner cell tagged `exercise` ending in a bare `check(...)` whose stored output says
"not answered yet", typical wrong answers on file, then a collapsed, titled cell
tagged `solution` that ends in `assert check(...)`, prints only that the solution was
right, and rebinds none of the learner's names.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytest.importorskip("nbformat", reason="no nbformat: the notebook hygiene tests read "
                    "notebooks with it")
from conftest import NOTEBOOKS
from exercise_plugin import wrong_answers
from notebook_reading import (
    DEFINITIONS,
    IDS,
    call_name,
    markdown,
    output_texts,
    read,
    strip_magics,
    tags,
)

from helpers.exercises import SOLUTION_RIGHT
from tools import notebook_conventions as conv

pytestmark = pytest.mark.tooling  # the notebook files only: no torch runs


def _ends_with_checked_assert(source: str) -> bool:
    """True if the last statement is `assert check(...), "message"`."""
    try:
        body = ast.parse(strip_magics(source) or "").body
    except SyntaxError:
        return False
    last = body[-1] if body else None
    return (isinstance(last, ast.Assert) and last.msg is not None
            and isinstance(last.test, ast.Call)
            and call_name(last.test.func) == "check")


def bound_names(source: str) -> set[str]:
    """Return the names a cell binds at its top level (not inside its functions)."""
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, DEFINITIONS):
            names.add(node.name)
            return  # a function's own locals are not the notebook's names
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        if isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.Lambda, ast.comprehension)):
                visit(child)

    visit(ast.parse(strip_magics(source) or ""))
    return names


def _ends_with_a_check_call(source: str) -> bool:
    """True if the last statement is a bare `check(...)`, which the wrong-answer
    plugin (tests/exercise_plugin.py) reruns after each wrong answer."""
    body = ast.parse(strip_magics(source) or "").body
    last = body[-1] if body else None
    return (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
            and call_name(last.value.func) == "check")


def _exercise_problems(path: Path) -> list[str]:
    cells = read(path).cells
    problems = []
    exercises = [i for i, c in enumerate(cells) if "exercise" in tags(c)]
    solutions = [i for i, c in enumerate(cells) if "solution" in tags(c)]
    wrong = wrong_answers(path)
    if not 3 <= len(exercises) <= 4:
        problems.append(f"{len(exercises)} cells tagged 'exercise', want 3 to 4")
    paired = []
    for n, i in enumerate(exercises, start=1):
        cell = cells[i]
        if cell.cell_type != "code" or not _ends_with_a_check_call(cell.source):
            problems.append(f"cell {i} (exercise {n}): a code cell whose last "
                            "statement is a bare check(...) call")
        if "not answered yet" not in output_texts(cell):
            problems.append(f"cell {i} (exercise {n}): stored output must say "
                            "'not answered yet' (run `make outputs`)")
        if not wrong.get(n):
            problems.append(f"exercise {n}: no typical wrong answer in "
                            f"tests/wrong_answers/{path.stem}.py")
        task = next((cells[j] for j in range(i - 1, -1, -1)
                     if cells[j].cell_type == "markdown"), None)
        numbers = re.findall(r"^\*\*(\d+)\. ", task.source if task else "", re.M)
        if numbers[-1:] != [str(n)]:
            problems.append(f"cell {i}: the markdown before exercise {n} must set it "
                            f"as a paragraph starting '**{n}. Title.**'")
        j = next((j for j in range(i + 1, len(cells)) if cells[j].cell_type == "code"),
                 None)
        if j is None or "solution" not in tags(cells[j]):
            problems.append(f"cell {i} (exercise {n}): the next code cell must be "
                            "tagged 'solution'")
            continue
        paired.append(j)
        solution = cells[j]
        if solution.source.split("\n")[0] != conv.SOLUTION_TITLE or any(
                solution.metadata.get(k) != v for k, v in (
                    ("cellView", "form"), ("jupyter", {"source_hidden": True}))):
            problems.append(f"cell {j} (solution {n}): collapsed, with the title line "
                            "first (run `make badges`)")
        if not _ends_with_checked_assert(solution.source):
            problems.append(f"cell {j} (solution {n}): end with "
                            "`assert check(...), \"...\"`")
        if output_texts(solution).strip() not in ("right", SOLUTION_RIGHT):
            problems.append(f"cell {j} (solution {n}): its stored output must be "
                            f"{SOLUTION_RIGHT!r} alone (check(..., solution=True)), "
                            "so it shows no answer and says whose it is")
        shared = sorted(bound_names(solution.source) & bound_names(cell.source))
        if shared:
            problems.append(f"cell {j} (solution {n}) rebinds the learner's names "
                            f"{shared}: give the solution its own names")
    stray = sorted(set(solutions) - set(paired))
    if stray:
        problems.append(f"cells {stray}: tagged 'solution' but follow no exercise")
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_exercises_have_a_check_and_a_hidden_solution(path):
    problems = _exercise_problems(path)
    assert not problems, f"{path.name}:\n  " + "\n  ".join(problems)


def test_bound_names_sees_the_learners_names():
    src = ("import math as m\nanswer = 1\nfor i in range(2):\n    pass\n"
           "def f(x):\n    y = x\n    return y\nsq = [k * k for k in range(3)]")
    assert bound_names(src) == {"m", "answer", "i", "f", "sq"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_solution_details_blocks(path):
    found = [i for i, src in markdown(read(path))
             if re.search(r"<details>\s*<summary>\s*(<b>)?\s*Solution", src, re.I)]
    assert not found, (f"{path.name} cells {found}: solutions live in hidden "
                       "'solution' cells now, not <details> blocks")
