"""The README's notebook table stays in step with the notebooks themselves."""

from __future__ import annotations

import re

import pytest
from conftest import NOTEBOOK_DIR, NOTEBOOKS, ROOT

pytest.importorskip("nbformat", reason="no nbformat: the README's minutes are counted "
                    "from the notebooks with it")
from tools.learner_time import learner_minutes

pytestmark = pytest.mark.tooling  # the README and notebook files only: no torch
ROW = re.compile(  # number, file, CPU seconds (measured), learner minutes (estimated)
    r"^\| (\d\d) \| \[[^\]]+\]\(notebooks/([^)]+\.ipynb)\) \|.*"
    r"\| (\d+) s \| (\d+) min \|$")
MAX_MINUTES = 35  # a notebook is one sitting of about 30 minutes; estimates round to 5


def table_rows(text: str) -> list[tuple[str, str, int]]:
    """Return (number, file name, learner minutes) for each notebook row."""
    return [(m[1], m[2], int(m[4])) for line in text.splitlines()
            if (m := ROW.match(line))]


README = (ROOT / "README.md").read_text(encoding="utf-8")
ROWS = table_rows(README)


def test_the_table_lists_every_notebook_once_in_order_with_the_report_last():
    assert [name for _, name, _ in ROWS] == [p.name for p in NOTEBOOKS]
    assert all(name.startswith(f"{number}_") for number, name, _ in ROWS), ROWS
    assert "benchmark_report" in ROWS[-1][1], f"last row is {ROWS[-1][1]}"


@pytest.mark.parametrize("number, name, minutes", ROWS, ids=[r[1] for r in ROWS])
def test_learner_time_in_the_table_is_the_stated_estimate(number, name, minutes):
    estimate = learner_minutes(NOTEBOOK_DIR / name)
    assert minutes == estimate, (
        f"README says {minutes} min for {name}; the estimate is {estimate} min "
        "(python -m tools.learner_time)")
    assert estimate <= MAX_MINUTES, (
        f"{name} needs about {estimate} min, more than one sitting ({MAX_MINUTES} min)")


SAID_S = re.compile(r"Runs anywhere in (?:< ?(\d+) s|about (\d+) s|(under a minute))")


def test_a_notebooks_own_cpu_time_agrees_with_the_readmes():
    """A notebook's Hardware line says how long it runs on a CPU: a bound ("< 40 s",
    "under a minute") at or above the README's measured time, or "about" within a
    third of it. Each line names the number that a learner reads first."""
    rows = {m[2]: int(m[3]) for line in README.splitlines() if (m := ROW.match(line))}
    wrong, said = [], 0
    for path in NOTEBOOKS:
        found = SAID_S.search(path.read_text(encoding="utf-8"))
        if found is None:
            continue
        said += 1
        below, about, minute = found.groups()
        measured = rows[path.name]
        bound = int(below) if below else 60 if minute else None
        if bound is not None and measured > bound:
            wrong.append(f"{path.name}: says {found[0]!r}, measured {measured} s")
        if about and abs(int(about) - measured) > measured / 3:
            wrong.append(f"{path.name}: says about {about} s, measured {measured} s")
    assert said >= 10, f"only {said} notebooks state their CPU time"
    assert not wrong, wrong


def test_table_rows_parse_and_a_wrong_row_does_not():
    good = "| 01 | [A](notebooks/01_a.ipynb) | t | c | g | m | 4 s | 30 min |"
    assert table_rows(good) == [("01", "01_a.ipynb", 30)]
    assert table_rows(good.replace("30 min", "thirty")) == []


def test_the_size_knobs_the_readme_names_are_the_ones_the_notebooks_read():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    said = re.search(r"size knob \(`(\w+)`, or `(\w+)` in (\d\d)\)", text)
    assert said, "the README no longer names the notebooks' size knobs"
    common, odd, number = said.groups()
    for path in NOTEBOOKS:
        source = path.read_text(encoding="utf-8")
        reads = {k for k in (common, odd) if f'environ.get(\\"{k}\\"' in source}
        expected = {odd} if path.name.startswith(number) else {common}
        assert not reads or reads == expected, (
            f"{path.name} reads {sorted(reads)}; the README says {sorted(expected)}")
    assert any(path.name.startswith(number) and f'\\"{odd}\\"' in path.read_text()
               for path in NOTEBOOKS), f"no notebook {number} reads {odd}"
