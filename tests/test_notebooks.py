"""Hygiene of every notebook: structure, outputs, size and Colab conventions."""

from __future__ import annotations

import getpass
import re
import socket
from pathlib import Path

import nbformat
import pytest
from conftest import NOTEBOOKS

from tools import notebook_conventions as conv

MAX_BYTES = 300_000
SECTIONS = [r"\*\*What you will learn\*\*", r"\*\*Prerequisites\*\*",
            r"\*\*Hardware\*\*", r"^## Summary", r"^## Exercises"]
LEAKS = [r"/root\b", r"/home/", r"/Users/", r"/work/", r"/tmp/", r"\.venv",
         r"site-packages", r"[A-Za-z]:\\\\"]

ids = [p.stem for p in NOTEBOOKS]


def _read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def _output_text(out: nbformat.NotebookNode) -> str:
    """Return every textual part of one output, tracebacks included."""
    parts = [out.get("text", ""), out.get("evalue", ""), *out.get("traceback", [])]
    for key, value in out.get("data", {}).items():
        if key.startswith("text/") or key == "application/json":
            parts.append(value if isinstance(value, str) else str(value))
    return "\n".join(parts)


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found under notebooks/"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_valid_nbformat_with_cell_ids(path):
    nb = _read(path)
    nbformat.validate(nb)
    assert all(cell.get("id") for cell in nb.cells), "every cell needs an id"
    assert nb.metadata["kernelspec"]["name"] == "python3"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_title_matches_file_name(path):
    first = _read(path).cells[0]
    assert first.cell_type == "markdown"
    number = path.name[:2]
    assert first.source.startswith(f"# {number} · "), (
        f"the H1 must start with '# {number} · '")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_has_style_sections(path):
    text = "\n".join(c.source for c in _read(path).cells if c.cell_type == "markdown")
    missing = [s for s in SECTIONS if not re.search(s, text, re.MULTILINE)]
    assert not missing, f"missing STYLE.md sections: {missing}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_execution_counts_are_sequential(path):
    counts = [c.execution_count for c in _read(path).cells if c.cell_type == "code"]
    assert counts == list(range(1, len(counts) + 1)), (
        "run `make outputs` so every code cell is executed once, in order")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_errors_only_where_tagged(path):
    for i, cell in enumerate(_read(path).cells):
        if cell.cell_type != "code":
            continue
        tagged = "raises-exception" in cell.metadata.get("tags", [])
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert bool(errors) == tagged, (
            f"cell {i}: {'untagged error' if errors else 'tagged but raised nothing'}")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_no_machine_specific_leaks(path):
    secrets = [re.escape(getpass.getuser()), re.escape(socket.gethostname())]
    patterns = LEAKS + [rf"\b{s}\b" for s in secrets if len(s) > 3 and s != "root"]
    for i, cell in enumerate(_read(path).cells):
        for out in cell.get("outputs", []):
            text = _output_text(out)
            for pat in patterns:
                assert not re.search(pat, text), f"cell {i} output leaks {pat!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_size_is_small(path):
    assert path.stat().st_size < MAX_BYTES


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_colab_badge_points_at_this_notebook(path):
    title = _read(path).cells[0].source
    assert conv.badge(path) in title, "run `make badges` to fix the Colab badge"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_colab_setup_cell_is_first_and_current(path):
    nb = _read(path)
    first_code = next(c for c in nb.cells if c.cell_type == "code")
    assert conv.COLAB_TAG in first_code.metadata.get("tags", [])
    assert first_code.source == conv.colab_cell_source()
    assert first_code.outputs == [], "the Colab cell must be silent off Colab"
    assert nb.metadata.get("accelerator") == "GPU"


def test_badges_use_the_one_repository_url():
    url = conv.repo_url()
    assert url.startswith("https://github.com/") and url.count("/") == 4
