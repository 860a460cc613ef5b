"""Prove the notebook tests can fail: tamper a checked output, expect a mismatch."""

from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest
from conftest import NOTEBOOKS, SANITIZE

IGNORE = "NBVAL_IGNORE_OUTPUT"


def _first_checked_cell(nb: nbformat.NotebookNode) -> int:
    """Return the index of the first code cell whose text output nbval compares."""
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and IGNORE not in cell.source and any(
            "text" in o or "text/plain" in o.get("data", {}) for o in cell.outputs
        ):
            return i
    raise LookupError("no checked output in this notebook")


def _tamper(out: nbformat.NotebookNode) -> None:
    if "text" in out:
        out["text"] = out["text"] + "tampered\n"
    else:
        out["data"]["text/plain"] = out["data"]["text/plain"] + " tampered"


def _nbval(path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pytest", "--nbval", "--nbval-current-env",
           "--nbval-sanitize-with", str(SANITIZE), "-p", "no:cacheprovider",
           "--rootdir", str(path.parent), str(path)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          cwd=path.parent)


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    """A real notebook cut just after its first checked output, as it is stored."""
    nb = nbformat.read(NOTEBOOKS[0], as_version=4)
    nb.cells = nb.cells[: _first_checked_cell(nb) + 1]
    return nb, tmp_path_factory.mktemp("nbval")


def test_untampered_copy_passes(prefix):
    nb, tmp = prefix
    path = tmp / "untampered.ipynb"
    nbformat.write(nb, path)
    result = _nbval(path)
    assert result.returncode == 0, result.stdout[-3000:]


def test_tampered_output_fails(prefix):
    nb, tmp = prefix
    nb = nbformat.from_dict(nb)  # a deep copy
    cell = nb.cells[-1]
    _tamper(next(o for o in cell.outputs if "text" in o or "data" in o))
    path = tmp / "tampered.ipynb"
    nbformat.write(nb, path)
    result = _nbval(path)
    assert result.returncode == 1, result.stdout[-3000:]
    assert "tampered" in result.stdout and "1 failed" in result.stdout
