"""Turn a course notebook into nbgrader's instructor version, and make submissions.

In the instructor version (nbgrader's "source"):
- each exercise cell (tag `exercise`) is an nbgrader answer cell: the learner's
  placeholder, then the hidden solution's code between `### BEGIN SOLUTION` and
  `### END SOLUTION` with the learner's name bound to the solution's, then the
  exercise's own `check(...)` call; the release keeps the placeholder and the call;
- the course's solution cell (tag `solution`) is gone: its code lives in that region;
- after each exercise comes an autograder cell that holds only its title: the
  verdict is the judge's (tools/teach/judge.py), in a process of its own, and no
  notebook holds a hidden test;
- code in the learner's cell that is not theirs to write (the check's test, its
  tables) moves to a cell of its own just before it;
- every other code cell is a read-only nbgrader cell;
- the Colab setup cell and badge no longer fetch the course (with its solutions):
  the setup cell uses the release folder beside the notebook, or a teacher's copy.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbformat.notebooknode import NotebookNode

from tests.exercise_plugin import check_call, wrong_answers

BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
GRADE_TITLE = ("#@title Grading of exercise {k} "
               "(the grader writes its verdict here; nothing to run)")
BADGE = "colab.research.google.com/github/"

COLAB_CELL = """\
#@title Colab setup (does nothing elsewhere)
# Colab only: the release's helpers/ and scripts/ must sit beside this notebook.
import sys

if "google.colab" in sys.modules:
    import os
    import subprocess

    url = {url!r}  # the teacher's copy of the release, if there is one
    here = "/content/release/{stem}" if url else "/content"
    if url and not os.path.isdir("/content/release"):
        subprocess.run(["git", "clone", "-q", "--depth=1", url, "/content/release"],
                       check=True)
    if not os.path.isdir(os.path.join(here, "helpers")):
        raise SystemExit("Upload this notebook's folder to Colab's Files pane "
                         "(helpers/ and scripts/ beside the notebook), then rerun.")
    sys.path.insert(0, here)
    os.chdir(here)"""


def _tags(cell: NotebookNode) -> set:
    return set(cell.metadata.get("tags", []))


def _split_last(source: str) -> tuple[str, str]:
    """Return (the code before the last statement, the last statement's source)."""
    lines = source.split("\n")
    code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line
                     for line in lines)
    last = ast.parse(code).body[-1]
    return "\n".join(lines[:last.lineno - 1]), ast.get_source_segment(code, last)


@dataclass
class Exercise:
    """One exercise of a notebook: its cells, check call and the learner's name."""

    number: int
    cell: NotebookNode  # the learner's cell, tag `exercise`
    solution: NotebookNode  # the hidden solution, tag `solution`
    call: str  # the learner cell's last statement, check(...)
    learner: str  # the name the check call checks, e.g. `answer`
    solved: str  # the solution's code with `learner` bound to its answer
    wrong: list  # the held-back wrong answers, tests/wrong_answers/NN_name.py

    @property
    def placeholder(self) -> str:
        """Return the learner's part of their cell: what binds `learner`."""
        return _parts(_split_last(self.cell.source)[0], self.learner)[0]

    @property
    def setup(self) -> str:
        """Return the rest of the cell before the check call: the check's own code."""
        return _parts(_split_last(self.cell.source)[0], self.learner)[1]


def _parts(body: str, learner: str) -> tuple[str, str]:
    """Split `body` into (the statements that bind `learner`, the others), each
    with the comments and blank lines above it."""
    lines = body.split("\n")
    code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line
                     for line in lines)
    mine, others, start = [], [], 0
    for node in ast.parse(code).body:
        end = node.end_lineno
        names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
                 and isinstance(n.ctx, ast.Store)}
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        (mine if learner in names else others).extend(lines[start:end])
        start = end
    mine.extend(lines[start:])  # trailing blank lines and comments
    return "\n".join(mine), "\n".join(others).strip("\n")


