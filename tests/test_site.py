"""`make html` exports stored outputs to an offline site with an ordered index."""

from __future__ import annotations

import re

import nbformat
import pytest
from conftest import NOTEBOOKS
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from tools import build_site

REMOTE_SCRIPT = re.compile(r"<script[^>]*\ssrc=[\"']?(https?:)?//", re.IGNORECASE)
REMOTE_CSS = re.compile(r"<link[^>]*\shref=[\"']?(https?:)?//|@import\s+url\(\s*[\"']?"
                        r"(https?:)?//", re.IGNORECASE)
LINK = re.compile(r'<li><a href="([^"]+)">([^<]+)</a>')


def _fixture(path, number: str, title: str) -> None:
    """Write a tiny executed notebook whose one output could never be re-made."""
    nb = new_notebook(cells=[
        new_markdown_cell(f"# {number} · {title}\n\n[![Open In Colab](b.svg)](c)\n"
                          f"Summary of {number}.\n\n**What you will learn**\n- x"),
        new_code_cell("raise SystemExit('a re-run would fail here')",
                      execution_count=1,
                      outputs=[new_output("stream", name="stdout",
                                          text=f"stored-{number}\n")]),
    ])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, path)


@pytest.fixture
def fixture_site(tmp_path):
    src = tmp_path / "nb"
    src.mkdir()
    for number, title in [("02", "Beta & <more>"), ("01", "Alpha"), ("10", "Gamma")]:
        _fixture(src / f"{number}_x.ipynb", number, title)
    written = build_site.build_site(list(src.glob("*.ipynb")), tmp_path / "site")
    return tmp_path / "site", written


def test_index_lists_notebooks_in_order_with_titles(fixture_site):
    site, written = fixture_site
    index = (site / "index.html").read_text()
    assert written[0] == site / "index.html" and len(written) == 4
    assert LINK.findall(index) == [("01_x.html", "01 · Alpha"),
                                   ("02_x.html", "02 · Beta &amp; &lt;more&gt;"),
                                   ("10_x.html", "10 · Gamma")]
    assert "Summary of 02." in index and build_site.COURSE_TITLE in index


def test_pages_hold_stored_outputs_title_and_navigation(fixture_site):
    site, _ = fixture_site
    page = (site / "02_x.html").read_text()
    assert "<title>02 · Beta &amp; &lt;more&gt;</title>" in page
    assert "stored-02" in page and "a re-run would fail here" in page
    assert page.count('href="index.html"') == 2  # top and bottom navigation
    assert 'href="01_x.html"' in page and 'href="10_x.html"' in page


@pytest.mark.parametrize("name", ["01_x.html", "02_x.html", "10_x.html", "index.html"])
def test_pages_need_no_network(fixture_site, name):
    page = (fixture_site[0] / name).read_text()
    assert not REMOTE_SCRIPT.search(page), "a page loads a script from the network"
    assert not REMOTE_CSS.search(page), "a page loads a stylesheet from the network"
    if name != "index.html":
        assert "jp-Notebook" in page and "<style" in page  # the lab CSS is inlined


def test_title_and_summary_parsing():
    nb = new_notebook(cells=[new_markdown_cell(
        "# 03 · Moving data\n\n[![Open In Colab](a)](b)\nCopy `x` <fast>,\n"
        "over two lines.\n\n**What you will learn**\n")])
    assert build_site.notebook_title(nb) == "03 · Moving data"
    assert build_site.notebook_summary(nb) == "Copy `x` <fast>, over two lines."
    assert build_site._inline("a `b<c>` d") == "a <code>b&lt;c&gt;</code> d"
    with pytest.raises(ValueError):
        build_site.notebook_title(new_notebook(cells=[new_markdown_cell("no title")]))


def test_main_fails_clearly_without_notebooks(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(build_site, "NOTEBOOKS", tmp_path)
    assert build_site.main(["--out", str(tmp_path / "site")]) == 1
    assert "no notebooks" in capsys.readouterr().err


@pytest.mark.skipif(not NOTEBOOKS, reason="no course notebooks yet")
def test_real_course_exports(tmp_path):
    build_site.main(["--out", str(tmp_path), *map(str, NOTEBOOKS)])
    links = LINK.findall((tmp_path / "index.html").read_text())
    assert [href for href, _ in links] == [f"{p.stem}.html" for p in NOTEBOOKS]
    for path, (href, title) in zip(NOTEBOOKS, links, strict=True):
        assert title.startswith(f"{path.name[:2]} · ")
        page = (tmp_path / href).read_text()
        assert "<h1" in page and not REMOTE_SCRIPT.search(page)
