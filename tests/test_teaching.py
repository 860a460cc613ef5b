"""The teacher's kit (tools/teach): the release hides the solutions and the hidden
tests, and the grader agrees with the notebooks' own checks.

Every notebook is checked in-process (nbgrader's own release preprocessors, no
kernel); real nbgrader runs release and grade synthetic submissions of 01 and 02
only, the fastest notebooks, to stay within CI's time.
"""

from __future__ import annotations

import ast
import collections
import copy
import csv
import functools
import importlib.util
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest

pytest.importorskip("nbformat",  # the floor lane: no Jupyter at all
                    reason="no Jupyter stack: the teacher's kit runs on nbgrader")

import nbformat  # noqa: E402
from conftest import NOTEBOOKS, ROOT  # noqa: E402

from tests.exercise_plugin import check_call, wrong_answers  # noqa: E402
from tools.teach import judge  # noqa: E402
from tools.teach.notebooks import exercises, instructor_version, submission  # noqa: E402

# make test installs nbgrader (requirements-teach.txt); make test-compat deselects
# these tests (tooling) and has none, so a missing nbgrader fails each test, not the
# collection of the whole suite.
HAS_NBGRADER = importlib.util.find_spec("nbgrader") is not None
if HAS_NBGRADER:
    from nbgrader.preprocessors import ClearHiddenTests, ClearSolutions

    from tools.teach.nbgrader_ext import NotebookDeadline


@pytest.fixture(autouse=True)
def nbgrader_installed():
    assert HAS_NBGRADER, ("nbgrader is missing: pip install -r requirements-teach.txt "
                          "(make test installs it)")


pytestmark = pytest.mark.tooling
FAST = ["01_cuda_queries", "02_devices"]  # graded for real by nbgrader below
CELL_TIMEOUT = 20  # s: the hanging submission costs this once; cells here take < 3 s


@functools.cache
def instructor(path: Path) -> nbformat.NotebookNode:
    return instructor_version(path)


@functools.cache
def release_view(path: Path) -> nbformat.NotebookNode:
    """Return what generate_assignment makes of a notebook, by nbgrader's own
    preprocessors as tools/teach configures them (no database, no kernel)."""
    nb = copy.deepcopy(instructor(path))
    resources = {"language": "python"}
    nb, _ = ClearSolutions(code_stub={"python": ""}).preprocess(nb, resources)
    nb, _ = ClearHiddenTests().preprocess(nb, resources)
    return nb


def distinctive(code: str, visible: str) -> list[str]:
    """Return the lines of `code` worth grepping for: none the student may see."""
    return [s for line in code.split("\n")
            if len(s := line.strip()) >= 12 and not s.startswith("#")
            and s not in visible]


def visible_text(nb: nbformat.NotebookNode) -> str:
    """Return the sources of the cells a student is meant to see, and their stored
    outputs (some print the helpers' source)."""
    cells = [c for c in nb.cells if "solution" not in c.metadata.get("tags", [])]
    return "\n".join([c.source for c in cells] + [
        o.get("text", "") + o.get("data", {}).get("text/plain", "")
        for c in cells for o in c.get("outputs", [])])


