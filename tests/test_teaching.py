"""The teacher's kit (tools/teach): the release hides the solutions and the held-back
checks, and the grader's verdicts agree with the notebooks' own checks.

Every notebook is checked in-process (nbgrader's own release preprocessors, the judge
on a toy namespace); one real class folder of 01 and 02, the two fastest notebooks,
is released and graded once by nbgrader, with every kind of submission in it.
"""

from __future__ import annotations

import collections
import copy
import csv
import functools
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("nbformat",  # the floor lane: no Jupyter at all
                    reason="no Jupyter stack: the teacher's kit runs on nbgrader")

import nbformat  # noqa: E402
from conftest import NOTEBOOKS, ROOT  # noqa: E402

from tests.exercise_plugin import check_call, wrong_answers  # noqa: E402
from tools.learner_time import MINUTES_PER_EXERCISE, learner_minutes  # noqa: E402
from tools.teach import judge  # noqa: E402
from tools.teach.held_out import HELD_OUT, held_out  # noqa: E402
from tools.teach.notebooks import BADGE, exercises, instructor_version, submission  # noqa: E402

# make test installs nbgrader (requirements-teach.txt); make test-compat deselects
# these tests (tooling) and has none, so a missing nbgrader fails each test, not the
# collection of the whole suite.
HAS_NBGRADER = importlib.util.find_spec("nbgrader") is not None
if HAS_NBGRADER:
    from nbgrader.preprocessors import ClearHiddenTests, ClearSolutions

    from tools.teach.__main__ import needed_scripts
    from tools.teach.nbgrader_ext import entry, judge_cells


@pytest.fixture(autouse=True)
def nbgrader_installed():
    assert HAS_NBGRADER, ("nbgrader is missing: pip install -r requirements-teach.txt "
                          "(make test installs it)")


pytestmark = pytest.mark.tooling
FAST = ["01_cuda_queries", "02_devices"]  # graded for real by nbgrader below
CELL_TIMEOUT = 15  # s, per exercise's code and check (a busy CI runner's 01 ex2 check
# takes a few), and the sleeping submission's cost, in parallel with the other judges
COURSE_URL = "pytorch-gpu-course/pytorch-gpu-course"


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


def secrets(path: Path) -> list[tuple[str, str]]:
    """Return (what, line) for every line of the solutions, the held-back wrong
    answers and held-out cases of `path` that the course does not show elsewhere."""
    course = nbformat.read(path, as_version=4)
    shown = visible_text(course)
    found = []
    for ex in exercises(course, path):
        lines = distinctive(ex.solution.source, shown)
        assert lines, f"{path.stem} exercise {ex.number}: no solution line to grep"
        found += [(f"solution {ex.number}", line) for line in lines]
        found += [(f"wrong answer of {ex.number}", line)
                  for answer in ex.wrong for line in distinctive(answer, shown)]
    found += [(f"held-out case of {k}", line)
              for k, tests in held_out(path.stem).items()
              for code in tests for line in distinctive(code, shown)]
    return found


