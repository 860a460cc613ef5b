"""The two places where the course configures nbgrader beyond its options.

`Judge` takes the place of nbgrader's Execute preprocessor in autograding: the
verdicts come from tools/teach/judge.py, run in a process of its own on the course's
cells and the learner's answer cells only, in a copy of the release's folder (no
solutions, the checkout off its path), within a time limit for the whole notebook and
for each cell. `PerExercise` is an `nbgrader export` plugin that writes one row per
student and one column per exercise, with a word for each.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
from nbconvert.preprocessors import Preprocessor
from nbformat.notebooknode import NotebookNode
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import CsvExportPlugin, ExportPlugin
from traitlets import Bool, Integer, Unicode

from tests.exercise_plugin import wrong_answers
from tools.teach.held_out import held_out

ROOT = Path(__file__).resolve().parents[2]
JUDGE = Path(__file__).with_name("judge.py")
ENTRY = re.compile(r"exercise (\d+): ([^:]*)(?::|$)")


def judge_cells(source: NotebookNode, submitted: NotebookNode, stem: str) -> list:
    """Return the judge's cells: the course's code cells of the instructor version
    `source`, and for each exercise the learner's cell from `submitted` (None when
    deleted), its check call and held-back parts."""
    learner = {c.metadata["nbgrader"]["grade_id"]: c.source for c in submitted.cells
               if c.cell_type == "code"
               and c.metadata.get("nbgrader", {}).get("solution")}
    wrong, extra, cells = wrong_answers(Path(f"{stem}.ipynb")), held_out(stem), []
    for cell in source.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or meta.get("grade"):
            continue
        grade_id = meta.get("grade_id", "")
        if not grade_id.startswith("answer-"):
            cells.append({"kind": "course", "source": cell.source})
            continue
        k = int(grade_id.split("-")[1])
        lines = [ln for ln in cell.source.split("\n")
                 if not ln.lstrip().startswith("%")]
        last = ast.parse("\n".join(lines)).body[-1]
        call = ast.get_source_segment("\n".join(lines), last)
        cells.append({"kind": "answer", "number": k, "source": learner.get(grade_id),
                      "call": call, "learner": ast.unparse(last.value.args[0]),
                      "wrong": wrong.get(k, []), "held_out": extra.get(k, [])})
    return cells


def run_judge(cells: list, folder: Path, *, timeout: int, cell_timeout: int) -> dict:
    """Run the judge on `cells` in a copy of `folder` (its files but notebooks);
    return {exercise number: verdict}, a missing number having run out of time."""
    with tempfile.TemporaryDirectory(prefix="judge-") as tmp:
        work = Path(tmp) / folder.name
        shutil.copytree(folder, work, ignore=shutil.ignore_patterns(
            "*.ipynb", ".ipynb_checkpoints", "__pycache__"))
        job = {"cells": cells, "folder": str(work), "hide": [str(ROOT)],
               "cell_timeout": cell_timeout}
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        # Idle OpenMP threads sleep instead of spinning: with a judge per core, spinning
        # threads burn the CPU the other judges need. The results are the same.
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            done = subprocess.run([sys.executable, "-I", str(JUDGE)], cwd=work, env=env,
                                  input=json.dumps(job), capture_output=True,
                                  text=True, timeout=timeout)
            out = done.stdout
        except subprocess.TimeoutExpired as err:
            out = err.stdout.decode() if isinstance(err.stdout, bytes) else (
                err.stdout or "")
    found = {}
    for line in out.splitlines():
        try:
            verdict = json.loads(line)
        except ValueError:
            continue
        found[verdict["number"]] = verdict
    return found


def job_key(cells: list, timeout: int, cell_timeout: int) -> str:
    """Return a fingerprint of one judge's job, for its verdicts judged beforehand."""
    job = json.dumps([cells, timeout, cell_timeout], sort_keys=True)
    return hashlib.sha256(job.encode()).hexdigest()


def judged_path(course: Path, student: str, notebook: str) -> Path:
    """Return where `python -m tools.teach grade` keeps verdicts judged beforehand."""
    return Path(course) / "judged" / student / f"{notebook}.json"


def judge_ahead(course: Path, source: Path, submitted: Path, student: str, *,
                timeout: int, cell_timeout: int) -> None:
    """Judge one submission before nbgrader's autograde asks (several at once, one
    per core), keeping its verdicts under the job's fingerprint."""
    stem = submitted.stem
    cells = judge_cells(nbformat.read(source, as_version=4),
                        nbformat.read(submitted, as_version=4), stem)
    found = run_judge(cells, source.parent, timeout=timeout, cell_timeout=cell_timeout)
    path = judged_path(course, student, stem)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"key": job_key(cells, timeout, cell_timeout),
                                "verdicts": list(found.values())}))


