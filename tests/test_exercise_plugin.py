"""The wrong-answer plugin bites: a check that passes a wrong answer fails the run."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

nbformat = pytest.importorskip("nbformat", reason="no nbformat: the plugin's test "
                               "writes a notebook with it")
pytest.importorskip("nbval", reason="no nbval: the plugin runs inside nbval")

from conftest import ROOT  # noqa: E402

EXERCISE = "answer = ...  # 2 + 2\ncheck(answer, 4)"


def _run(tmp_path, wrong: list[str]) -> subprocess.CompletedProcess:
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("from helpers import check"),
        nbformat.v4.new_code_cell(EXERCISE, metadata={"tags": ["exercise"]})])
    nbformat.write(nb, tmp_path / "99_toy.ipynb")
    (tmp_path / "wrong").mkdir(exist_ok=True)
    (tmp_path / "wrong" / "99_toy.py").write_text(f"WRONG = {{1: {wrong!r}}}\n")
    env = {**os.environ, "COURSE_WRONG_ANSWERS": str(tmp_path / "wrong"),
           "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
         "tests.exercise_plugin", "--nbval-lax", "--nbval-current-env",
         str(tmp_path / "99_toy.ipynb")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_a_wrong_answer_that_gets_not_yet_passes(tmp_path):
    run = _run(tmp_path, ["answer = 5"])
    assert run.returncode == 0, run.stdout[-2000:]
    assert "3 passed" in run.stdout, run.stdout[-2000:]


def test_a_wrong_answer_that_the_check_accepts_fails(tmp_path):
    run = _run(tmp_path, ["answer = 4"])
    assert "1 failed" in run.stdout, run.stdout[-2000:]
    assert "did not say 'not yet'" in run.stdout, run.stdout[-2000:]
