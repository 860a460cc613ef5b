"""Build the student release, or grade a folder of submissions, with nbgrader.

    python -m tools.teach release [--out build/teach] [--course DIR] [NOTEBOOK ...]
    python -m tools.teach grade [SUBMISSIONS] [--course DIR] [--timeout 600]

`release` writes nbgrader's course folder in OUT/course (source/: the instructor
version; release/: what students get, one folder per notebook). `grade` takes
SUBMISSIONS/<student>/.../NN_name.ipynb (nbgrader's submitted/ folder has that shape),
autogrades them in OUT/grading, and writes OUT/gradebook.csv (one row per student, one
column per exercise), nbgrader's grades.csv and its HTML feedback per student.
With --course DIR (a JupyterHub's nbgrader course folder), both work in DIR instead:
release adds the notebooks to it, grade autogrades DIR/submitted into DIR's own
gradebook (what the formgrader shows) and writes the same OUT/gradebook.csv.
"""

from __future__ import annotations

import argparse
import ast
import csv
import os
import re
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook

from tools.teach.nbgrader_ext import export, judge_ahead
from tools.teach.notebooks import instructor_version

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")

MARK = "# --- tools.teach: from here to the end; rewritten on every run ---"
CONFIG = MARK + """
import sys
sys.path.insert(0, {root!r})  # tools.teach, for the two classes below

from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbgrader.preprocessors import (
    AssignLatePenalties, CheckCellMetadata, ClearHiddenTests, ClearMarkScheme,
    ClearSolutions, ComputeChecksums, IgnorePattern, IncludeHeaderFooter,
    InstantiateTests, LimitOutput, LockCells, SaveAutoGrades, SaveCells)

from tools.teach.nbgrader_ext import Judge

c = get_config()  # noqa: F821
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
# No kernel runs the submission: the judge runs the course's cells and the learner's
# answer cells in a process of its own (tools/teach/nbgrader_ext.py).
c.Autograde.autograde_preprocessors = [
    Judge, IgnorePattern, ClearMetadataPreprocessor, LimitOutput,
    SaveAutoGrades, AssignLatePenalties, CheckCellMetadata]
c.Judge.cell_timeout = {cell_timeout}
c.Judge.timeout = {timeout}
c.OverwriteCells.add_missing_cells = True  # a deleted grade cell comes back
"""
FRESH = ('c = get_config()  # noqa: F821\n'
         'c.CourseDirectory.course_id = "pytorch-gpu-course"\n')
SCRIPT = re.compile(r"\b(\w+)\.py\b")


def needed_scripts(notebook: Path) -> set[str]:
    """Return the scripts/ files that `notebook`'s code names, and what they import
    from scripts/ in turn."""
    have = {p.stem for p in (NOTEBOOKS / "scripts").glob("*.py")}
    code = "\n".join(c.source for c in nbformat.read(notebook, as_version=4).cells
                     if c.cell_type == "code")
    todo, found = {m for m in SCRIPT.findall(code) if m in have}, set()
    while todo:
        name = todo.pop()
        found.add(name)
        tree = ast.parse((NOTEBOOKS / "scripts" / f"{name}.py").read_text())
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            todo |= {n.split(".")[0] for n in names} & have - found
    return {f"{n}.py" for n in found}



def nbgrader(course: Path, command: str, *args: str, log: Path) -> bool:
    """Run nbgrader's `command` (an NbGraderAPI method, such as autograde) with `args`
    in `course`, in this process (an nbgrader process costs seconds to start); append
    its log to `log`; return whether it succeeded."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    os.environ.update(TQDM_DISABLE="1", PYTHONHASHSEED="0",  # the judges inherit them
                      PYDEVD_DISABLE_FILE_VALIDATION="1")
    bin_dir = str(Path(sys.executable).parent)  # nbgrader's database runs `alembic`
    if bin_dir not in os.environ["PATH"].split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join([bin_dir, os.environ["PATH"]])
    here = os.getcwd()
    os.chdir(course)  # where the course's settings look for source/ and judged/
    try:
        config = PyFileConfigLoader("nbgrader_config.py",
                                    path=str(course)).load_config()
        api = NbGraderAPI(coursedir=CourseDirectory(config=config, root=str(course)),
                          config=config)
        done = getattr(api, command)(*args, force=True)
    finally:
        os.chdir(here)
    with open(log, "a") as f:
        f.write(done.get("log") or "")
        f.write(done.get("error") or "")
    return bool(done["success"])


def write_config(course: Path, *, fresh: bool, timeout: int = 600,
                 cell_timeout: int = 300) -> None:
    """Write the course's nbgrader settings into course/nbgrader_config.py: the whole
    file for a fresh course, else after what a hub's own config already says."""
    path = course / "nbgrader_config.py"
    own = "" if fresh or not path.exists() else path.read_text().split(MARK)[0]
    path.write_text((FRESH if fresh else own) + CONFIG.format(
        root=str(ROOT), timeout=timeout, cell_timeout=cell_timeout))


