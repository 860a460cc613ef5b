"""`make html`: Sphinx with myst-nb renders the stored outputs into an offline site.

The real course is built once for this module, into a temporary folder. The site
fetches nothing: every <img src>, <script src>, <link href> (and CSS url()) is a local
file or a data: URI. Every link resolves: to a file in the site (and, with a
#fragment, to an id in it), or is an http(s) link kept on purpose (Colab, further
reading), which a reader follows by choice and the page never fetches.
"""

from __future__ import annotations

import json
import re
import runpy
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest

pytest.importorskip("sphinx", reason="the site is built with Sphinx (requirements.txt)")
pytest.importorskip("myst_nb", reason="the site reads notebooks with myst-nb")
nbformat = pytest.importorskip("nbformat")

from conftest import NOTEBOOKS  # noqa: E402

from tools import build_site  # noqa: E402

CSS_URL = re.compile(r"url\(\s*[\"']?([^\"')\s]+)|@import\s+[\"']([^\"']+)", re.I)
EXTERNAL = re.compile(r"^https?://")
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:|^//", re.I)
NB_LINK = re.compile(r"\]\((\d\d_[\w-]+)\.ipynb(#[^)]*)?\)")
IMAGES = ("image/png", "image/jpeg", "image/svg+xml")
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # colours, which a page shows as colours
# myst-parser still calls APIs that a later Sphinx removes; not the course's to fix.
# Sphinx renders the stored outputs: no torch runs (make test-compat skips it).
pytestmark = [pytest.mark.tooling, pytest.mark.slow, pytest.mark.filterwarnings(
    "ignore::PendingDeprecationWarning:myst_parser")]


class _Page(HTMLParser):
    """Collect what a page links (a href), what it loads, its ids, images and text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.loads: list[tuple[str, str]] = []  # (tag, url) fetched when shown
        self.rel: dict[str, str] = {}  # <link rel="prev|next|..."> -> href
        self.ids: set[str] = set()
        self.images: list[dict[str, str | None]] = []
        self.css: list[str] = []
        self.text: list[str] = []
        self._style = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag in ("a", "area") and a.get("href") is not None:
            self.links.append(a["href"])
        if tag == "link" and a.get("href") is not None:
            self.loads.append((tag, a["href"]))
            self.rel[a.get("rel") or ""] = a["href"]
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
        (self.css if self._style else self.text).append(data)

    def words(self) -> str:
        return " ".join("".join(self.text).split())


def _parse(html: str | Path) -> _Page:
    page = _Page()
    page.feed(html.read_text(encoding="utf-8") if isinstance(html, Path) else html)
    return page


def site_problems(site: Path) -> list[str]:
    """Return every network fetch, broken link and missing alt text in `site`."""
    pages = {p.relative_to(site).as_posix(): _parse(p) for p in site.rglob("*.html")}
    problems = []
    for name, page in sorted(pages.items()):
        loads = page.loads + [("css", m[0] or m[1]) for css in page.css
                              for m in CSS_URL.findall(css)]
        for tag, url in loads:
            path = (site / name).parent / re.split(r"[?#]", url)[0]
            local = not SCHEME.match(url) and path.is_file()
            if not (url.startswith("data:") or local or url.startswith("#")):
                problems.append(f"{name}: <{tag}> loads {url[:80]!r}")
        for href in page.links:
            if EXTERNAL.match(href) or href.startswith("mailto:"):
                continue  # kept on purpose: followed by the reader, never fetched
            target, _, fragment = href.partition("#")
            target, fragment = unquote(target), unquote(fragment)
            if SCHEME.match(target):
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
            if not alt or alt == img.get("src"):
                problems.append(f"{name}: <img> without a real alt text: {alt!r}")
    return problems


def _title(nb) -> str:
    """The notebook's H1 as a page shows it (no Markdown backticks)."""
    return next(line[2:].strip().replace("`", "") for c in nb.cells
                if c.cell_type == "markdown" for line in c.source.splitlines()
                if line.startswith("# "))


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    if not NOTEBOOKS:
        pytest.skip("no course notebooks yet")
    tmp = tmp_path_factory.mktemp("html")
    warnings = tmp / "warnings.txt"
    status = build_site.build_site(NOTEBOOKS, tmp / "site", "-w", str(warnings))
    text = warnings.read_text() if warnings.exists() else ""
    assert status == 0, f"sphinx-build failed ({status}):\n{text}"
    assert not text, "sphinx-build warned:\n" + text
    return tmp / "site"


@pytest.fixture(scope="module")
def notebooks() -> dict[str, nbformat.NotebookNode]:
    return {p.stem: nbformat.read(p, as_version=4) for p in NOTEBOOKS}


