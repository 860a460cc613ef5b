"""Each notebook opens on Colab from its own badge, with a silent, collapsed setup
cell, all written from one repository URL by tools.notebook_conventions."""

from __future__ import annotations

import pytest

pytest.importorskip("nbformat", reason="no nbformat: the notebook hygiene tests read "
                    "notebooks with it")
from conftest import NOTEBOOKS
from notebook_reading import IDS, read, tags

from tools import notebook_conventions as conv

pytestmark = pytest.mark.tooling  # the notebook files only: no torch runs


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_colab_badge_points_at_this_notebook(path):
    title = read(path).cells[0].source
    assert conv.badge(path) in title, "run `make badges` to fix the Colab badge"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_colab_setup_cell_is_first_and_current(path):
    nb = read(path)
    first_code = next(c for c in nb.cells if c.cell_type == "code")
    assert conv.COLAB_TAG in tags(first_code)
    assert first_code.source == conv.colab_cell_source()
    assert first_code.metadata.get("cellView") == "form", "collapse it: make badges"
    assert first_code.metadata.get("jupyter", {}).get("source_hidden") is True
    assert first_code.outputs == [], "the Colab cell must be silent off Colab"
    assert nb.metadata.get("accelerator") == "GPU"


def test_badges_use_the_one_repository_url():
    url = conv.repo_url()
    assert url.startswith("https://github.com/") and url.count("/") == 4, url


def test_repository_url_reads_the_same_without_tomllib():
    """Python 3.10 has no tomllib: the regex fallback must agree with it."""
    text = (conv.ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert conv._repo_url_by_regex(text).rstrip("/") == conv.repo_url()
    with pytest.raises(ValueError, match="Repository"):
        conv._repo_url_by_regex("[project]\nname = 'x'\n")


@pytest.mark.parametrize("source", [
    "# 06 · T\n\n[![Open In Colab](a)](b)\nSummary.\n\n**What you will learn**",
    "# 06 · T\n\n[![Open In Colab](old)](old)\n\nSummary.\n\n**What you will learn**",
    "# 06 · T\nSummary.\n\n**What you will learn**",
])
def test_sync_lays_out_the_title_cell_as_the_template(source):
    badge = "[![Open In Colab](img)](target)"
    fixed = conv.title_cell_source(source, badge)
    assert fixed == f"# 06 · T\n\n{badge}\n\nSummary.\n\n**What you will learn**"
    assert conv.title_cell_source(fixed, badge) == fixed  # a second sync: no change
