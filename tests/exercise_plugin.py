"""A pytest plugin that adds items to nbval's run of each notebook:

- after each exercise, its check gets the typical wrong answers in
  tests/wrong_answers/NN_name.py, and must say "not yet";
- under strict nbval, each cell that launches processes runs a second time, and must
  give the same stored output (the same lesson when a learner runs it again), before
  the cells that read its results. A launch cell that first removes its whole output
  folder (`shutil.rmtree`) runs once: a second run starts from the state the first
  did, and what the launcher itself leaves behind (ports, processes) is proved by the
  launch cells that do run twice;
- after each solution tagged `timing`, its exercise and solution run again
  LOAD_REPEATS times with a busy process on every core, and the solution must still
  be right: a timing lesson must hold on a learner's laptop with a browser open.

Loaded for every pytest run by pyproject.toml (`-p tests.exercise_plugin`), so it
works whether pytest is pointed at tests/, at notebooks/, or at both.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WRONG_ANSWERS = Path(os.environ.get("COURSE_WRONG_ANSWERS",  # tests can point it away
                                    ROOT / "tests" / "wrong_answers"))


# A call that starts processes; a cell that only defines a function is not a launch.
LAUNCH = re.compile(r"\b(torchrun|fresh_python|mp\.spawn|start_processes|"
                    r"subprocess\.(run|Popen|check_output|check_call))\(")
SKIP_TAGS = {"colab-setup", "nbval-skip"}  # the Colab cell does nothing elsewhere
LOAD_REPEATS = int(os.environ.get("COURSE_LOAD_REPEATS", 3))
# COURSE_EXTRAS=none adds nothing to nbval's cells: no wrong answers, no load runs
# (make test-compat, where make test has already run them under the pinned torch).
EXTRAS = os.environ.get("COURSE_EXTRAS", "all")
BURN = "while True: pass"  # one busy core


def is_launch(cell) -> bool:
    """True for a code cell that starts processes when it runs."""
    code = "\n".join(line for line in cell.source.split("\n")
                     if not line.lstrip().startswith("#"))
    tags = set(cell.metadata.get("tags", []))
    if tags & SKIP_TAGS or not LAUNCH.search(code):
        return False
    body = ast.parse("\n".join("" if line.lstrip().startswith(("%", "!")) else line
                               for line in cell.source.split("\n"))).body
    return not all(isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.Import,
                                     ast.ImportFrom)) for node in body)


def starts_fresh(cell) -> bool:
    """True for a launch cell that removes its output folder before it launches."""
    code = "\n".join(line.split("#")[0] for line in cell.source.split("\n"))
    launch = LAUNCH.search(code)
    return launch is not None and "shutil.rmtree(" in code[:launch.start()]


def wrong_answers(notebook: Path) -> dict[int, list[str]]:
    """Return {exercise number: [wrong answer code, ...]} for `notebook`."""
    path = WRONG_ANSWERS / f"{notebook.stem}.py"
    if not path.exists():
        return {}
    spec = importlib.util.spec_from_file_location(f"wrong_{notebook.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.WRONG


def check_call(source: str) -> str:
    """Return the source of the exercise cell's last statement, its check(...) call."""
    lines = [line for line in source.split("\n") if not line.lstrip().startswith("%")]
    tree = ast.parse("\n".join(lines))
    return ast.get_source_segment("\n".join(lines), tree.body[-1])


# Run in the kernel around each wrong answer: torch's global state put back, so a wrong
# answer that leaves a default device, dtype or grad mode behind cannot break the
# notebook's later cells (the check itself should still say what was left behind).
_SAVE = ("import torch as _wt\n"
         "_wrong_saved = (_wt.get_default_dtype(), _wt.is_grad_enabled(),\n"
         "                _wt.get_num_threads(), _wt.get_default_device(),\n"
         "                _wt.are_deterministic_algorithms_enabled())\n")
_RESTORE = ("_wt.set_default_dtype(_wrong_saved[0])\n"
            "_wt.set_grad_enabled(_wrong_saved[1])\n"
            "if _wt.get_num_threads() != _wrong_saved[2]:\n"
            "    _wt.set_num_threads(_wrong_saved[2])\n"
            "if _wt.get_default_device() != _wrong_saved[3]:\n"
            "    _wt.set_default_device(None if _wrong_saved[3].type == 'cpu'\n"
            "                           else _wrong_saved[3])\n"
            "if _wt.are_deterministic_algorithms_enabled() != _wrong_saved[4]:\n"
            "    _wt.use_deterministic_algorithms(_wrong_saved[4])\n"
            "del _wrong_ns, _wrong_saved, _wt\n")


