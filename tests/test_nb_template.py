"""Every notebook follows one template: a title cell (`# NN · Title`, the badge, a
summary, What you will learn, Prerequisites linking earlier notebooks, Hardware),
sections numbered `## N · `, then a fixed tail (Pitfalls, Summary, Exercises, Further
reading) and a last line `**Next:**` that links the next notebook; links resolve.
"""

from __future__ import annotations

import re

import pytest

pytest.importorskip("nbformat", reason="no nbformat: the notebook hygiene tests read "
                    "notebooks with it")
from conftest import NOTEBOOKS
from notebook_reading import IDS, markdown, read

from tools import notebook_conventions as conv

pytestmark = pytest.mark.tooling  # the notebook files only: no torch runs

TITLE = re.compile(r"^# (\d\d) · \S.*$")
NUMBERED = re.compile(r"^## (\d+) · \S")
TAIL = ["## Pitfalls", "## Summary", "## Exercises", "## Further reading"]
REQUIRED_TAIL = ["## Summary", "## Exercises", "## Further reading"]
NB_LINK = re.compile(r"\[([^\]]+)\]\(((\d\d)_[\w-]+\.ipynb)(#[^)]*)?\)")
NEXT = re.compile(r"^\*\*Next:\*\* \[(\d\d) · [^\]]+\]"
                  r"\(((\d\d)_[\w-]+\.ipynb)\): \S.*$")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_title_matches_file_name(path):
    first = read(path).cells[0]
    assert first.cell_type == "markdown"
    number = path.name[:2]
    assert first.source.startswith(f"# {number} · "), (
        f"the H1 must start with '# {number} · '")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_title_cell_follows_the_template(path):
    """Cell 0: H1, blank, badge, blank, summary, learn, prerequisites, hardware."""
    source = read(path).cells[0].source
    lines = source.split("\n")
    where = f"{path.name} cell 0"
    assert TITLE.match(lines[0]), (
        f"{where}: line 1 must be '# NN · Title': {lines[0]!r}")
    layout = lines[:5] + [""] * (5 - len(lines[:5]))
    assert layout[1] == "" and layout[3] == "", (
        f"{where}: the badge must sit alone between blank lines (run `make badges`): "
        f"{layout[1:4]!r}")
    assert conv.BADGE_RE.fullmatch(layout[2]), (
        f"{where}: line 3 must be the Colab badge alone: {layout[2]!r}")
    assert layout[4].strip() and not layout[4].startswith(("**", "-", "#")), (
        f"{where}: line 5 must start the one/two-line summary: {layout[4]!r}")
    order = []
    for key in ("**What you will learn**", "**Prerequisites**: ", "**Hardware**: "):
        found = [n for n, line in enumerate(lines) if line.startswith(key)]
        assert len(found) == 1, f"{where}: need exactly one line starting {key!r}"
        order.append(found[0])
    assert order == sorted(order), (
        f"{where}: put What you will learn, Prerequisites, Hardware in that order")
    learn = order[0]
    assert lines[learn] == "**What you will learn**" and learn + 1 < len(lines) \
        and lines[learn + 1].startswith("- "), (
        f"{where}: '**What you will learn**' alone on its line, then '- ' bullets")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_prerequisites_link_earlier_notebooks(path):
    line = next((ln for ln in read(path).cells[0].source.split("\n")
                 if ln.startswith("**Prerequisites**")), "")
    links = NB_LINK.findall(line)
    if path == NOTEBOOKS[0]:
        assert not links, (
            f"{path.name}: the first notebook's Prerequisites is plain text")
        return
    assert links, (f"{path.name} cell 0: Prerequisites must link the notebook(s) "
                   f"before it as [NN · Title](NN_file.ipynb): {line!r}")
    for text, target, number, _ in links:
        assert (path.parent / target).is_file(), (
            f"{path.name} cell 0: Prerequisites links {target}, which does not exist")
        assert text.startswith(f"{number} · "), (
            f"{path.name} cell 0: link text {text!r} must start with '{number} · '")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_sections_are_numbered_then_the_fixed_tail(path):
    """`## 1 · `, `## 2 · `, ... then Pitfalls, Summary, Exercises, Further reading."""
    headings = [(i, line) for i, src in markdown(read(path))
                for line in src.split("\n") if line.startswith("## ")]
    problems, numbered, tail = [], [], []
    for i, line in headings:
        match = NUMBERED.match(line)
        if match:
            numbered.append(int(match.group(1)))
            if tail:
                problems.append(
                    f"cell {i}: numbered section after {tail[-1]!r}: {line!r}")
        elif line.rstrip() in TAIL:
            tail.append(line.rstrip())
        else:
            problems.append(f"cell {i}: use '## N · Title' or one of {TAIL}: {line!r}")
    if numbered != list(range(1, len(numbered) + 1)):
        problems.append(f"sections must be numbered 1, 2, 3, ...: got {numbered}")
    if tail != [t for t in TAIL if t in tail]:
        problems.append(f"the tail must read {TAIL} in that order (at most once each): "
                        f"got {tail}")
    missing = [t for t in REQUIRED_TAIL if t not in tail]
    if missing:
        problems.append(f"missing {missing}")
    assert not problems, f"{path.name}:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_next_link_ends_the_notebook(path):
    """The last markdown line links the next notebook; the last notebook has none."""
    md = markdown(read(path))
    nexts = [(i, ln) for i, src in md for ln in src.split("\n")
             if ln.lstrip("- ").startswith(("**Next:**", "Next:", "**Next**"))]
    position = NOTEBOOKS.index(path)
    if position == len(NOTEBOOKS) - 1:
        assert not nexts, f"{path.name} is the last notebook: no Next line: {nexts}"
        return
    i, last = md[-1][0], md[-1][1].rstrip().split("\n")[-1]
    match = NEXT.match(last)
    assert match, (f"{path.name} cell {i}: the last markdown line must be "
                   f"'**Next:** [NN · Title](NN_file.ipynb): what it does.': {last!r}")
    assert len(nexts) == 1, f"{path.name}: exactly one Next line, got {nexts}"
    number, target, target_number = match.groups()
    expected = NOTEBOOKS[position + 1].name
    assert target == expected, (
        f"{path.name} cell {i}: Next links {target}; the next notebook is {expected}")
    assert number == target_number, (
        f"{path.name} cell {i}: link text says {number}, target is {target}")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_links_between_notebooks_resolve(path):
    broken = [(i, target) for i, src in markdown(read(path))
              for _, target, _, _ in NB_LINK.findall(src)
              if not (path.parent / target).is_file()]
    assert not broken, (
        f"{path.name}: links to missing notebooks (cell, target): {broken}")
