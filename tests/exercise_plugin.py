"""A pytest plugin: after each notebook exercise that nbval runs, feed its check the
typical wrong answers in tests/wrong_answers/NN_name.py and expect "not yet".

Loaded for every pytest run by pyproject.toml (`-p tests.exercise_plugin`), so it
works whether pytest is pointed at tests/, at notebooks/, or at both.
"""

from __future__ import annotations

import ast
import importlib.util
import os
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WRONG_ANSWERS = Path(os.environ.get("COURSE_WRONG_ANSWERS",  # tests can point it away
                                    ROOT / "tests" / "wrong_answers"))


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


def wrong_answer_source(answer: str, exercise_source: str) -> str:
    """Return kernel code that runs `answer`, then the exercise's check, in a copy of
    the notebook's namespace (so the learner's names stay as they were)."""
    code = answer.rstrip() + "\n" + check_call(exercise_source)
    return (f"_wrong_ns = dict(globals())\n"
            f"exec(compile({code!r}, '<wrong answer>', 'exec'), _wrong_ns)\n"
            f"del _wrong_ns")


def pytest_collection_modifyitems(session, config, items):
    """After each nbval exercise cell, run its wrong answers in the same kernel."""
    try:
        from nbval.plugin import IPyNbCell
    except ImportError:  # a torch-only interpreter: no notebooks are collected
        return
    import nbformat

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
        if not isinstance(item, IPyNbCell) or isinstance(item, WrongAnswer):
            continue
        if "exercise" not in item.cell.metadata.get("tags", []):
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