def wrong_answer_source(answer: str, exercise_source: str) -> str:
    """Return kernel code that runs `answer`, then the exercise's check, in a copy of
    the notebook's namespace (so the learner's names stay as they were), and then puts
    torch's global state back."""
    code = answer.rstrip() + "\n" + check_call(exercise_source)
    return (_SAVE + "_wrong_ns = dict(globals())\ntry:\n"
            f"    exec(compile({code!r}, '<wrong answer>', 'exec'), _wrong_ns)\n"
            "finally:\n" + "".join(f"    {line}\n" for line in _RESTORE.splitlines()))


def pytest_collection_modifyitems(session, config, items):
    """After each nbval exercise cell, run its wrong answers in the same kernel."""
    if EXTRAS not in ("all", "none"):
        raise pytest.UsageError(f"COURSE_EXTRAS is {EXTRAS!r}: use all or none")
    try:
        from nbval.plugin import IPyNbCell
    except ImportError:  # a torch-only interpreter: no notebooks are collected
        return
    if EXTRAS == "none":
        return
    import nbformat

    class RunAgain(IPyNbCell):
        """Run a launch cell a second time; strict nbval compares it with its output."""

    class UnderLoad(IPyNbCell):
        """Rerun an exercise and its solution with every core busy; expect right."""

        def runtest(self):
            from helpers.exercises import SOLUTION_RIGHT

            burners = [subprocess.Popen([sys.executable, "-c", BURN])
                       for _ in range(os.cpu_count() or 1)]
            try:
                super().runtest()
            finally:
                for burner in burners:
                    burner.kill()
                    burner.wait()
            said = "".join(o.get("text", "") for o in self.test_outputs
                           if o.get("name") == "stdout").strip().splitlines()
            assert said and said[-1] == SOLUTION_RIGHT, (
                f"{self.name}: under load the solution did not print "
                f"{SOLUTION_RIGHT!r}; it said: {said[-3:]!r}")

    class WrongAnswer(IPyNbCell):
        """Run one wrong answer and expect the exercise's check to say "not yet"."""

        def runtest(self):
            super().runtest()
            said = "".join(o.get("text", "") for o in self.test_outputs
                           if o.get("name") == "stdout")
            assert said.startswith("not yet"), (
                f"{self.name}: the check did not say 'not yet' to a wrong answer:\n"
                f"{self.cell.answer}\nIt said: {said.strip()!r}")

    added = []
    for item in items:
        added.append(item)
        if not isinstance(item, IPyNbCell) or type(item) is not IPyNbCell:
            continue
        tags = item.cell.metadata.get("tags", [])
        strict = bool(item.parent.compare_outputs)  # --nbval, not --nbval-lax
        if (strict and item.cell.cell_type == "code" and is_launch(item.cell)
                and not starts_fresh(item.cell)):
            added.append(RunAgain.from_parent(
                item.parent, name=f"{item.name} run again", cell_num=item.cell_num,
                cell=item.cell, options=item.options))
        if "solution" in tags and "timing" in tags:
            cells = item.parent.nb.cells
            k = next(k for k, c in enumerate(cells) if c is item.cell)
            exercise = next(c for c in reversed(cells[:k]) if c.cell_type == "code")
            source = exercise.source + "\n" + item.cell.source
            for r in range(1, LOAD_REPEATS + 1):
                cell = nbformat.v4.new_code_cell(source)
                added.append(UnderLoad.from_parent(
                    item.parent, name=f"{item.name} under load {r}",
                    cell_num=item.cell_num, cell=cell,
                    options=defaultdict(bool, check=False)))
        if "exercise" not in tags:
            continue
        cells = [c for c in item.parent.nb.cells if "exercise" in
                 c.metadata.get("tags", [])]
        number = next(n for n, c in enumerate(cells, 1) if c is item.cell)
        answers = wrong_answers(Path(item.parent.path)).get(number, [])
        for k, answer in enumerate(answers, start=1):
            source = wrong_answer_source(answer, item.cell.source)
            cell = nbformat.v4.new_code_cell(source)
            cell.answer = answer
            added.append(WrongAnswer.from_parent(
                item.parent, name=f"{item.name} exercise {number} wrong answer {k}",
                cell_num=item.cell_num, cell=cell,
                options=defaultdict(bool, check=False)))
    items[:] = added