def strings(value) -> list[str]:
    """Return every string in a notebook's JSON: sources, outputs, metadata."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *strings(v)]]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


def nonblank(source: str) -> list[str]:
    return [line for line in source.split("\n") if line.strip()]


def is_colab(cell) -> bool:
    return "colab-setup" in cell.metadata.get("tags", [])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_the_release_holds_no_solution_and_no_held_back_check(path):
    released = "\n".join(strings(release_view(path)))  # sources, outputs, metadata
    found = secrets(path)
    leaked = [(what, line) for what, line in found if line in released]
    assert not leaked, f"{path.stem}: the release shows {leaked[:3]}"
    assert len(found) > 20, f"{path.stem}: only {len(found)} lines grepped"
    assert COURSE_URL not in released, f"{path.stem}: the release points at the course"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_the_release_keeps_every_line_but_the_solutions(path):
    """Every cell but the solutions (and Colab's, which no longer fetch the course),
    each line once; an exercise's check code in a read-only cell before it."""
    course = nbformat.read(path, as_version=4)
    released = release_view(path)
    kept = [c for c in course.cells if "solution" not in c.metadata.get("tags", [])]
    cells = [c for c in released.cells
             if not c.metadata.get("nbgrader", {}).get("grade", False)]
    lines = collections.Counter(line for c in cells if not is_colab(c)
                                for line in nonblank(c.source))
    want = collections.Counter(line for c in kept if not is_colab(c)
                               for line in nonblank(c.source) if BADGE not in line)
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
    graders = [c for c in instructor(path).cells
               if c.metadata.get("nbgrader", {}).get("grade", False)]
    assert len(graders) == len(found), (
        f"{path.stem}: {len(graders)} grade cells for {len(found)} exercises")
    assert all(len(nonblank(c.source)) == 1 for c in graders), (
        "an instructor's grade cell holds more than its title: a hidden test")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_the_judge_gets_each_exercises_check_and_every_held_back_case(path):
    """The grader's verdict is the notebook's: the same check call, on the learner's
    cell, then the same wrong answers that the plugin feeds to it under nbval."""
    course = nbformat.read(path, as_version=4)
    cells = judge_cells(instructor(path), release_view(path), path.stem)
    answers = {c["number"]: c for c in cells if c["kind"] == "answer"}
    held = wrong_answers(path)
    found = exercises(course, path)
    assert sorted(answers) == [ex.number for ex in found], sorted(answers)
    released = {c.metadata["nbgrader"]["grade_id"]: c.source
                for c in release_view(path).cells if "nbgrader" in c.metadata}
    for ex in found:
        got = answers[ex.number]
        assert got["call"] == check_call(ex.cell.source), (path.stem, got["call"])
        assert got["learner"] == ex.learner, (path.stem, got["learner"])
        assert got["source"] == released[f"answer-{ex.number}"], "not the learner's"
        assert got["wrong"] == held.get(ex.number, []), (
            f"{path.stem} exercise {ex.number}: the judge holds {len(got['wrong'])} "
            f"wrong answers, tests/wrong_answers {len(held.get(ex.number, []))}")
        assert got["held_out"] == held_out(path.stem).get(ex.number, [])
    course_code = [c["source"] for c in cells if c["kind"] == "course"]
    solutions = "\n".join(ex.solution.source for ex in found)
    assert not [s for s in course_code if s.strip() and s in solutions], (
        "a solution reached the judge as a course cell")


def test_held_out_cases_name_real_exercises():
    for stem, cases in HELD_OUT.items():
        path = ROOT / "notebooks" / f"{stem}.ipynb"
        found = exercises(nbformat.read(path, as_version=4), path)
        assert set(cases) <= {ex.number for ex in found}, (stem, sorted(cases))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_a_release_ships_the_scripts_its_notebook_names_and_no_others(path):
    scripts = needed_scripts(path)
    code = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells
                     if c.cell_type == "code")
    named = {n for n in re.findall(r"\b(\w+\.py)\b", code)
             if (ROOT / "notebooks" / "scripts" / n).exists()}
    assert named <= scripts, f"{path.stem}: {sorted(named - scripts)} left out"
    every = sorted(p.name for p in (ROOT / "notebooks" / "scripts").glob("*.py"))
    assert len(scripts) < len(every), f"{path.stem} ships every script"


# The judge, in-process, on a notebook-like namespace with one exercise: 2 + 2.
TOY = """
from helpers.exercises import check
import torch
TABLE = {2: 4, 3: 6}

def test_double(fn):
    for x, want in TABLE.items():
        assert fn(x) == want, f"{fn(x)!r} is not {x} doubled"
"""
CALL = "check(double, test=test_double)"
WRONG = ["def double(x):\n    return x + 2"]
HELD = ["def held_out(fn):\n    assert fn(10) == 20, 'ten, doubled, is 20'"]


def toy_verdict(code: str | None, held=HELD) -> dict:
    j = judge.Judge(cell_timeout=2)  # the sleeping case's cost
    j.course(TOY, 0)
    return j.exercise({"number": 1, "source": code, "call": CALL, "learner": "double",
                       "wrong": WRONG, "held_out": held})