def test_home_page_lists_the_notebooks_in_order_with_their_titles(site, notebooks):
    index = (site / "index.html").read_text(encoding="utf-8")
    body = index[index.index('class="toctree-wrapper'):]
    body = body[:body.index("</div>")]
    items = re.findall(r'<li class="toctree-l1"><a class="reference internal" '
                       r'href="([^"]+)">(.*?)</a>', body)
    listed = [(href, _parse(text).words()) for href, text in items]
    assert listed == [(f"{stem}.html", _title(nb)) for stem, nb in notebooks.items()]
    words = _parse(index).words()
    assert "make lab" in words and "Colab" in words


def test_every_page_has_search_a_sidebar_and_previous_next_links(site, notebooks):
    pages = ["index.html", *(f"{stem}.html" for stem in notebooks)]
    for i, name in enumerate(pages):
        page = _parse(site / name)
        assert page.rel.get("prev") == (pages[i - 1] if i else None), name
        assert page.rel.get("next") == (pages[i + 1] if i + 1 < len(pages) else None)
        assert set(pages[1:]) - {name} <= set(page.links), f"{name}: sidebar lacks one"
        assert page.rel.get("search") == "search.html", name
    search = _parse(site / "search.html")
    assert ("script", "searchindex.js") in search.loads  # a script: works from file://
    index = (site / "searchindex.js").read_text(encoding="utf-8")
    for nb in notebooks.values():
        assert json.dumps(_title(nb))[1:-1] in index


def test_pages_show_the_stored_outputs_and_figures_executing_nothing(site, notebooks):
    conf = runpy.run_path(str(build_site.CONF / "conf.py"))
    assert conf["nb_execution_mode"] == "off"
    for stem, nb in notebooks.items():
        page = _parse(site / f"{stem}.html")
        words = page.words()
        outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
        for out in outputs:
            if out.output_type == "stream" and out.name == "stdout":
                for line in ANSI.sub("", out.text).splitlines():
                    assert " ".join(line.split()) in words, (stem, line)
        figures = sum(any(m in o.get("data", {}) for m in IMAGES) for o in outputs)
        shown = [i["src"] for i in page.images if i["src"].startswith("_images/")]
        assert len(shown) == figures, (stem, shown)
        assert all((site / src).is_file() for src in shown), stem


def test_site_fetches_nothing_and_every_link_resolves(site):
    problems = site_problems(site)
    assert not problems, "the site fetches or links badly:\n  " + "\n  ".join(problems)


def test_links_to_notebooks_and_scripts_point_into_the_site(site, notebooks):
    for stem, nb in notebooks.items():
        page = _parse(site / f"{stem}.html")
        markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
        targets = {t for t, _ in NB_LINK.findall(markdown)}
        assert targets <= {h.partition("#")[0][:-5] for h in page.links}, stem
        assert not [h for h in page.links if ".ipynb" in h and not EXTERNAL.match(h)]
        for script in re.findall(r"\]\(scripts/([\w.]+\.py)\)", markdown):
            copies = [h for h in page.links if h.endswith(f"/{script}")]
            assert copies, (stem, script)
            assert (site / copies[0]).read_text() == \
                (NOTEBOOKS[0].parent / "scripts" / script).read_text()


def test_the_colab_badge_is_a_plain_link_and_solutions_are_folded(site, notebooks):
    for stem, nb in notebooks.items():
        html = (site / f"{stem}.html").read_text(encoding="utf-8")
        assert "colab-badge.svg" not in html, stem
        if "colab.research.google.com" in nb.cells[0].source:
            assert re.search(rf'href="https://colab[^"]+/{stem}\.ipynb"', html), stem
        hidden = sum(bool(c.metadata.get("jupyter", {}).get("source_hidden"))
                     or "hide-input" in c.metadata.get("tags", []) for c in nb.cells)
        assert html.count('<details class="admonition hide above-input">') == hidden


def test_the_checker_catches_what_it_should(tmp_path):
    (tmp_path / "here.html").write_text("<p id='a'>x</p>")
    (tmp_path / "index.html").write_text(
        '<link rel="stylesheet" href="https://cdn.example/x.css">'
        '<script src="//cdn.example/x.js"></script><img src="https://x/b.svg" alt="b">'
        '<img src="data:image/png;base64,AA"><style>@import "https://x/y.css";</style>'
        '<a href="gone.html">g</a><a href="here.html#b">h</a>'
        '<a href="here.html#a">ok</a><link rel="x" href="here.html?v=1">'
        '<a href="https://example.org">ok</a><a href="#top">t</a><p id="top"></p>')
    problems = site_problems(tmp_path)
    assert len(problems) == 7, problems
    for needle in ["x.css", "x.js", "b.svg", "alt text", "y.css", "gone.html", "#b"]:
        assert any(needle in p for p in problems), (needle, problems)


def test_build_never_replaces_a_folder_that_is_not_a_site(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not replacing"):
        build_site.build_site(NOTEBOOKS[:1] or [tmp_path / "x.ipynb"], tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_main_fails_clearly_without_notebooks(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(build_site, "NOTEBOOKS", tmp_path)
    assert build_site.main(["--out", str(tmp_path / "site")]) == 1
    assert "no notebooks" in capsys.readouterr().err
