"""Build the student release, or grade a folder of submissions, with nbgrader.

    python -m tools.teach release [--out build/teach] [NOTEBOOK ...]
    python -m tools.teach grade SUBMISSIONS [--out build/teach] [--timeout 600]

`release` writes nbgrader's course folder in OUT/course (source/: the instructor
version; release/: what students get, one folder per notebook). `grade` takes
SUBMISSIONS/<student>/.../NN_name.ipynb (nbgrader's submitted/ folder has that shape),
autogrades them in OUT/grading, and writes OUT/gradebook.csv (one row per student, one
column per exercise), nbgrader's grades.csv and its HTML feedback per student.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

from tools.teach.notebooks import instructor_version

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")

CONFIG = """\
# Written by `python -m tools.teach`; rebuilt on every run.
import sys
sys.path.insert(0, {root!r})  # tools.teach, for the two classes below

from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbgrader.preprocessors import (
    AssignLatePenalties, CheckCellMetadata, ClearHiddenTests, ClearMarkScheme,
    ClearSolutions, ComputeChecksums, IgnorePattern, IncludeHeaderFooter,
    InstantiateTests, LimitOutput, LockCells, SaveAutoGrades, SaveCells)

from tools.teach.nbgrader_ext import NotebookDeadline

c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "pytorch-gpu-course"
# The placeholder stays in the learner's cell: the solution region becomes nothing.
c.ClearSolutions.code_stub = {{"python": ""}}
# Learners may edit any cell to try things; autograding puts read-only cells back.
c.LockCells.lock_readonly_cells = False
# nbgrader's list without ClearOutput: the release keeps the course's stored outputs
# (the solutions, which held the only answer outputs, are gone from it).
c.GenerateAssignment.preprocessors = [
    IncludeHeaderFooter, InstantiateTests, LockCells, ClearSolutions,
    CheckCellMetadata, ComputeChecksums, SaveCells, ClearHiddenTests,
    ClearMarkScheme, ComputeChecksums, CheckCellMetadata]
c.Autograde.autograde_preprocessors = [
    NotebookDeadline, IgnorePattern, ClearMetadataPreprocessor, LimitOutput,
    SaveAutoGrades, AssignLatePenalties, CheckCellMetadata]
c.NotebookDeadline.timeout = {cell_timeout}
c.NotebookDeadline.notebook_timeout = {timeout}
c.OverwriteCells.add_missing_cells = True  # a deleted grade cell comes back
"""


def nbgrader(course: Path, *args: str, log: Path | None = None) -> int:
    """Run `nbgrader ARGS` in `course`; return its exit status."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
        PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
        TQDM_DISABLE="1", PYTHONHASHSEED="0", PYDEVD_DISABLE_FILE_VALIDATION="1")
    out = open(log, "a") if log else subprocess.DEVNULL  # noqa: SIM115
    try:
        return subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course,
                              env=env, stdout=out, stderr=subprocess.STDOUT).returncode
    finally:
        if log:
            out.close()


def build_course(course: Path, notebooks: list[Path], *, timeout: int = 600,
                 cell_timeout: int = 300) -> Path:
    """Write a fresh nbgrader course folder with the instructor version of each
    notebook, and let nbgrader generate the release (and its gradebook)."""
    if course.exists():
        shutil.rmtree(course)
    (course / "source").mkdir(parents=True)
    (course / "nbgrader_config.py").write_text(CONFIG.format(
        root=str(ROOT), timeout=timeout, cell_timeout=cell_timeout))
    log = course / "generate.log"
    for path in notebooks:
        folder = course / "source" / path.stem
        folder.mkdir()
        nbformat.write(instructor_version(path), folder / path.name)
        shutil.copytree(ROOT / "helpers", folder / "helpers", ignore=IGNORE)
        shutil.copytree(NOTEBOOKS / "scripts", folder / "scripts", ignore=IGNORE)
    if nbgrader(course, "generate_assignment", "*", "--force", log=log):
        sys.exit(f"nbgrader could not generate the release: see {log}")
    return course / "release"