class Judge(Preprocessor):
    """Autograde a notebook with tools/teach/judge.py instead of its own kernel."""

    enabled = Bool(True)  # nbconvert's preprocessors are off unless enabled
    timeout = Integer(600, help="Seconds for the whole notebook").tag(config=True)
    cell_timeout = Integer(300, help="Seconds for each cell").tag(config=True)
    source_directory = Unicode("source").tag(config=True)

    def preprocess(self, nb, resources):
        """Set each grade cell's output to the judge's verdict (an error unless right)
        and each answer cell's to what the learner's code printed."""
        assignment = resources["nbgrader"]["assignment"]
        name = resources["nbgrader"]["notebook"]
        folder = Path(self.source_directory) / assignment
        source = nbformat.read(folder / f"{name}.ipynb", as_version=4)
        cells = judge_cells(source, nb, name)
        ahead = judged_path(Path.cwd(), resources["nbgrader"]["student"], name)
        saved = json.loads(ahead.read_text()) if ahead.exists() else {}
        if saved.get("key") == job_key(cells, self.timeout, self.cell_timeout):
            found = {v["number"]: v for v in saved["verdicts"]}
        else:  # a plain `nbgrader autograde`, or a submission changed since
            found = run_judge(cells, folder, timeout=self.timeout,
                              cell_timeout=self.cell_timeout)
        for cell in nb.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
            if cell.cell_type != "code" or "-" not in grade_id:
                continue
            kind, k = grade_id.rsplit("-", 1)
            verdict = found.get(int(k)) if k.isdigit() else None
            if kind == "answer":
                cell.outputs = [nbformat.v4.new_output(
                    "stream", name="stdout", text=verdict["output"][-3000:])] if (
                    verdict and verdict["output"]) else []
            elif kind == "exercise":
                if verdict is None:
                    verdict = {"entry": "timed out",
                               "said": f"the notebook's {self.timeout} s were up"}
                text = f"exercise {k}: {verdict['entry']}: {verdict['said']}"
                cell.outputs = [nbformat.v4.new_output(
                    "stream", name="stdout", text=text + "\n")
                    if verdict["entry"] == "right" else nbformat.v4.new_output(
                    "error", ename="NotRight", evalue=text, traceback=[text])]
        return nb, resources


def _by_id(nb: NotebookNode) -> dict:
    """Return {grade_id: cell} for the nbgrader cells of `nb`."""
    return {c.metadata["nbgrader"]["grade_id"]: c for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("grade_id")}


def entry(submitted: NotebookNode | None, graded: NotebookNode | None,
          number: int) -> str:
    """Return the gradebook's word for exercise `number` of one submission: the
    judge's, from the graded notebook's grade cell."""
    if submitted is None:
        return "not submitted"
    if graded is None:
        return "not graded: see autograde.log"
    cell = _by_id(graded).get(f"exercise-{number}")
    for out in cell.outputs if cell is not None else []:
        said = ENTRY.match(out.get("text", "") or out.get("evalue", ""))
        if said and int(said.group(1)) == number:
            return said.group(2).strip()
    return "not graded: see autograde.log"


def export(gradebook: Gradebook, root: Path, dest: Path) -> None:
    """Write one row per student, one column per exercise ('01 ex2') and the score to
    `dest`, and nbgrader's own CSV (a row per student and notebook) to
    root/grades.csv, for the nbgrader course folder `root`."""
    CsvExportPlugin(to=str(Path(root) / "grades.csv")).export(gradebook)
    columns, rows = [], {}
    students = sorted(s.id for s in gradebook.students)
    for assignment in sorted(gradebook.assignments, key=lambda a: a.name):
        for notebook in assignment.notebooks:
            exercises = sorted(int(c.name.split("-")[1]) for c in notebook.grade_cells)
            columns += [f"{assignment.name[:2]} ex{k}" for k in exercises]
            for student in students:
                row = rows.setdefault(student, {"score": 0.0, "max": 0.0})
                submitted = _read(Path(root) / "submitted" / student / assignment.name,
                                  notebook.name)
                graded = _read(Path(root) / "autograded" / student / assignment.name,
                               notebook.name)
                for k in exercises:
                    try:
                        score = gradebook.find_grade(
                            f"exercise-{k}", notebook.name, assignment.name,
                            student).score
                    except MissingEntry:
                        score = None
                    word = entry(submitted, graded, k)
                    row[f"{assignment.name[:2]} ex{k}"] = word
                    # the judge's word and nbgrader's score must agree on a point
                    row["score"] += (score or 0.0) if word == "right" else 0.0
                    row["max"] += 1.0
    with open(dest, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["student", *columns, "score", "max"])
        for student in students:
            row = rows[student]
            writer.writerow([student, *(row.get(c, "not submitted") for c in columns),
                             f"{row['score']:g}", f"{row['max']:g}"])


class PerExercise(ExportPlugin):
    """`nbgrader export --exporter=tools.teach.nbgrader_ext.PerExercise`: export()'s
    two CSVs, for a course graded by a plain `nbgrader autograde`."""

    def export(self, gradebook: Gradebook) -> None:
        """Write the CSV to `--to` (default gradebook.csv), and nbgrader's."""
        export(gradebook, Path(self.parent.coursedir.root),
               Path(self.to or "gradebook.csv"))


def _read(folder: str, name: str) -> NotebookNode | None:
    """Return notebook `name` in `folder`, or None if there is none."""
    path = Path(folder) / f"{name}.ipynb"
    return nbformat.read(path, as_version=4) if path.exists() else None
