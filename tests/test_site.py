"""`make html` exports stored outputs to an offline site with an ordered index.

The site fetches nothing: every <img src>, <script src>, <link href> (and CSS url())
is a local file or a data: URI. Every link resolves: to a file in site/ (and, with a
#fragment, to an id in it), or is an http(s) link kept on purpose (Colab, further
reading), which a reader follows by choice and the page never fetches.
"""

from __future__ import annotations

import base64
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import nbformat
import pytest
from conftest import NOTEBOOKS
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from tools import build_site

LINK = re.compile(r'<li><a href="([^"]+)">([^<]+)</a>')
CSS_URL = re.compile(r"url\(\s*[\"']?([^\"')\s]+)|@import\s+[\"']([^\"']+)", re.I)
EXTERNAL = re.compile(r"^https?://")
DEFAULT_ALT = "No description has been provided for this image"
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n fake").decode()


class _Page(HTMLParser):
    """Collect what a page links (a href), what it loads, its ids and its images."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.loads: list[tuple[str, str]] = []  # (tag, url) fetched when shown
        self.ids: set[str] = set()
        self.images: list[dict[str, str | None]] = []
        self._style = False
        self.css: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("name"):
            self.ids.add(a["name"])
        if tag in ("a", "area") and a.get("href") is not None:
            self.links.append(a["href"])
        if tag == "link" and a.get("href") is not None:
            self.loads.append((tag, a["href"]))
        for attr in ("src", "srcset", "data", "poster"):
            if a.get(attr) is not None and tag != "a":
                self.loads.append((tag, a[attr]))
        if tag == "img":
            self.images.append(a)
        if a.get("style"):
            self.css.append(a["style"])
        self._style = tag == "style"

    def handle_endtag(self, tag):
        self._style = False

    def handle_data(self, data):
        if self._style:
            self.css.append(data)


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def site_problems(site: Path) -> list[str]:
    """Return every network fetch, broken link and missing alt text in `site`."""
    pages = {p.relative_to(site).as_posix(): _parse(p) for p in site.rglob("*.html")}
    problems = []
    for name, page in sorted(pages.items()):
        loads = page.loads + [("css", m[0] or m[1]) for css in page.css
                              for m in CSS_URL.findall(css)]
        for tag, url in loads:
            local = not re.match(r"^[a-z][a-z0-9+.-]*:|^//", url, re.I) \
                and (site / name).parent.joinpath(url.split("#")[0]).is_file()
            if not (url.startswith("data:") or local or url.startswith("#")):
                problems.append(f"{name}: <{tag}> loads {url[:80]!r}")
        for href in page.links:
            if EXTERNAL.match(href) or href.startswith("mailto:"):
                continue  # kept on purpose: followed by the reader, never fetched
            target, _, fragment = href.partition("#")
            target, fragment = unquote(target), unquote(fragment)
            if re.match(r"^[a-z][a-z0-9+.-]*:|^//", target, re.I):
                problems.append(f"{name}: link {href!r} is neither local nor http(s)")
                continue
            rel = (Path(name).parent / target).as_posix() if target else name
            rel = Path(rel).as_posix()
            if not (site / rel).is_file():
                problems.append(f"{name}: link {href!r}: no {rel} in the site")
            elif fragment and rel in pages \
                    and fragment not in {unquote(i) for i in pages[rel].ids}:
                problems.append(f"{name}: link {href!r}: no id {fragment!r} in {rel}")
        for img in page.images:
            alt = (img.get("alt") or "").strip()
            if not alt or alt == DEFAULT_ALT:
                problems.append(f"{name}: <img> without a real alt text: {alt!r}")
    return problems


def _fixture(path, number: str, title: str, nxt: str = "") -> None:
    """Write a tiny executed notebook whose outputs could never be re-made."""
    nb = new_notebook(cells=[
        new_markdown_cell(f"# {number} · {title}\n\n[![Open In Colab](https://colab."
                          f"research.google.com/assets/colab-badge.svg)](https://colab."
                          f"research.google.com/github/o/r/blob/main/{path.name})\n\n"
                          f"Summary of {number}.\n\n**What you will learn**\n- x"),
        new_code_cell("raise SystemExit('a re-run would fail here')",
                      execution_count=1,
                      outputs=[new_output("stream", name="stdout",
                                          text=f"stored-{number}\n")]),
        new_code_cell('fig = bar_chart(["a"], [1.0], title=f"Speed on {device}")',
                      execution_count=2,
                      outputs=[new_output("display_data", data={"image/png": PNG})]),
        new_markdown_cell("## 1 · Part\n\nSee [the script](scripts/s.py) and "
                          "[docs](https://pytorch.org/docs)."
                          + (f"\n\n**Next:** [next]({nxt}): on." if nxt else "")),
    ])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, path)


@pytest.fixture
def fixture_site(tmp_path):
    src = tmp_path / "nb"
    (src / "scripts").mkdir(parents=True)
    (src / "scripts" / "s.py").write_text("print('hi')\n")
    _fixture(src / "02_x.ipynb", "02", "Beta & <more>", "10_x.ipynb#1-·-Part")
    _fixture(src / "01_x.ipynb", "01", "Alpha", "02_x.ipynb")
    nb = nbformat.read(src / "01_x.ipynb", as_version=4)
    report = new_output("stream", name="stdout", text="python 3.x\nCPU: 2 cores\n")
    nb.cells.append(new_code_cell("print(env_report())", execution_count=3,
                                  outputs=[report]))
    nbformat.write(nb, src / "01_x.ipynb")
    _fixture(src / "10_x.ipynb", "10", "Gamma")
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


def test_index_says_how_to_run_and_where_outputs_were_made(fixture_site):
    index = (fixture_site[0] / "index.html").read_text()
    assert "make lab" in index and "Colab" in index
    assert "python 3.x\nCPU: 2 cores" in index  # 01's env_report() output


def test_machine_can_be_given(tmp_path):
    _fixture(tmp_path / "01_x.ipynb", "01", "Alpha")
    build_site.build_site([tmp_path / "01_x.ipynb"], tmp_path / "site",
                          machine="H200 & friends")
    index = (tmp_path / "site" / "index.html").read_text()
    assert "H200 &amp; friends" in index and "env_report" not in index
    build_site.build_site([tmp_path / "01_x.ipynb"], tmp_path / "site2")
    assert "not recorded" in (tmp_path / "site2" / "index.html").read_text()


def test_pages_hold_stored_outputs_title_and_navigation(fixture_site):
    site, _ = fixture_site
    page = (site / "02_x.html").read_text()
    assert "<title>02 · Beta &amp; &lt;more&gt;</title>" in page
    assert "stored-02" in page and "a re-run would fail here" in page
    assert page.count('href="index.html"') == 2  # top and bottom navigation
    assert 'href="01_x.html"' in page and 'href="10_x.html"' in page


def test_links_to_notebooks_become_pages_and_linked_files_are_copied(fixture_site):
    site, _ = fixture_site
    page = _parse(site / "02_x.html")
    assert "10_x.html#1-·-Part" in map(unquote, page.links)
    assert not [h for h in page.links if ".ipynb" in h and not EXTERNAL.match(h)]
    assert (site / "scripts" / "s.py").read_text() == "print('hi')\n"
    assert "https://pytorch.org/docs" in page.links  # external links are kept


def test_badge_is_a_plain_link_and_plots_have_alt_text(fixture_site):
    site, _ = fixture_site
    page = _parse(site / "01_x.html")
    assert "https://colab.research.google.com/github/o/r/blob/main/01_x.ipynb" \
        in page.links
    assert [img["alt"] for img in page.images] == ["Bar chart: Speed on …"]
    assert "colab-badge.svg" not in (site / "01_x.html").read_text()


def test_fixture_site_has_no_fetch_broken_link_or_missing_alt(fixture_site):
    assert site_problems(fixture_site[0]) == []


def test_the_checker_catches_what_it_should(tmp_path):
    (tmp_path / "here.html").write_text("<p id='a'>x</p>")
    (tmp_path / "index.html").write_text(
        '<link rel="stylesheet" href="https://cdn.example/x.css">'
        '<script src="//cdn.example/x.js"></script><img src="https://x/b.svg" alt="b">'
        '<img src="data:image/png;base64,AA"><style>@import "https://x/y.css";</style>'
        '<a href="gone.html">g</a><a href="here.html#b">h</a>'
        '<a href="here.html#a">ok</a>'
        '<a href="https://example.org">ok</a><a href="#top">t</a><p id="top"></p>')
    problems = site_problems(tmp_path)
    assert len(problems) == 7, problems
    for needle in ["x.css", "x.js", "b.svg", "alt text", "y.css", "gone.html", "#b"]:
        assert any(needle in p for p in problems), (needle, problems)


def test_figure_titles_name_the_plot():
    source = ('%matplotlib inline\nfig = line_plot(x, ys, title="Sweep", logx=True)\n'
              'ax.set_title(f"on {device}")\n'
              '_ = plot_timeline({"naive": a, f"piped {m}": b})\nbar_chart(x, y)\n')
    assert build_site.figure_titles(source) == [
        "Line plot: Sweep", "on …", "Timeline: naive, piped …", "Bar chart"]
    assert build_site.figure_titles("not python (") == []


def test_title_and_summary_parsing():
    nb = new_notebook(cells=[new_markdown_cell(
        "# 03 · Moving data\n\n[![Open In Colab](a)](b)\n\nCopy `x` <fast>,\n"
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
def test_real_course_exports_offline_with_working_links(tmp_path):
    build_site.main(["--out", str(tmp_path), *map(str, NOTEBOOKS)])
    links = LINK.findall((tmp_path / "index.html").read_text())
    assert [href for href, _ in links] == [f"{p.stem}.html" for p in NOTEBOOKS]
    for path, (href, title) in zip(NOTEBOOKS, links, strict=True):
        assert title.startswith(f"{path.name[:2]} · "), (path.name, title)
        assert "<h1" in (tmp_path / href).read_text()
    problems = site_problems(tmp_path)
    assert not problems, "the site fetches or links badly:\n  " + "\n  ".join(problems)
