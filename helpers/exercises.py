"""Check a learner's exercise answers: right, not yet, or not answered yet.
Each docstring ends with the notebooks that use it."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from typing import Any

__all__ = ["check", "digest"]

_UNSET = object()


class Result:
    """The outcome of a check: true when right, and silent as a cell's last value."""

    def __init__(self, ok: bool) -> None:
        self.ok = ok

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:
        return f"Result(ok={self.ok})"

    def _ipython_display_(self) -> None:
        """Show nothing: check() has already printed its message."""


SOLUTION_RIGHT = "right: that is the hidden solution's answer; yours is checked above"


def _canonical(value: Any) -> Any:
    """Return `value` in one form: 7.0, np.int64(7), tensor(7) as 7; lists as tuples."""
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        value = value.item()  # a numpy scalar or a 0-d tensor
    if isinstance(value, bool) or value is None or isinstance(value, (str, bytes)):
        return value
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        return int(value)
    if isinstance(value, dict):
        return tuple(sorted((_canonical(k), _canonical(v)) for k, v in value.items()))
    if isinstance(value, (set, frozenset)):
        return tuple(sorted(_canonical(v) for v in value))
    if isinstance(value, (list, tuple)):  # torch.Size is a tuple too
        return tuple(_canonical(v) for v in value)
    return value


def digest(value: Any) -> str:
    """Return a fingerprint of `value` (01, 03, 06, 08-12, 14-18)."""
    return hashlib.sha256(repr(_canonical(value)).encode()).hexdigest()[:12]


def check(answer: Any, expected: Any = _UNSET, *,
          test: Callable[[Any], Any] | None = None, hashed: str | None = None,
          rel_tol: float = 0.0, abs_tol: float = 0.0, hint: str = "",
          solution: bool = False) -> Result:
    """Print whether `answer` is right, not yet right, or not answered (01-18).

    `test(answer)` raises AssertionError, with a helpful message, when it is wrong;
    NotImplementedError from it means the learner has not written the code yet.
    `hashed` is `digest(expected)`, for an answer the notebook must not show.
    `solution=True` in a hidden solution's cell says whose answer was right.
    """
    if answer is ... or answer is None:  # still the placeholder
        print("not answered yet: replace the `...` with your answer, then rerun")
        return Result(False)
    try:
        if test is not None:
            test(answer)  # raises AssertionError with a helpful message when wrong
        elif hashed is not None:
            assert digest(answer) == hashed, f"{answer!r} is not it" + (
                "" if hint else ": reread the exercise's question")
        elif isinstance(expected, (int, float)) and isinstance(answer, (int, float)):
            assert math.isclose(answer, expected, rel_tol=rel_tol, abs_tol=abs_tol), (
                f"got {answer!r}")
        else:
            assert answer == expected, f"got {answer!r}"
    except NotImplementedError:
        print("not answered yet: fill in the function, then rerun this cell")
        return Result(False)
    except AssertionError as err:
        print(f"not yet: {err}" + (f". Hint: {hint}" if hint else ""))
        return Result(False)
    except Exception as err:  # the learner's code raised: say so in one line
        print(f"not yet: your answer raised {type(err).__name__}: {err}"
              + (f". Hint: {hint}" if hint else ""))
        return Result(False)
    print(SOLUTION_RIGHT if solution else "right")
    return Result(True)
