"""The grader's verdict on one exercise, run in the graded notebook's kernel.

Its source is copied into each autograder cell of nbgrader's instructor version (the
hidden tests), so grading needs nothing but the course's helpers: no import of tools/.
The wrong answers run as tests/exercise_plugin.py runs them under nbval: the answer's
code, then the exercise's own check call, in a copy of the notebook's namespace, with
torch's global state put back afterwards.
"""

from __future__ import annotations

VERDICTS = ("right", "not yet", "not answered yet", "check changed")


def grade_exercise(namespace: dict, number: int, call: str, wrong: list) -> None:
    """Print exercise `number`'s verdict; raise AssertionError unless it is right."""
    import contextlib
    import importlib
    import io

    import torch

    from helpers import exercises

    check = importlib.reload(exercises).check  # the course's own, whatever a cell did

    def run(code: str) -> tuple:
        """Return (right?, what the check said) for `code`, then the check call."""
        env, out = dict(namespace, check=check), io.StringIO()
        saved = (torch.get_default_dtype(), torch.is_grad_enabled(),
                 torch.get_num_threads(), torch.get_default_device(),
                 torch.are_deterministic_algorithms_enabled())
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                exec(compile(f"{code}\n__verdict__ = {call}", "<graded>", "exec"), env)
        finally:
            torch.set_default_dtype(saved[0])
            torch.set_grad_enabled(saved[1])
            if torch.get_num_threads() != saved[2]:
                torch.set_num_threads(saved[2])
            if torch.get_default_device() != saved[3]:
                torch.set_default_device(None if saved[3].type == "cpu" else saved[3])
            if torch.are_deterministic_algorithms_enabled() != saved[4]:
                torch.use_deterministic_algorithms(saved[4])
        said = [line for line in out.getvalue().splitlines()
                if line.startswith(("right", "not yet", "not answered yet"))]
        return bool(env.get("__verdict__")), (said[-1] if said else "")

    ok, said = run("")  # the learner's own names, as their cell left them
    if not ok:
        word = "not answered yet" if said.startswith("not answered") else "not yet"
        raise AssertionError(f"exercise {number}: {said or word}")
    for k, answer in enumerate(wrong, start=1):
        ok, said = run(answer)
        if ok or not said.startswith("not yet"):
            raise AssertionError(
                f"exercise {number}: check changed: held-back wrong answer {k} got "
                f"{said[:60] or 'no verdict'!r}, not 'not yet'; a cell redefined the "
                "check or its test")
    print(f"exercise {number}: right (and {len(wrong)} held-back wrong answers "
          "still get 'not yet')")