@pytest.mark.parametrize("code, want", [
    ("def double(x):\n    return 2 * x\n\ncheck(double, test=test_double)", "right"),
    ("def double(x):\n    raise NotImplementedError\n", "not answered"),
    ("def double(x):\n    return x + 2", "not yet"),
    ("def double(x):\n    return {2: 4, 3: 6}[x]", "not yet"),  # a lookup: held-out
    ("double = 1 / 0", "raised ZeroDivisionError"),
    ("import time\ntime.sleep(60)", "timed out"),
    (None, "cell deleted"),
    # the test redefined in the learner's cell, or reached through its globals
    ("def test_double(fn):\n    pass\ndef double(x):\n    return 0", "not yet"),
    ("test_double.__globals__['TABLE'] = {}\ndef double(x):\n    return 20", "not yet"),
    ("import importlib\nimportlib.reload = lambda m: m\n"
     "import helpers.exercises as e\ne.check = lambda *a, **k: True\n"
     "def double(x):\n    return 0", "not yet"),
    ("get_ipython().input_transformers_cleanup.append(lambda lines: [])\n"
     "def double(x):\n    return 0", "raised NameError"),  # no IPython in the judge
    ("TABLE.clear()\ndef double(x):\n    return 20 if x == 10 else 0",
     "check changed"),  # in place: the held-back wrong answer then passes
])
def test_the_judges_verdicts(code, want):
    got = toy_verdict(code)
    assert got["entry"] == want, got


def test_the_judge_runs_every_held_back_wrong_answer_and_puts_torch_back():
    import torch

    messy = ("import torch\ntorch.set_default_dtype(torch.float64)\n"
             "def double(x):\n    return 2 * x")
    got = toy_verdict(messy)
    assert got["entry"] == "right" and got["wrong"] == [
        "not yet: 5 is not 3 doubled"], got
    assert torch.get_default_dtype() == torch.float32, torch.get_default_dtype()


def test_a_submission_without_a_verdict_gets_none():
    nb = submission(release_view(NOTEBOOKS[0]), {})
    assert entry(None, None, 1) == "not submitted"
    assert entry(nb, None, 1) == "not graded: see autograde.log"
    assert entry(nb, nb, 1) == "not graded: see autograde.log"  # no judge output


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


def test_a_hubs_config_keeps_its_own_settings_and_gets_the_courses_once(tmp_path):
    from tools.teach.__main__ import MARK, write_config

    own = 'c = get_config()\nc.CourseDirectory.course_id = "hub-101"\n'
    (tmp_path / "nbgrader_config.py").write_text(own)
    for timeout in (600, 90):  # a second run rewrites the course's part
        write_config(tmp_path, fresh=False, timeout=timeout)
    text = (tmp_path / "nbgrader_config.py").read_text()
    assert text.startswith(own) and text.count(MARK) == 1, text[:300]
    assert "c.Judge.timeout = 90" in text and "600" not in text.split(MARK)[1]
    assert "pytorch-gpu-course" not in text, "the hub's course_id was overridden"


# TEACHING.md's session plans: each a table of minutes that must add up.
def plans() -> dict[str, list[tuple[str, int]]]:
    text = (ROOT / "TEACHING.md").read_text()
    found = {}
    for title, body in re.findall(r"\n\| (\*\*[^|]+\*\*) \| minutes \|\n\|---\|---\|\n"
                                  r"((?:\|.*\|\n)+)", text):
        found[title.strip("*")] = [(row.split("|")[1].strip(),
                                    int(row.split("|")[2].strip().strip("*")))
                                   for row in body.strip().split("\n")]
    return found


def estimates() -> dict[str, list[int]]:
    """Return {notebook number: [minutes of each exercise]} from TEACHING.md's table:
    "1 value (4), 2 functions (8, 8)"; one figure for several is each one's."""
    found = {}
    for nn, text in re.findall(r"\n\| (\d\d) \|[^|]+\|[^|]+\|[^|]+\| ([^|]+) \|",
                               (ROOT / "TEACHING.md").read_text()):
        minutes = []
        for count, figures in re.findall(r"(\d) (?:values?|functions?) \(([^)]*)\)",
                                         text):
            each = [int(f) for f in re.findall(r"\d+", figures)]
            minutes += each * int(count) if len(each) == 1 else each
        found[nn] = minutes
    return found


