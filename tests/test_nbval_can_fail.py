"""Prove the notebook tests can fail: tamper a checked output, expect a mismatch.

The copy is notebook 01 cut just after a cell whose stored output nbval compares and
that prints the same on any machine: its source names no device, memory, clock or
randomness. Cells before it still run (they define what it uses), but their outputs
are not compared, so the test holds on a GPU machine too. If that cell still differs
here, the next such cell is tried.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

pytest.importorskip("nbformat", reason="no nbformat: this test tampers with a notebook")
pytest.importorskip("nbval", reason="no nbval: this test runs a notebook under nbval")
import nbformat
from conftest import NOTEBOOKS, SANITIZE

pytestmark = pytest.mark.tooling  # nbval's comparison, whatever torch computes
IGNORE_TAGS = {"nbval-ignore-output", "nbval-skip", "raises-exception"}
# Words in a cell's code (import lines aside) that make its output machine-dependent.
VOLATILE = re.compile(r"cuda|gpu|device|accelerator|mps|nvidia|smi|memory|time|bench|"
                      r"rand|seed|env_report|platform|getpid|environ|thread|cpu_count",
                      re.IGNORECASE)
TRIES = 3
BAD = {"FAILED", "ERROR"}


def _is_text(out: nbformat.NotebookNode) -> bool:
    return "text" in out or "text/plain" in out.get("data", {})


def _has_text(cell: nbformat.NotebookNode) -> bool:
    return any(map(_is_text, cell.outputs))


def _checked(cell: nbformat.NotebookNode) -> bool:
    """Is this a code cell whose stored text output strict nbval compares?"""
    return (cell.cell_type == "code" and _has_text(cell)
            and not IGNORE_TAGS & set(cell.metadata.get("tags", []))
            and not re.search(r"#\s*NBVAL_(IGNORE_OUTPUT|SKIP|RAISES)", cell.source))


def _portable(cell: nbformat.NotebookNode) -> bool:
    """Does the cell's code (import lines aside) name nothing machine-dependent?"""
    code = [line for line in cell.source.splitlines()
            if not re.match(r"\s*(import|from)\s", line)]
    return not VOLATILE.search("\n".join(code))


def candidates(nb: nbformat.NotebookNode) -> list[int]:
    """Return the indices of the checked, portable cells, first ones first."""
    return [i for i, cell in enumerate(nb.cells) if _checked(cell) and _portable(cell)]


def _cut(nb: nbformat.NotebookNode, index: int) -> nbformat.NotebookNode:
    """Return a copy of `nb` up to cell `index`, comparing that cell's output only."""
    cut = nbformat.from_dict(nb)  # a deep copy
    cut.cells = cut.cells[: index + 1]
    for cell in cut.cells[:-1]:
        if cell.cell_type == "code":
            tags = cell.metadata.setdefault("tags", [])
            if "nbval-ignore-output" not in tags:
                tags.append("nbval-ignore-output")
    return cut


def _tamper(out: nbformat.NotebookNode) -> None:
    if "text" in out:
        out["text"] = out["text"] + "tampered\n"
    else:
        out["data"]["text/plain"] = out["data"]["text/plain"] + " tampered"


def _nbval(*paths) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pytest", "-v", "--nbval", "--nbval-current-env",
           "--nbval-sanitize-with", str(SANITIZE), "-p", "no:cacheprovider",
           "--rootdir", str(paths[0].parent), *map(str, paths)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          cwd=paths[0].parent)


def outcomes(stdout: str, stem: str) -> list[str]:
    """Return each cell's outcome in `stem`.ipynb, from pytest -v's lines (nbval's
    cells show as "stem::ipynb::Cell 3 PASSED")."""
    line = rf"^{stem}(?:\.|::)ipynb::Cell \d+ (PASSED|FAILED|ERROR|SKIPPED)\b"
    return re.findall(line, stdout, re.M)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Notebook 01 cut after a portable checked output, as stored and tampered, in
    one nbval run; the first cut whose untampered copy passes here."""
    nb = nbformat.read(NOTEBOOKS[0], as_version=4)
    tmp = tmp_path_factory.mktemp("nbval")
    found = candidates(nb)
    assert found, f"{NOTEBOOKS[0].name} has no checked output that holds on any machine"
    reports = []
    for index in found[:TRIES]:
        cut = _cut(nb, index)
        tampered = nbformat.from_dict(cut)  # a deep copy
        _tamper(next(filter(_is_text, tampered.cells[-1].outputs)))
        nbformat.write(cut, tmp / "untampered.ipynb")
        nbformat.write(tampered, tmp / "tampered.ipynb")
        result = _nbval(tmp / "untampered.ipynb", tmp / "tampered.ipynb")
        said = outcomes(result.stdout, "untampered")
        if said and not BAD & set(said):
            return cut, result
        reports.append(f"cell {index}:\n{result.stdout[-1500:]}")
    pytest.fail("strict nbval failed on every untampered copy:\n" + "\n".join(reports))


def test_candidates_skip_ignored_and_machine_dependent_cells():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src, outputs=[
        nbformat.v4.new_output("stream", text="x\n")]) for src in (
        "print(torch.cuda.is_available())", "# NBVAL_IGNORE_OUTPUT\nprint(1)",
        "import os\nprint(2)", "print(3)")]
    nb.cells[3].metadata["tags"] = ["nbval-ignore-output"]
    assert candidates(nb) == [2]
    assert _cut(nb, 2).cells[0].metadata["tags"] == ["nbval-ignore-output"]


@pytest.mark.slow  # nbval in a child Python, with a kernel
def test_untampered_copy_passes(runs):
    nb, result = runs
    assert _checked(nb.cells[-1])  # what the tampered copy changes is compared
    code_cells = sum(cell.cell_type == "code" for cell in nb.cells)
    said = outcomes(result.stdout, "untampered")
    assert len(said) == code_cells and said[-1] == "PASSED", result.stdout[-3000:]


@pytest.mark.slow
def test_tampered_output_fails(runs):
    nb, result = runs
    code_cells = sum(cell.cell_type == "code" for cell in nb.cells)
    said = outcomes(result.stdout, "tampered")
    assert len(said) == code_cells and said[-1] == "FAILED", result.stdout[-3000:]
    assert not BAD & set(said[:-1]), result.stdout[-3000:]  # only the tampered one
    assert result.returncode == 1, result.stdout[-3000:]
    assert "tampered" in result.stdout and "1 failed" in result.stdout