def build_course(course: Path, notebooks: list[Path], *, timeout: int = 600,
                 cell_timeout: int = 300, colab_url: str = "",
                 fresh: bool = True) -> Path:
    """Write an nbgrader course folder (a fresh one, or add to a hub's) with the
    instructor version of each notebook, and let nbgrader generate the release."""
    if fresh and course.exists():
        shutil.rmtree(course)
    (course / "source").mkdir(parents=True, exist_ok=True)
    write_config(course, fresh=fresh, timeout=timeout, cell_timeout=cell_timeout)
    log = course / "generate.log"
    for path in notebooks:
        folder = course / "source" / path.stem
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir()
        nbformat.write(instructor_version(path, colab_url), folder / path.name)
        shutil.copytree(ROOT / "helpers", folder / "helpers", ignore=IGNORE)
        scripts = needed_scripts(path)
        if scripts:
            (folder / "scripts").mkdir()
            for name in sorted(scripts):
                shutil.copyfile(NOTEBOOKS / "scripts" / name, folder / "scripts" / name)
    for path in notebooks:  # a hub's other assignments stay as they are
        if not nbgrader(course, "generate_assignment", path.stem, log=log):
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
    course = Path(args.course) if args.course else Path(args.out) / "course"
    folder = build_course(course.resolve(), course_notebooks(args.notebooks),
                          colab_url=args.colab_url, fresh=not args.course)
    count = len(list(folder.glob("*/*.ipynb")))
    print(f"student release: {folder} ({count} notebooks, one folder each)")


def grade(args) -> None:
    """Autograde SUBMISSIONS and write the gradebook."""
    hub = Path(args.course).resolve() if args.course else None
    if not args.submissions and not hub:
        sys.exit("grade needs SUBMISSIONS (a folder of student folders) or --course")
    submissions = Path(args.submissions or hub / "submitted").resolve()
    if not submissions.is_dir():
        sys.exit(f"SUBMISSIONS={submissions} is not a folder of student folders")
    found = collect(submissions)
    if not found:
        sys.exit(f"no course notebooks under {submissions}/<student>/")
    stems = sorted({stem for got in found.values() for stem in got})
    course = hub or Path(args.out).resolve() / "grading"
    if hub:  # released from this course already; its settings with these limits
        write_config(hub, fresh=False, timeout=args.timeout,
                     cell_timeout=args.cell_timeout)
    else:
        build_course(course, [NOTEBOOKS / f"{s}.ipynb" for s in stems],
                     timeout=args.timeout, cell_timeout=args.cell_timeout)
    for student, got in found.items():
        for stem, path in got.items():
            dest = course / "submitted" / student / stem / f"{stem}.ipynb"
            if dest.resolve() != path.resolve():
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, dest)
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:  # one judge per core
        list(pool.map(lambda job: judge_ahead(
            course, course / "source" / job[1] / f"{job[1]}.ipynb",
            course / "submitted" / job[0] / job[1] / f"{job[1]}.ipynb", job[0],
            timeout=args.timeout, cell_timeout=args.cell_timeout),
            [(s, stem) for s, got in found.items() for stem in got]))
    log = course / "autograde.log"
    for student, got in found.items():  # a failure is logged; the others go on
        for stem in got:
            nbgrader(course, "autograde", stem, student, log=log)
    gradebook = Path(args.out).resolve() / "gradebook.csv"
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as book:  # in-process:
        export(book, course, gradebook)  # an nbgrader process costs seconds to start
    if args.feedback:
        for student, got in found.items():
            for stem in got:
                nbgrader(course, "generate_feedback", stem, student, log=log)
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
    gra.add_argument("submissions", nargs="?",
                     help="a folder of <student>/ folders (default: COURSE/submitted)")
    gra.add_argument("--timeout", type=int, default=600,
                     help="seconds for each submitted notebook (default 600)")
    gra.add_argument("--cell-timeout", type=int, default=300,
                     help="seconds for each exercise's code and each check of it "
                          "(default 300)")
    gra.add_argument("--no-feedback", dest="feedback", action="store_false",
                     help="skip nbgrader's HTML feedback")
    rel.add_argument("--colab-url", default="",
                     help="a git URL of your copy of the release, for its Colab cell")
    for p in (rel, gra):
        p.add_argument("--course", help="work in this nbgrader course folder (a hub's)")
        p.add_argument("--out", default=str(ROOT / "build" / "teach"),
                       help="where the course folder goes (default build/teach)")
    args = parser.parse_args(argv)
    {"release": release, "grade": grade}[args.command](args)


if __name__ == "__main__":
    main()