def test_the_guides_times_per_notebook_are_the_readmes():
    """TEACHING.md copies the README's CPU runtime and learner time: both agree."""
    def last_columns(text: str, drop: int) -> dict[str, list[str]]:
        """{notebook: [runtime, learner time]}: the 2 columns before the last `drop`."""
        found = {}
        for nn, rest in re.findall(r"\n\| (\d\d) \|(.*)\|", text):
            cols = [c.strip() for c in rest.split("|")]
            found[nn] = cols[len(cols) - 2 - drop:len(cols) - drop]
        return found
    readme = last_columns((ROOT / "README.md").read_text(), 0)
    guide = last_columns((ROOT / "TEACHING.md").read_text().split(
        "## Which notebooks for which session")[1], 1)
    assert len(guide) == len(readme) >= 18, (sorted(guide), sorted(readme))
    for nn, times in guide.items():
        assert times == readme[nn], f"{nn}: TEACHING.md {times}, README {readme[nn]}"


def test_the_session_plans_add_up_with_slack():
    found = plans()
    assert len(found) >= 3, sorted(found)
    for title, rows in found.items():
        length = int(re.search(r"(\d+)-minute", title).group(1))
        *parts, (label, total) = rows
        assert label == "**total**" and total == length, (title, label, total)
        assert sum(m for _, m in parts) == length, (
            f"{title}: the rows add up to {sum(m for _, m in parts)}, not {length}")
        slack = dict(parts).get("slack: questions, a slow laptop", 0)
        assert slack >= length // 10, f"{title}: {slack} min of slack, under 10 %"
        for label, minutes in parts:
            if m := re.match(r"(\d\d) reading and code cells", label):
                path = next((ROOT / "notebooks").glob(f"{m.group(1)}_*.ipynb"))
                n = len(exercises(nbformat.read(path, as_version=4), path))
                want = learner_minutes(path) - MINUTES_PER_EXERCISE * n
                assert minutes == want, f"{title}: {label}: {minutes}, not {want}"
            elif m := re.match(r"(\d\d) exercises? ([\d, and]+) \(", label):
                which = [int(k) for k in re.findall(r"\d+", m.group(2))]
                each = estimates()[m.group(1)]
                want = sum(each[k - 1] for k in which)
                assert minutes == want, f"{title}: {label}: {minutes}, not {want}"


# Real nbgrader: one class folder of 01 and 02, released and graded once.
def students(found: dict) -> dict:
    """Return {student: {notebook stem: answers}} (answers as submission() takes)."""
    ex01, ex02 = found["01_cuda_queries"], found["02_devices"]
    leak = ("import os\ntry:\n    import tools.teach\nexcept ImportError:\n"
            "    pass\nelse:\n    raise RuntimeError('the checkout is importable')\n"
            "assert not [n for n in os.listdir('..') if n in ('source', 'submitted')]\n"
            "assert not [n for n in os.listdir('.') if n.endswith('.ipynb')]\n")
    return {
        "solutions": {"01_cuda_queries": {ex.number: ex.solved for ex in ex01},
                      "02_devices": {ex.number: ex.solved for ex in ex02}},
        "broken": {"01_cuda_queries": {1: "answer = 1 / 0",
                                       2: "import time\ntime.sleep(3600)", 3: None}},
        "empty": {"02_devices": {}},
        "wrong": {  # typical wrong answers, and wrong ones that tamper with the check
            "01_cuda_queries": {ex.number: ex.wrong[-1] for ex in ex01},
            "02_devices": {
                1: ex02[0].wrong[0],
                2: "def test_meta_build(fn):\n    pass\n" + ex02[1].wrong[0],
                3: "import importlib\nimportlib.reload = lambda m: m\n"
                   "import helpers.exercises\n"
                   "helpers.exercises.check = lambda *a, **k: True\n"
                   + ex02[2].wrong[0],
                4: leak + ex02[3].solved}},  # right only if it saw no solution
    }


