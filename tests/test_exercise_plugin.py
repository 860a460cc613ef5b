"""The wrong-answer plugin bites: a check that passes a wrong answer fails the run."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

nbformat = pytest.importorskip("nbformat", reason="no nbformat: the plugin's test "
                               "writes a notebook with it")
pytest.importorskip("nbval", reason="no nbval: the plugin runs inside nbval")

from conftest import ROOT  # noqa: E402

# The plugin and check() on a toy 2 + 2: nothing that depends on torch's version.
# The tests that read a run of pytest on toy notebooks are `slow`: each run is a
# child Python with a kernel.
pytestmark = pytest.mark.tooling
EXERCISE = "answer = ...  # 2 + 2\ncheck(answer, 4)"
# One run of two toy notebooks: one wrong answer the check rejects, one it accepts.
WRONG = {"98_rejected": "answer = 5", "99_accepted": "answer = 4"}
# pytest -v's lines: "99_accepted.ipynb::Cell 1 ... FAILED" (nbval's own cells show
# "99_accepted::ipynb::Cell 1").
RESULT = re.compile(r"^(\d\d_\w+)(?:\.|::)ipynb::(.*?) (PASSED|FAILED|ERROR)\b", re.M)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict[str, list]]:
    tmp = tmp_path_factory.mktemp("plugin")
    (tmp / "wrong").mkdir()
    for stem, wrong in WRONG.items():
        nb = nbformat.v4.new_notebook(cells=[
            nbformat.v4.new_code_cell("from helpers import check"),
            nbformat.v4.new_code_cell(EXERCISE, metadata={"tags": ["exercise"]})])
        nbformat.write(nb, tmp / f"{stem}.ipynb")
        (tmp / "wrong" / f"{stem}.py").write_text(f"WRONG = {{1: {[wrong]!r}}}\n")
    env = {**os.environ, "COURSE_WRONG_ANSWERS": str(tmp / "wrong"),
           "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-p",
         "tests.exercise_plugin", "--nbval-lax", "--nbval-current-env",
         *(f"{stem}.ipynb" for stem in WRONG)],
        cwd=tmp, env=env, capture_output=True, text=True, timeout=120)
    items = {stem: [] for stem in WRONG}
    for stem, name, outcome in RESULT.findall(done.stdout):
        items[stem].append((name, outcome))
    return done, items


@pytest.mark.slow
def test_a_wrong_answer_that_gets_not_yet_passes(run):
    done, items = run
    assert len(items["98_rejected"]) == 3, done.stdout[-2000:]  # 2 cells, 1 answer
    assert all(outcome == "PASSED" for _, outcome in items["98_rejected"]), items


@pytest.mark.slow
def test_a_wrong_answer_that_the_check_accepts_fails(run):
    done, items = run
    assert items["99_accepted"] == [("Cell 0", "PASSED"), ("Cell 1", "PASSED"), (
        "Cell 1 exercise 1 wrong answer 1", "FAILED")], done.stdout[-2000:]
    assert "did not say 'not yet'" in done.stdout, done.stdout[-2000:]


# A launch cell whose lesson changes on a second run, one whose lesson holds, and a
# solution tagged `timing`; under strict nbval, with stored outputs as Run All left.
LAUNCH = ("import subprocess, sys\n"
          "RUNS = globals().get('RUNS', 0) + 1\n"
          "said = subprocess.run([sys.executable, '-c', 'print(6 * 7)'],\n"
          "                      capture_output=True, text=True).stdout.strip()\n"
          "print(said{})")


def _cell(source: str, said: str, n: int, tags: tuple[str, ...] = ()):
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": list(tags)})
    cell.execution_count = n
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=said + "\n")]
    return cell


@pytest.fixture(scope="module")
def strict(tmp_path_factory) -> dict[str, list]:
    from helpers.exercises import SOLUTION_RIGHT

    tmp = tmp_path_factory.mktemp("strict")
    (tmp / "wrong").mkdir()
    lessons = {"96_same_again": "", "97_changes_again": ", 'run', RUNS"}
    for stem, extra in lessons.items():
        nb = nbformat.v4.new_notebook(cells=[
            _cell("from helpers import check", "", 1),
            _cell(LAUNCH.format(extra), "42" + (" run 1" if extra else ""), 2),
            _cell("answer = ...  # 2 + 2\ncheck(answer, 4)",
                  "not answered yet: replace the `...` with your answer, then rerun",
                  3, ("exercise",)),
            _cell("assert check(2 + 2, 4, solution=True)", SOLUTION_RIGHT, 4,
                  ("solution", "timing"))])
        for cell in nb.cells[:1]:
            cell.outputs = []
        nbformat.write(nb, tmp / f"{stem}.ipynb")
        (tmp / "wrong" / f"{stem}.py").write_text("WRONG = {1: ['answer = 5']}\n")
    env = {**os.environ, "COURSE_WRONG_ANSWERS": str(tmp / "wrong"),
           "PYTHONPATH": str(ROOT), "COURSE_LOAD_REPEATS": "2"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-p",
         "tests.exercise_plugin", "--nbval", "--nbval-current-env",
         *(f"{stem}.ipynb" for stem in lessons)],
        cwd=tmp, env=env, capture_output=True, text=True, timeout=120)
    items = {stem: [] for stem in lessons}
    for stem, name, outcome in RESULT.findall(done.stdout):
        items[stem].append((name, outcome))
    return items


@pytest.mark.slow
def test_a_launch_cell_runs_again_and_must_give_the_same_output(strict):
    assert ("Cell 1 run again", "PASSED") in strict["96_same_again"], strict
    assert ("Cell 1 run again", "FAILED") in strict["97_changes_again"], strict
    assert ("Cell 0 run again", "PASSED") not in strict["96_same_again"], (
        "an import is no launch", strict)


@pytest.mark.slow
def test_a_timing_solution_reruns_under_load(strict):
    runs = [(n, o) for n, o in strict["96_same_again"] if "under load" in n]
    assert runs == [("Cell 3 under load 1", "PASSED"),
                    ("Cell 3 under load 2", "PASSED")], strict


def test_a_wrong_answer_cannot_leave_torchs_global_state_behind(capsys):
    import torch
    from exercise_plugin import wrong_answer_source

    leaves = ("torch.set_default_device('meta')\ntorch.set_grad_enabled(False)\n"
              "torch.set_default_dtype(torch.float64)\nanswer = 5")
    namespace = {"torch": torch, "check": lambda a, e: print(
        "not yet" if a != e else "right")}
    exec(wrong_answer_source(leaves, "answer = ...\ncheck(answer, 4)"), namespace)
    assert capsys.readouterr().out.strip() == "not yet"
    assert torch.zeros(1).device.type == "cpu", "the default device stayed meta"
    assert torch.is_grad_enabled() and torch.get_default_dtype() == torch.float32
    assert "answer" not in namespace, "the wrong answer bound the learner's name"


@pytest.mark.parametrize("source, runs_twice", [
    ("shutil.rmtree(OUT, ignore_errors=True)\nrun = torchrun('s.py', OUT)", False),
    ("(OUT / 'a.pt').unlink(missing_ok=True)\nrun = torchrun('s.py', OUT)", True),
    ("run = torchrun('s.py', OUT)\nshutil.rmtree(OUT)", True),  # after: no help
    ("# shutil.rmtree(OUT) is not called\nrun = torchrun('s.py', '--out', OUT)", True),
])
def test_only_a_launch_that_starts_from_an_empty_folder_runs_once(source, runs_twice):
    from exercise_plugin import is_launch, starts_fresh

    cell = nbformat.v4.new_code_cell(source)
    assert is_launch(cell)
    assert (not starts_fresh(cell)) is runs_twice, source