def nonblank(source: str) -> list[str]:
    return [line for line in source.split("\n") if line.strip()]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_the_release_holds_no_solution_and_no_hidden_test(path):
    course = nbformat.read(path, as_version=4)
    shown = visible_text(course)
    released = visible_text(release_view(path))  # sources and stored outputs
    secrets = []
    for ex in exercises(course, path):
        lines = distinctive(ex.solution.source, shown)
        assert lines, f"{path.stem} exercise {ex.number}: no solution line to grep"
        secrets += [(f"solution {ex.number}", line) for line in lines]
        secrets += [(f"wrong answer of {ex.number}", line)
                    for answer in ex.wrong for line in distinctive(answer, shown)]
    secrets += [("the grader's verdict", line) for line in distinctive(
        Path(judge.__file__).read_text(), shown)]
    leaked = [(what, line) for what, line in secrets if line in released]
    assert not leaked, f"{path.stem}: the release shows {leaked[:3]}"
    assert len(secrets) > 20, f"{path.stem}: only {len(secrets)} lines grepped"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_the_release_keeps_every_line_but_the_solutions(path):
    """Every cell but the solutions, each line once; an exercise cell's check code
    in a read-only cell of its own just before the learner's cell."""
    course = nbformat.read(path, as_version=4)
    released = release_view(path)
    kept = [c for c in course.cells if "solution" not in c.metadata.get("tags", [])]
    cells = [c for c in released.cells
             if not c.metadata.get("nbgrader", {}).get("grade", False)]
    lines = collections.Counter(line for c in cells for line in nonblank(c.source))
    want = collections.Counter(line for c in kept for line in nonblank(c.source))
    assert lines == want, f"{path.stem}: {(lines - want) or (want - lines)}"
    found = exercises(course, path)
    checks = [ex for ex in found if ex.setup]
    assert len(cells) == len(kept) + len(checks), (len(cells), len(kept), len(checks))
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in released.cells]
    for ex in found:
        answer = ids.index(f"answer-{ex.number}")
        assert ids[answer + 1] == f"exercise-{ex.number}", ids[answer:answer + 2]
        if ex.setup:
            assert ids[answer - 1] == f"check-{ex.number}", ids[answer - 1]
        cell = released.cells[answer]
        assert cell.metadata["nbgrader"]["solution"] and not cell.outputs, cell
        assert nonblank(cell.source) == nonblank(ex.placeholder) + nonblank(ex.call)
    graders = [c for c in released.cells
               if c.metadata.get("nbgrader", {}).get("grade", False)]
    assert len(graders) == len(found), (
        f"{path.stem}: {len(graders)} grade cells for {len(found)} exercises")
    assert all(len(nonblank(c.source)) == 1 for c in graders), (
        "a released grade cell holds more than its title")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_each_grade_cell_runs_the_exercises_check_and_its_wrong_answers(path):
    """The grader's verdict is the notebook's: the same check call, on the learner's
    names, and the same wrong answers that the plugin feeds to it under nbval."""
    course = nbformat.read(path, as_version=4)
    graders = {c.metadata["nbgrader"]["grade_id"]: c
               for c in instructor(path).cells
               if c.metadata.get("nbgrader", {}).get("grade", False)}
    held = wrong_answers(path)
    for ex in exercises(course, path):
        call = check_call(ex.cell.source)
        tree = ast.parse(graders[f"exercise-{ex.number}"].source)
        verdict = tree.body[-2].value  # _grade_exercise(globals(), k, call, [...])
        number, said, answers = (ast.literal_eval(a) for a in verdict.args[1:])
        assert (number, said) == (ex.number, call), (path.stem, ex.number, said)
        assert answers == held.get(ex.number, []), (
            f"{path.stem} exercise {ex.number}: the grader holds {len(answers)} "
            f"wrong answers, tests/wrong_answers {len(held.get(ex.number, []))}")


def parse(cell) -> ast.Module:
    """Return a code cell's syntax tree, its magics and shell lines left out."""
    return ast.parse("\n".join("" if line.lstrip().startswith(("%", "!")) else line
                               for line in cell.source.split("\n")))