EXPECTED = {  # student: the gradebook row, 01's three exercises then 02's four
    "broken": ["raised ZeroDivisionError", "timed out", "cell deleted"]
    + ["not submitted"] * 4 + ["0", "7"],
    "empty": ["not submitted"] * 3 + ["not answered"] * 4 + ["0", "7"],
    "solutions": ["right"] * 7 + ["7", "7"],
    "wrong": ["not yet"] * 6 + ["right", "1", "7"],
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Release 01 and 02 and grade a class folder of synthetic submissions, once."""
    out = tmp_path_factory.mktemp("teach")
    subs = out / "submissions"
    found = {}
    for stem in FAST:
        path = ROOT / "notebooks" / f"{stem}.ipynb"
        found[stem] = exercises(nbformat.read(path, as_version=4), path)
    for student, got in students(found).items():
        for stem, answers in got.items():
            path = ROOT / "notebooks" / f"{stem}.ipynb"
            nb = submission(release_view(path), answers)
            if student == "broken":  # a grade cell deleted too: nbgrader puts it back
                nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {})
                            .get("grade_id") != "exercise-1"]
            (subs / student).mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, subs / student / path.name)
    done = subprocess.run(
        [sys.executable, "-m", "tools.teach", "grade", str(subs), "--out", str(out),
         f"--cell-timeout={CELL_TIMEOUT}"], cwd=ROOT,
        capture_output=True, text=True, timeout=600)
    return out, done


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
    assert own[("wrong", "02_devices")] == 1.0, own


@pytest.mark.slow
def test_the_judge_gave_every_held_back_wrong_answer_not_yet(graded):
    """Agreement: the solution is right and every wrong answer of tests/wrong_answers/
    gets 'not yet' from the grader, as from the notebook's check under nbval."""
    out, _ = graded
    for stem in FAST:
        path = ROOT / "notebooks" / f"{stem}.ipynb"
        nb = nbformat.read(out / "grading" / "autograded" / "solutions" / stem /
                           f"{stem}.ipynb", as_version=4)
        said = {c.metadata["nbgrader"]["grade_id"]: "".join(
                    o.get("text", "") for o in c.outputs)
                for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")}
        for ex in exercises(nbformat.read(path, as_version=4), path):
            want = (f"exercise {ex.number}: right: right "
                    f"({len(held_out(stem).get(ex.number, []))} held-out cases; "
                    f"{len(ex.wrong)} held-back wrong answers get 'not yet')")
            assert said[f"exercise-{ex.number}"].strip() == want, (
                stem, said[f"exercise-{ex.number}"])


@pytest.mark.slow
def test_no_file_of_the_real_release_or_the_feedback_holds_a_secret(graded):
    """Every byte nbgrader wrote for students (the release: notebooks with their
    metadata, helpers) and sent back to them (the HTML feedback)."""
    out, _ = graded
    release, feedback = out / "grading" / "release", out / "grading" / "feedback"
    for stem in FAST:
        files = sorted(p for p in (release / stem).rglob("*") if p.is_file())
        names = {p.relative_to(release / stem).parts[0] for p in files}
        assert names == {f"{stem}.ipynb", "helpers"}, sorted(names)  # no scripts/
        text = "\n".join(
            "\n".join(strings(json.loads(p.read_text()))) if p.suffix == ".ipynb"
            else p.read_text() for p in files)
        assert len(list(feedback.rglob(f"{stem}.html"))) == 3, sorted(
            feedback.rglob("*.html"))
        student = {"01_cuda_queries": "broken", "02_devices": "empty"}[stem]
        html = (feedback / student / stem / f"{stem}.html").read_text()  # no secret
        assert f"exercise 1: {EXPECTED[student][0 if stem < '02' else 3]}" in html, (
            "the feedback does not show the judge's verdict")  # in its answer cells
        for what, line in secrets(ROOT / "notebooks" / f"{stem}.ipynb"):
            assert line not in text, f"{stem}: the release shows {what}: {line}"
            escaped = line.replace("&", "&amp;").replace("<", "&lt;").replace(
                ">", "&gt;").replace('"', "&quot;").replace("'", "&#x27;")
            assert line not in html and escaped not in html, (
                f"{stem}: the feedback shows {what}: {line}")
        assert COURSE_URL not in text, f"{stem}: the release points at the course"
