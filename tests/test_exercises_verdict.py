"""check() grades exercise answers; verdict() words a measurement from its bands."""

from __future__ import annotations

import math

import pytest

from helpers import check, verdict

BANDS = [(0.9, "slower"), (1.1, "about the same"), (math.inf, "faster")]


def test_check_says_not_answered_yet(capsys):
    assert not check(...)

    def todo():
        raise NotImplementedError("your code here")

    assert not check(todo, test=lambda fn: fn())
    out = capsys.readouterr().out.splitlines()
    assert out == ["not answered yet: replace the `...` with your answer, then rerun",
                   "not answered yet: fill in the function, then rerun this cell"]


def test_check_grades_values_with_tolerance(capsys):
    assert check(3.0, 3.1, rel_tol=0.05)
    assert not check(3.0, 4.0, rel_tol=0.05, hint="count again")
    assert check("cuda:0", "cuda:0")
    out = capsys.readouterr().out.splitlines()
    assert out == ["right", "not yet: got 3.0. Hint: count again", "right"]


def test_check_passes_a_test_functions_message(capsys):
    def positive(x):
        if x <= 0:  # a plain raise: pytest rewrites bare asserts' messages
            raise AssertionError(f"{x} is not positive")

    assert not check(-2, test=positive)
    assert capsys.readouterr().out.strip() == "not yet: -2 is not positive"


def test_check_result_is_silent_in_a_notebook():
    result = check(1, 1)
    assert repr(result) == "Result(ok=True)"
    assert result._ipython_display_() is None  # IPython shows nothing for it


@pytest.mark.parametrize("value, words, where", [
    (0.5, "slower", "below 0.9x"),
    (1.0, "about the same", "between 0.9x and 1.1x"),
    (1.7, "faster", "1.1x or more"),
])
def test_verdict_picks_the_band(value, words, where):
    assert verdict(value, BANDS) == f"{value:.2f}x: {words} ({where})"


def test_verdict_flags_results_above_the_ideal():
    text = verdict(2.3, BANDS, ideal=2)
    assert "above the ideal 2x" in text and "noise or contention" in text
    assert "above the ideal" not in verdict(1.9, BANDS, ideal=2)


def test_verdict_rejects_bad_bands():
    with pytest.raises(ValueError, match="increasing order"):
        verdict(1.0, [(2, "b"), (1, "a")])
    with pytest.raises(ValueError, match="above every band"):
        verdict(5.0, [(1, "a"), (2, "b")])


def test_check_says_not_yet_when_the_answer_raises(capsys):
    def broken(fn):
        fn()

    assert not check(lambda: 1 / 0, test=broken)
    assert capsys.readouterr().out.strip() == (
        "not yet: your answer raised ZeroDivisionError: division by zero")


def test_check_compares_a_hashed_answer_without_showing_it(capsys):
    from helpers.exercises import digest

    assert check(27, hashed=digest(27))
    assert not check(26, hashed=digest(27))
    out = capsys.readouterr().out.splitlines()
    assert out == ["right", "not yet: 26 is not it: reread the exercise's question"]
    assert "27" not in digest(27)


def test_a_hashed_answer_is_right_in_any_plain_type(capsys):
    import numpy as np
    import torch

    from helpers.exercises import digest

    for same in (728128.0, np.int64(728128), torch.tensor(728128), np.float32(728128)):
        assert check(same, hashed=digest(728128)), f"{same!r} of {type(same)} rejected"
    assert check([3, 4.0], hashed=digest((3, 4)))
    assert check({2: [1, 5]}, hashed=digest({2: (1.0, 5)}))
    for other in (728128.5, 728129, (728128,), "728128", True):
        assert not check(other, hashed=digest(728128)), f"{other!r} accepted"
    assert digest(True) != digest(1), "a bool must not pass for the int it equals"
    capsys.readouterr()


def test_a_solution_says_whose_answer_was_right(capsys):
    from helpers.exercises import SOLUTION_RIGHT

    assert check(27, 27, solution=True)
    assert capsys.readouterr().out.strip() == SOLUTION_RIGHT
    assert not check(26, 27, solution=True)
    assert capsys.readouterr().out.startswith("not yet")


def test_verdict_says_too_noisy_when_the_spread_crosses_an_edge():
    text = verdict(1.2, BANDS, spread=(0.8, 1.5))
    assert "too noisy to tell here" in text and "0.80x to 1.50x" in text
    for words in ("slower", "about the same", "faster"):
        assert words not in text
    assert verdict(1.5, BANDS, spread=(1.3, 1.9)) == verdict(1.5, BANDS)