def course_notebooks(names: list[str]) -> list[Path]:
    """Return the notebooks named (all of notebooks/ when none is)."""
    paths = [Path(n) for n in names] or sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        sys.exit(f"no such notebook: {', '.join(missing)}")
    return [p.resolve() for p in paths]


def collect(submissions: Path) -> dict[str, dict[str, Path]]:
    """Return {student: {notebook stem: path}} for SUBMISSIONS/<student>/**/*.ipynb."""
    known = {p.stem for p in course_notebooks([])}
    found: dict[str, dict[str, Path]] = {}
    for student in sorted(p for p in submissions.iterdir() if p.is_dir()):
        if student.name.startswith("."):
            continue
        for path in sorted(student.rglob("*.ipynb"), key=lambda p: p.stat().st_mtime):
            if ".ipynb_checkpoints" in path.parts:
                continue
            if path.stem not in known:
                print(f"skipped {path}: not a notebook of the course", file=sys.stderr)
                continue
            found.setdefault(student.name, {})[path.stem] = path  # the newest wins
    return found


def release(args) -> None:
    """Build the student release of the notebooks named (all by default)."""
    folder = build_course(Path(args.out) / "course", course_notebooks(args.notebooks))
    count = len(list(folder.glob("*/*.ipynb")))
    print(f"student release: {folder} ({count} notebooks, one folder each)")


def grade(args) -> None:
    """Autograde SUBMISSIONS and write the gradebook."""
    submissions = Path(args.submissions)
    if not submissions.is_dir():
        sys.exit(f"SUBMISSIONS={submissions} is not a folder of student folders")
    found = collect(submissions)
    if not found:
        sys.exit(f"no course notebooks under {submissions}/<student>/")
    stems = sorted({stem for got in found.values() for stem in got})
    course = Path(args.out).resolve() / "grading"
    build_course(course, [NOTEBOOKS / f"{s}.ipynb" for s in stems],
                 timeout=args.timeout, cell_timeout=args.cell_timeout)
    for student, got in found.items():
        for stem, path in got.items():
            dest = course / "submitted" / student / stem / f"{stem}.ipynb"
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)
    log = course / "autograde.log"
    nbgrader(course, "autograde", "*", "--force", log=log)  # a failure is logged; the
    # other submissions go on
    gradebook = Path(args.out).resolve() / "gradebook.csv"
    if nbgrader(course, "export", "--exporter=tools.teach.nbgrader_ext.PerExercise",
                f"--to={gradebook}", log=log):  # and nbgrader's grades.csv
        sys.exit(f"nbgrader export failed: see {log}")
    if args.feedback:
        nbgrader(course, "generate_feedback", "*", "--force", log=log)
    with open(gradebook, newline="") as f:
        rows = list(csv.reader(f))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    print(f"gradebook: {gradebook}; nbgrader's own: {course / 'grades.csv'}, "
          f"{course / 'feedback'}; log: {log}")


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and run `release` or `grade`."""
    parser = argparse.ArgumentParser(prog="python -m tools.teach",
                                     description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rel = sub.add_parser("release", help="build the student release")
    rel.add_argument("notebooks", nargs="*", help="default: every course notebook")
    gra = sub.add_parser("grade", help="autograde a folder of submissions")
    gra.add_argument("submissions", help="a folder of <student>/ folders")
    gra.add_argument("--timeout", type=int, default=600,
                     help="seconds for each submitted notebook (default 600)")
    gra.add_argument("--cell-timeout", type=int, default=300,
                     help="seconds for each cell (default 300)")
    gra.add_argument("--no-feedback", dest="feedback", action="store_false",
                     help="skip nbgrader's HTML feedback")
    for p in (rel, gra):
        p.add_argument("--out", default=str(ROOT / "build" / "teach"),
                       help="where the course folder goes (default build/teach)")
    args = parser.parse_args(argv)
    {"release": release, "grade": grade}[args.command](args)


if __name__ == "__main__":
    main()