def exercises(nb: NotebookNode, path: Path) -> list[Exercise]:
    """Return the exercises of `nb` (read from `path`), in order."""
    held = wrong_answers(Path(path))
    found = []
    for i, cell in enumerate(nb.cells):
        if "exercise" not in _tags(cell):
            continue
        k = len(found) + 1
        solution = next(c for c in nb.cells[i + 1:] if c.cell_type == "code")
        assert "solution" in _tags(solution), (
            f"{path.name}: exercise {k}'s next code cell is not tagged solution")
        call = check_call(cell.source)
        learner = ast.unparse(ast.parse(call).body[0].value.args[0])
        body, last = _split_last(solution.source)
        answered = ast.unparse(ast.parse(last).body[0].test.args[0])
        solved = f"{body.rstrip()}\n{learner} = {answered}"
        found.append(Exercise(k, cell, solution, call, learner, solved,
                              list(held.get(k, []))))
    return found


def grade_cell_source(ex: Exercise) -> str:
    """Return the autograder cell of `ex`: its title alone."""
    return GRADE_TITLE.format(k=ex.number)


def _nbgrader(cell: NotebookNode, grade_id: str, *, solution=False, grade=False,
              locked=False) -> None:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked,
            "schema_version": 3, "solution": solution, "task": False}
    if grade:
        meta["points"] = 1
    cell.metadata["nbgrader"] = meta


def instructor_version(path: Path, colab_url: str = "") -> NotebookNode:
    """Return nbgrader's instructor version of the course notebook at `path`; its
    Colab cell clones `colab_url` (the teacher's copy of the release), if given."""
    nb = nbformat.read(path, as_version=4)
    found = exercises(nb, path)
    solutions = {id(ex.solution) for ex in found}
    by_cell = {id(ex.cell): ex for ex in found}
    cells = []
    for i, cell in enumerate(nb.cells):
        if id(cell) in solutions:
            continue
        cell = copy.deepcopy(cell)
        if "colab-setup" in _tags(cell):
            cell.source = COLAB_CELL.format(url=colab_url, stem=Path(path).stem)
        if cell.cell_type == "markdown" and BADGE in cell.source:
            cell.source = "\n".join(line for line in cell.source.split("\n")
                                    if BADGE not in line)
        if cell.cell_type == "code" and id(nb.cells[i]) in by_cell:
            ex = by_cell[id(nb.cells[i])]
            if ex.setup:  # the check's code: read-only, so grading puts it back
                setup = nbformat.v4.new_code_cell(ex.setup)
                _nbgrader(setup, f"check-{ex.number}", locked=True)
                cells.append(setup)
            gap = len(ex.placeholder) - len(ex.placeholder.rstrip("\n"))
            cell.source = "\n".join([ex.placeholder.rstrip(), BEGIN_SOLUTION,
                                     ex.solved, END_SOLUTION + "\n" * max(gap, 1)
                                     + ex.call])
            cell.outputs, cell.execution_count = [], None
            _nbgrader(cell, f"answer-{ex.number}", solution=True)
            grade = nbformat.v4.new_code_cell(grade_cell_source(ex))
            grade.metadata.update({"cellView": "form",
                                   "jupyter": {"source_hidden": True}})
            _nbgrader(grade, f"exercise-{ex.number}", grade=True, locked=True)
            cells += [cell, grade]
            continue
        if cell.cell_type == "code":
            _nbgrader(cell, cell.get("id") or f"cell-{i}", locked=True)
        cells.append(cell)
    nb.cells = cells
    return nb


def submission(release: NotebookNode, answers: dict) -> NotebookNode:
    """Return a copy of a released notebook with exercise k's cell set to answers[k].

    An answer is code that defines the learner's names (the exercise's check call is
    put after it), or None to delete the exercise's cell.
    """
    nb = copy.deepcopy(release)
    kept = []
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if grade_id.startswith("answer-") and int(grade_id[7:]) in answers:
            code = answers[int(grade_id[7:])]
            if code is None:
                continue
            cell.source = f"{code.rstrip()}\n\n{_split_last(cell.source)[1]}"
        kept.append(cell)
    nb.cells = kept
    return nb
