"""The grader's verdicts on one submitted notebook, in a process of their own.

    python -I tools/teach/judge.py < job.json      (tools/teach/nbgrader_ext.py runs it)

The job (JSON on stdin) holds the course's own cells of the notebook, in order, from
the instructor version (never the submission's), each exercise's learner code taken
from the submission, and the checks' held-back parts: the typical wrong answers of
tests/wrong_answers/ and the held-out cases of tools/teach/held_out.py. It runs in a
copy of the release's folder (the notebook's helpers/ and scripts/, no solutions), with
that folder alone on sys.path: the course's checkout is not importable from here.

It is plain Python, not a Jupyter kernel, so nothing a learner writes can rewrite a
later cell (IPython's input transformers do not exist here). For each exercise:
1. the learner's code (their answer cell without its `check(...)` line) runs in a
   copy of the notebook's namespace; then every name of the namespace is put back as
   the course's cells left it, and torch's global state too: the learner's cell
   cannot redefine the check, its test, its tables or the course modules' names;
2. the exercise's own check call runs on the learner's name, with the course's `check`
   and test; then on each held-out case (a test on inputs the release never shows);
3. each held-back wrong answer runs as the learner's code and must get "not yet", as
   under nbval: if one passes, the learner's code changed the check ("check changed").
One JSON line per exercise goes to the original stdout; the cells' own output is kept
for the feedback and never mixed into that stream.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import signal
import sys
import traceback

SAID = ("right", "not yet", "not answered yet")


class CellTimeout(BaseException):  # noqa: N818
    """A learner's code, or a check of it, ran past the job's cell_timeout (a
    BaseException: a learner's `except Exception` does not swallow it)."""


def _alarm(signum, frame):
    raise CellTimeout


def plain(source: str) -> str:
    """Return a cell's code with its IPython-only lines (%magics, !shell) blanked."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line
                     for line in source.split("\n"))


def without_check_call(source: str) -> str:
    """Return the learner's code without its last `check(...)` line: the course's
    own check call runs instead."""
    code = plain(source)
    try:
        body = ast.parse(code).body
    except SyntaxError:
        return code
    last = body[-1] if body else None
    if (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
            and isinstance(last.value.func, ast.Name)
            and last.value.func.id == "check"):
        return "\n".join(code.split("\n")[:last.lineno - 1])
    return code


class Judge:
    """The notebook's namespace, built by the course's cells, and the verdicts on it."""

    def __init__(self, cell_timeout: int, folder: str = ""):
        self.ns: dict = {"__name__": "__main__", "__builtins__": __builtins__}
        self.cell_timeout = cell_timeout
        self.folder = os.path.realpath(folder) + os.sep if folder else None
        signal.signal(signal.SIGALRM, _alarm)

    def _course_modules(self) -> dict:
        """Return {module: a copy of its names} for the course's own modules (helpers,
        scripts): a learner's `helpers.exercises.check = ...` is undone too."""
        found = {}
        for name, module in list(sys.modules.items()):
            where = os.path.realpath(getattr(module, "__file__", None) or "")
            if name == "helpers" or name.startswith("helpers.") or (
                    self.folder and where.startswith(self.folder)):
                found[module] = dict(vars(module))
        return found

    @staticmethod
    def _restore_modules(saved: dict) -> None:
        for module, names in saved.items():
            space = vars(module)
            for name in [n for n in space if n not in names]:
                del space[name]
            space.update(names)

    def run(self, code: str, env: dict, name: str, limit: bool = True) -> tuple:
        """Exec `code` in `env`, within cell_timeout if `limit`; return (error or
        None, its printed output)."""
        out = io.StringIO()
        error = None
        saved = self._torch_state()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                signal.setitimer(signal.ITIMER_REAL, self.cell_timeout if limit else 0)
                try:
                    exec(compile(code, name, "exec"), env)  # noqa: S102
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
        except CellTimeout:
            error = ("CellTimeout", f"over {self.cell_timeout} s")
        except BaseException as err:  # noqa: BLE001 (SystemExit too: a learner's exit())
            error = (type(err).__name__, str(err))
            out.write("".join(traceback.format_exception_only(type(err), err)))
        finally:
            self._put_back(saved)
        return error, out.getvalue()

    @staticmethod
    def _torch_state():
        torch = sys.modules.get("torch")
        if torch is None:
            return None
        return (torch.get_default_dtype(), torch.is_grad_enabled(),
                torch.get_num_threads(), torch.get_default_device(),
                torch.are_deterministic_algorithms_enabled())

    @staticmethod
    def _put_back(saved) -> None:
        """Put torch's global state back as it was before a learner's code ran."""
        torch = sys.modules.get("torch")
        if saved is None or torch is None:
            return
        torch.set_default_dtype(saved[0])
        torch.set_grad_enabled(saved[1])
        if torch.get_num_threads() != saved[2]:
            torch.set_num_threads(saved[2])
        if torch.get_default_device() != saved[3]:
            torch.set_default_device(None if saved[3].type == "cpu" else saved[3])
        if torch.are_deterministic_algorithms_enabled() != saved[4]:
            torch.use_deterministic_algorithms(saved[4])

    def course(self, source: str, index: int) -> None:
        """Run one of the course's own cells in the notebook's namespace (bounded by
        the notebook's time limit alone, which the caller keeps)."""
        self.run(plain(source), self.ns, f"<course cell {index}>", limit=False)

    def untouched(self, code: str, name: str) -> tuple:
        """Run learner code in a copy of the namespace; then put every name back."""
        saved, modules = dict(self.ns), self._course_modules()
        env = dict(self.ns)
        error, out = self.run(code, env, name)
        self.ns.clear()  # the code may have reached the namespace through a function's
        self.ns.update(saved)  # __globals__: the course's names come back
        self._restore_modules(modules)
        return env, error, out

    def check(self, call: str, learner: str, value, test: str | None = None,
              limit: bool = True) -> tuple:
        """Return (right?, what the check said) for the course's check call on
        `value`; with `test`, code defining `held_out`, the check runs that test.
        `limit`: within cell_timeout (the course's own wrong answers need none)."""
        env = dict(self.ns)
        env[learner] = value
        if test is not None:
            call = f"{test}\n__verdict__ = check({learner}, test=held_out)"
        else:
            call = f"__verdict__ = {call}"
        saved = dict(self.ns)  # the test's own globals: the learner's code runs in it
        modules = self._course_modules()
        error, out = self.run(call, env, "<check>", limit=limit)
        self.ns.clear()
        self.ns.update(saved)
        self._restore_modules(modules)
        said = [line for line in out.splitlines() if line.startswith(SAID)]
        if error and error[0] == "CellTimeout":
            return False, "timed out"
        return bool(env.get("__verdict__")) and not error, (said[-1] if said else "")

    def exercise(self, job: dict) -> dict:
        """Return the verdict on one exercise: its entry, what the check said, and the
        learner cell's output."""
        number, call, learner = job["number"], job["call"], job["learner"]
        if job["source"] is None:
            return {"number": number, "entry": "cell deleted", "said": "", "output": ""}
        env, error, out = self.untouched(without_check_call(job["source"]),
                                         f"<exercise {number}>")
        found = {"number": number, "output": out, "said": ""}
        if error and error[0] == "CellTimeout":
            return {**found, "entry": "timed out"}
        value = env.get(learner, ...)
        ok, said = self.check(call, learner, value)
        found["said"] = said
        if said == "timed out":
            return {**found, "entry": "timed out"}
        if not ok:
            if error:
                return {**found, "entry": f"raised {error[0]}"}
            entry = "not answered" if said.startswith("not answered") else "not yet"
            return {**found, "entry": entry}
        for k, test in enumerate(job["held_out"], start=1):
            ok, said = self.check(call, learner, value, test=test)
            if not ok:
                return {**found, "entry": "not yet",
                        "said": f"a held-out case ({k}): {said}"}
        wrong = []
        for answer in job["wrong"]:
            answered, _, _ = self.untouched(answer, "<held-back wrong answer>")
            ok, said = self.check(call, learner, answered.get(learner, ...),
                                  limit=False)
            wrong.append(said)
            if ok or not said.startswith("not yet"):
                return {**found, "entry": "check changed", "wrong": wrong, "said": (
                    f"held-back wrong answer {len(wrong)} got {said[:60]!r}, not "
                    "'not yet': the learner's code changed the check")}
        return {**found, "entry": "right", "wrong": wrong,
                "said": f"right ({len(job['held_out'])} held-out cases; "
                        f"{len(wrong)} held-back wrong answers get 'not yet')"}


def main() -> None:
    """Read the job from stdin, run the cells, print one JSON line per exercise."""
    job = json.load(sys.stdin)
    report = os.fdopen(os.dup(1), "w", buffering=1)
    devnull = os.open(os.devnull, os.O_WRONLY)  # the cells' C-level output: away
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    hidden = {os.path.realpath(p) for p in job["hide"]}
    sys.path[:] = [job["folder"]] + [
        p for p in sys.path if p and os.path.realpath(p) not in hidden]
    sys.meta_path[:] = [f for f in sys.meta_path  # the course's editable install
                        if not type(f).__module__.startswith("__editable__")
                        and not getattr(f, "__module__", "").startswith("__editable__")]
    os.chdir(job["folder"])
    judge = Judge(job["cell_timeout"], job["folder"])
    for index, cell in enumerate(job["cells"]):
        if cell["kind"] == "course":
            judge.course(cell["source"], index)
        else:
            report.write(json.dumps(judge.exercise(cell)) + "\n")
    report.close()
    os._exit(0)  # no atexit hook a learner registered runs


if __name__ == "__main__":
    main()
