"""The two places where the course configures nbgrader beyond its options.

`NotebookDeadline` is nbgrader's own Execute preprocessor with a time limit for the
whole notebook as well as for each cell; `PerExercise` is an `nbgrader export` plugin
that writes one row per student and one column per exercise, with a word for each.
"""

from __future__ import annotations

import csv
import time
from pathlib import Path

import nbformat
from nbformat.notebooknode import NotebookNode
from nbgrader import utils
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import CsvExportPlugin, ExportPlugin
from nbgrader.preprocessors import Execute
from traitlets import Integer

TIMEOUT_NAMES = {"CellTimeoutError", "NotebookTimeout"}


class NotebookDeadline(Execute):
    """Execute, with every cell's limit cut to what is left of the notebook's."""

    notebook_timeout = Integer(
        600, help="Seconds for the whole notebook; later cells are not run").tag(
        config=True)

    def preprocess(self, nb, resources=None, km=None):
        """Start the notebook's clock, then run it as nbgrader does."""
        self._deadline = time.monotonic() + self.notebook_timeout
        return super().preprocess(nb, resources, km)

    def _get_timeout(self, cell):
        """Return the cell's own limit, or what is left of the notebook's if less."""
        left = max(1, round(self._deadline - time.monotonic()))
        own = super()._get_timeout(cell)
        return left if own is None else min(own, left)

    def preprocess_cell(self, cell, resources, index):
        """Run the cell unless time is up; a grade cell's stderr counts as stdout."""
        if cell.cell_type == "code" and time.monotonic() >= self._deadline:
            cell.outputs = [nbformat.v4.new_output(
                "error", ename="NotebookTimeout",
                evalue=f"the notebook's {self.notebook_timeout} s were up; not run",
                traceback=[f"NotebookTimeout: over {self.notebook_timeout} s"])]
            return cell, resources
        cell, resources = super().preprocess_cell(cell, resources, index)
        if utils.is_grade(cell):  # a warning must not cost the point (nbgrader would)
            for out in cell.outputs:
                if out.output_type == "stream" and out.name == "stderr":
                    out.name = "stdout"
        return cell, resources


def _errors(cell: NotebookNode | None) -> list:
    """Return the error outputs of `cell` (none for a missing cell)."""
    return [o for o in (cell.outputs if cell is not None else [])
            if o.output_type == "error"]


def _by_id(nb: NotebookNode) -> dict:
    """Return {grade_id: cell} for the nbgrader cells of `nb`."""
    return {c.metadata["nbgrader"]["grade_id"]: c for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("grade_id")}


def entry(source: list, submitted: NotebookNode | None, graded: NotebookNode | None,
          number: int, score: float | None) -> str:
    """Return the gradebook's word for exercise `number` of one submission.

    `source` is the instructor version's grade ids in order; `score` is nbgrader's.
    """
    if submitted is None:
        return "not submitted"
    if graded is None:
        return "not graded: see autograde.log"
    answer, grade = f"answer-{number}", f"exercise-{number}"
    present, cells = _by_id(submitted), _by_id(graded)
    if answer not in present:
        return "cell deleted"
    if score and grade in cells and not _errors(cells[grade]):
        return "right"
    before = source[:source.index(grade)]
    course = [n for n in before if not n.startswith(("answer-", "exercise-"))]
    looked = [cells.get(n) for n in course] + [
        cells.get(answer), cells.get(grade)]  # the course's cells and this exercise's
    if any(e.ename in TIMEOUT_NAMES for c in looked for e in _errors(c)):
        return "timed out"
    own = _errors(cells.get(answer)) + _errors(cells.get(grade))
    said = own[-1].evalue if own else ""
    for word in ("check changed", "not answered yet", "not yet"):
        if f"exercise {number}: {word}" in said:
            learner = _errors(cells[answer])
            if learner and word != "check changed":  # say why: their cell raised
                return f"raised {learner[0].ename}"
            return "not answered" if word == "not answered yet" else word
    if any(name not in present for name in before):
        return "cell deleted"
    return f"raised {own[0].ename}" if own else "not yet"


class PerExercise(ExportPlugin):
    """Export one row per student, one column per exercise ('01 ex2'), and the score;
    and nbgrader's own CSV (a row per student and notebook) as grades.csv beside it."""

    def export(self, gradebook: Gradebook) -> None:
        """Write the CSV to `--to` (default gradebook.csv), then nbgrader's."""
        coursedir = self.parent.coursedir
        dest = Path(self.to or "gradebook.csv")
        CsvExportPlugin(parent=self.parent, to=str(Path(coursedir.root) /
                                                   "grades.csv")).export(gradebook)
        columns, rows = [], {}
        students = sorted(s.id for s in gradebook.students)
        for assignment in sorted(gradebook.assignments, key=lambda a: a.name):
            for notebook in assignment.notebooks:
                source = list(_by_id(_read(coursedir.format_path(
                    coursedir.source_directory, ".", assignment.name), notebook.name)))
                exercises = sorted(int(c.name.split("-")[1])
                                   for c in notebook.grade_cells)
                columns += [f"{assignment.name[:2]} ex{k}" for k in exercises]
                for student in students:
                    row = rows.setdefault(student, {"score": 0.0, "max": 0.0})
                    submitted = _read(coursedir.format_path(
                        coursedir.submitted_directory, student, assignment.name),
                        notebook.name)
                    graded = _read(coursedir.format_path(
                        coursedir.autograded_directory, student, assignment.name),
                        notebook.name)
                    for k in exercises:
                        try:
                            score = gradebook.find_grade(
                                f"exercise-{k}", notebook.name, assignment.name,
                                student).score
                        except MissingEntry:
                            score = None
                        row[f"{assignment.name[:2]} ex{k}"] = entry(
                            source, submitted, graded, k, score)
                        row["score"] += score or 0.0
                        row["max"] += 1.0
        with open(dest, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["student", *columns, "score", "max"])
            for student in students:
                row = rows[student]
                writer.writerow([student, *(row.get(c, "not submitted")
                                            for c in columns),
                                 f"{row['score']:g}", f"{row['max']:g}"])
        self.log.info("Wrote %s", dest)


def _read(folder: str, name: str) -> NotebookNode | None:
    """Return notebook `name` in `folder`, or None if there is none."""
    path = Path(folder) / f"{name}.ipynb"
    return nbformat.read(path, as_version=4) if path.exists() else None