def bound(cell) -> set:
    """Return every name a cell binds, at any depth (arguments and imports too)."""
    names = set()
    for node in ast.walk(parse(cell)):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
    return names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_no_later_cell_needs_a_name_that_only_a_solution_binds(path):
    """The release has no solution cells: a check that read one would break there."""
    course = nbformat.read(path, as_version=4)
    code = [c for c in course.cells if c.cell_type == "code"]
    others = set().union(*(bound(c) for c in code
                           if "solution" not in c.metadata.get("tags", [])))
    only = set().union(*(bound(c) for c in code
                         if "solution" in c.metadata.get("tags", []))) - others
    read = {n.id for c in code if "solution" not in c.metadata.get("tags", [])
            for n in ast.walk(parse(c))
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    assert not only & read, f"{path.stem}: cells read {sorted(only & read)}"


def toy_namespace() -> dict:
    """Return a notebook-like namespace with one exercise: answer 2 + 2."""
    from helpers.exercises import check

    def test_four(answer):
        assert answer == 4, f"{answer!r} is not 2 + 2"

    return {"check": check, "test_four": test_four, "answer": ...}


def verdict(ns: dict, wrong=("answer = 5",)) -> str:
    try:
        judge.grade_exercise(ns, 1, "check(answer, test=test_four)", list(wrong))
    except AssertionError as err:
        return str(err)
    return "right"


def test_the_verdict_says_right_not_yet_not_answered_and_check_changed(capsys):
    ns = toy_namespace()
    assert verdict(ns) == "exercise 1: not answered yet: replace the `...` with " \
        "your answer, then rerun"
    assert verdict({**ns, "answer": 5}).startswith("exercise 1: not yet: 5 is not")
    assert verdict({**ns, "answer": 4}) == "right"
    assert "1 held-back wrong answers still get 'not yet'" in capsys.readouterr().out
    lenient = {**ns, "answer": 4, "test_four": lambda answer: None}
    assert "check changed: held-back wrong answer 1" in verdict(lenient)
    own = {**ns, "answer": 5, "check": lambda *a, **k: True}  # a learner's check()
    assert verdict(own).startswith("exercise 1: not yet"), verdict(own)


def test_the_verdict_puts_back_what_a_wrong_answer_changed():
    import torch

    ns = toy_namespace()
    messy = "import torch\ntorch.set_default_dtype(torch.float64)\nanswer = 5"
    assert verdict({**ns, "answer": 4}, wrong=[messy]) == "right"
    assert torch.get_default_dtype() == torch.float32, torch.get_default_dtype()


def test_cells_after_the_notebooks_time_limit_do_not_run():
    deadline = NotebookDeadline(notebook_timeout=5)
    deadline._deadline = 0.0  # long past
    cell = nbformat.v4.new_code_cell("while True: pass")
    with mock.patch("nbgrader.preprocessors.Execute.preprocess_cell") as run:
        cell, _ = deadline.preprocess_cell(cell, {}, 0)
    assert not run.called, "a cell ran after the notebook's time was up"
    assert [o.ename for o in cell.outputs] == ["NotebookTimeout"], cell.outputs


def test_a_grade_cells_warning_does_not_cost_its_point():
    deadline = NotebookDeadline(notebook_timeout=5)
    deadline._deadline = float("inf")
    cell = nbformat.v4.new_code_cell("print('right')")
    cell.metadata["nbgrader"] = {"grade": True, "grade_id": "exercise-1", "points": 1}
    warned = nbformat.v4.new_output("stream", name="stderr", text="UserWarning: x\n")
    ran = (nbformat.from_dict({**cell, "outputs": [warned]}), {})
    with mock.patch("nbgrader.preprocessors.Execute.preprocess_cell",
                    return_value=ran):
        cell, _ = deadline.preprocess_cell(cell, {}, 0)
    assert [o.name for o in cell.outputs] == ["stdout"], cell.outputs


# Real nbgrader, on synthetic submissions of 01 and 02 built from the release.
def tamper(ex) -> str:
    """Return a wrong answer that also makes the exercise's test accept anything."""
    test = next(k.value.id for k in ast.parse(ex.call).body[0].value.keywords
                if k.arg == "test")
    return f"{ex.wrong[0]}\ndef {test}(answer):\n    pass"


def students(stem: str, found: list) -> dict:
    """Return {student: answers} for one notebook (answers as submission() takes)."""
    made = {"solutions": {ex.number: ex.solved for ex in found},
            "wrong": {ex.number: ex.wrong[-1] for ex in found}}
    if stem == "01_cuda_queries":
        made["empty"] = {}
        made["broken"] = {1: "answer = 1 / 0", 2: "while True:\n    pass", 3: None}
    else:  # 02's wrong answers are graded by the solutions' grade cells already
        made = {"solutions": made["solutions"], "broken": {1: tamper(found[0])}}
    return made


EXPECTED = {  # student: the gradebook row, 01's three exercises then 02's four
    "broken": ["raised ZeroDivisionError", "timed out", "cell deleted",
               "check changed", "not answered", "not answered", "not answered",
               "0", "7"],
    "empty": ["not answered"] * 3 + ["not submitted"] * 4 + ["0", "7"],
    "solutions": ["right"] * 7 + ["7", "7"],
    "wrong": ["not yet"] * 3 + ["not submitted"] * 4 + ["0", "7"],
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Grade synthetic submissions made from the release of 01 and 02."""
    out = tmp_path_factory.mktemp("teach")
    subs = out / "submissions"
    for stem in FAST:
        path = ROOT / "notebooks" / f"{stem}.ipynb"
        found = exercises(nbformat.read(path, as_version=4), path)
        for student, answers in students(stem, found).items():
            nb = submission(release_view(path), answers)
            if student == "broken" and stem == FAST[0]:  # a grade cell deleted too
                nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {})
                            .get("grade_id") != "exercise-1"]
            (subs / student).mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, subs / student / path.name)
    done = subprocess.run(
        [sys.executable, "-m", "tools.teach", "grade", str(subs), "--out", str(out),
         "--no-feedback", f"--cell-timeout={CELL_TIMEOUT}"], cwd=ROOT,
        capture_output=True, text=True, timeout=600)
    return out, done


@pytest.mark.slow
def test_the_real_release_is_what_the_in_process_view_shows(graded):
    """What nbgrader's generate_assignment wrote (grade runs it as release does)."""
    out, _ = graded
    for stem in FAST:
        folder = out / "grading" / "release" / stem
        released = nbformat.read(folder / f"{stem}.ipynb", as_version=4)
        view = release_view(ROOT / "notebooks" / f"{stem}.ipynb")
        assert [c.source for c in released.cells] == [c.source for c in view.cells]
        assert [c.get("outputs") for c in released.cells] == [
            c.get("outputs") for c in view.cells], f"{stem}: outputs differ"
        assert (folder / "helpers" / "exercises.py").exists(), sorted(folder.iterdir())


@pytest.mark.slow
def test_the_gradebook_has_a_row_per_student_and_a_word_per_exercise(graded):
    out, done = graded
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    with open(out / "gradebook.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["student", "01 ex1", "01 ex2", "01 ex3", "02 ex1", "02 ex2",
                       "02 ex3", "02 ex4", "score", "max"], rows[0]
    got = {row[0]: row[1:] for row in rows[1:]}
    assert got == EXPECTED, "\n".join(done.stdout.splitlines()[:8])
    with open(out / "grading" / "grades.csv", newline="") as f:
        own = {(r["student_id"], r["assignment"]): float(r["score"])
               for r in csv.DictReader(f)}
    assert own[("solutions", "02_devices")] == 4.0, own
    assert own[("broken", "01_cuda_queries")] == 0.0, own


@pytest.mark.slow
def test_the_grader_gave_every_held_back_wrong_answer_not_yet(graded):
    """In the graded kernel, each grade cell of the solutions ran every wrong answer
    of tests/wrong_answers/ through the grader's verdict: all said 'not yet'."""
    out, _ = graded
    for stem in FAST:
        path = ROOT / "notebooks" / f"{stem}.ipynb"
        nb = nbformat.read(out / "grading" / "autograded" / "solutions" / stem /
                           f"{stem}.ipynb", as_version=4)
        said = {c.metadata["nbgrader"]["grade_id"]: "".join(
                    o.get("text", "") for o in c.outputs)
                for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")}
        for ex in exercises(nbformat.read(path, as_version=4), path):
            want = (f"exercise {ex.number}: right (and {len(ex.wrong)} held-back "
                    "wrong answers still get 'not yet')")
            assert said[f"exercise-{ex.number}"].strip() == want, (
                stem, said[f"exercise-{ex.number}"])


def test_submissions_are_found_flat_or_as_nbgrader_collects_them(tmp_path, capsys):
    from tools.teach.__main__ import collect

    nb = nbformat.v4.new_notebook()
    for rel in ["ada/01_cuda_queries.ipynb", "bob/02_devices/02_devices.ipynb",
                "bob/.ipynb_checkpoints/01_cuda_queries-checkpoint.ipynb",
                "bob/01_cuda_queries.ipynb", "cy/my_notes.ipynb", ".git/x.ipynb"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, tmp_path / rel)
    found = collect(tmp_path)
    assert {s: sorted(got) for s, got in found.items()} == {
        "ada": ["01_cuda_queries"], "bob": ["01_cuda_queries", "02_devices"]}, found
    assert "my_notes.ipynb: not a notebook of the course" in capsys.readouterr().err


def test_a_notebook_nbgrader_could_not_grade_gets_its_own_entry():
    from tools.teach.nbgrader_ext import entry

    nb = submission(release_view(NOTEBOOKS[0]), {})
    source = [c.metadata["nbgrader"]["grade_id"] for c in nb.cells
              if "nbgrader" in c.metadata]
    assert entry(source, None, None, 1, None) == "not submitted"
    assert entry(source, nb, None, 1, None) == "not graded: see autograde.log"
