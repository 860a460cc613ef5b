"""Export the executed course to a static site for offline reading (`make html`).

    python -m tools.build_site [--out site] [notebooks/01_x.ipynb ...]

Every notebook is converted from its STORED outputs (nothing is re-executed) with
nbconvert's JupyterLab template, minus the scripts that template fetches from CDNs
(require.js, MathJax, Mermaid, widgets): pages need no network to be read, and
maths shows as its TeX source. An index.html lists the notebooks in course order.
"""

from __future__ import annotations

import argparse
import html
import re
import sys
from pathlib import Path

import jinja2
import nbformat
from nbconvert import HTMLExporter

__all__ = ["COURSE_TITLE", "notebook_title", "notebook_summary", "build_site", "main"]

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
COURSE_TITLE = "PyTorch on GPUs: a hands-on course"

# The lab template without its remote scripts, plus a navigation bar on each page.
TEMPLATE = r"""{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block extra_css -%}
<style>
  nav.course-nav { font-family: sans-serif; font-size: 14px; padding: 8px 16px;
                   display: flex; gap: 24px; border-bottom: 1px solid #ddd; }
  nav.course-nav.bottom { border-top: 1px solid #ddd; border-bottom: none; }
</style>
{%- endblock extra_css -%}
{%- block body_header -%}
{{ super() }}
{{ resources.course_nav | safe }}
{%- endblock body_header -%}
{%- block body_footer -%}
{{ resources.course_nav | replace('class="course-nav"', 'class="course-nav bottom"')
   | safe }}
{{ super() }}
{%- endblock body_footer -%}
"""

INDEX = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>{title}</title>
<style>
  body {{ font-family: sans-serif; max-width: 46em; margin: 2em auto; padding: 0 1em;
         line-height: 1.5; color: #222; }}
  li {{ margin: 0.6em 0; }}
  .summary {{ color: #555; display: block; }}
</style>
</head>
<body>
<h1>{title}</h1>
<p>The course's notebooks in order, with the outputs stored from their last run
(nothing here was re-executed). Open a notebook in JupyterLab or Colab to run it.</p>
<ol class="notebooks">
{items}
</ol>
</body>
</html>
"""

_BADGE = re.compile(r"^\[!\[Open In Colab\]")


def notebook_title(nb: nbformat.NotebookNode) -> str:
    """Return the text of the notebook's H1, e.g. "01 · CUDA queries"."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    raise ValueError("notebook has no '# ' title in a markdown cell")


def notebook_summary(nb: nbformat.NotebookNode) -> str:
    """Return the one-paragraph summary after the title and badge, or ""."""
    first = next((c for c in nb.cells if c.cell_type == "markdown"), None)
    paragraph: list[str] = []
    for line in (first.source.splitlines()[1:] if first else []):
        line = line.strip()
        if not line or _BADGE.match(line) or line.startswith(("#", "**", "-")):
            if paragraph:
                break
            continue
        paragraph.append(line)
    return " ".join(paragraph)


def _inline(text: str) -> str:
    """Escape `text` for HTML, keeping Markdown `code` and *emphasis*."""
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))
    return re.sub(r"\*([^*]+)\*", r"<em>\1</em>", text)


def _link(page: str, text: str) -> str:
    return f'<a href="{html.escape(page)}">{html.escape(text)}</a>'


def _nav(pages: list[str], titles: list[str], i: int) -> str:
    parts = [_link("index.html", "Course index")]
    if i > 0:
        parts.append("&larr; " + _link(pages[i - 1], titles[i - 1]))
    if i + 1 < len(pages):
        parts.append(_link(pages[i + 1], titles[i + 1]) + " &rarr;")
    return '<nav class="course-nav">' + " ".join(
        f"<span>{p}</span>" for p in parts) + "</nav>"


def _exporter() -> HTMLExporter:
    exporter = HTMLExporter(template_name="lab", embed_images=True,
                            extra_loaders=[jinja2.DictLoader({"course.j2": TEMPLATE})])
    exporter.template_file = "course.j2"
    return exporter


def build_site(notebooks: list[Path], out: Path) -> list[Path]:
    """Write one HTML page per notebook and an index.html into `out`; return them."""
    notebooks = sorted(Path(p) for p in notebooks)
    if not notebooks:
        raise ValueError("no notebooks to export")
    out.mkdir(parents=True, exist_ok=True)
    nbs = [nbformat.read(p, as_version=4) for p in notebooks]
    titles = [notebook_title(nb) for nb in nbs]
    pages = [f"{p.stem}.html" for p in notebooks]
    exporter = _exporter()
    written = []
    for i, (path, nb) in enumerate(zip(notebooks, nbs, strict=True)):
        resources = {"metadata": {"name": titles[i], "path": str(path.parent)},
                     "course_nav": _nav(pages, titles, i)}
        body, _ = exporter.from_notebook_node(nb, resources=resources)
        (out / pages[i]).write_text(body, encoding="utf-8")
        written.append(out / pages[i])
    items = []
    for page, title, nb in zip(pages, titles, nbs, strict=True):
        summary = _inline(notebook_summary(nb))
        items.append(f"<li>{_link(page, title)}"
                     + (f'<span class="summary">{summary}</span>' if summary else "")
                     + "</li>")
    index = out / "index.html"
    index.write_text(INDEX.format(title=html.escape(COURSE_TITLE),
                                  items="\n".join(items)), encoding="utf-8")
    return [index, *written]


def main(argv: list[str] | None = None) -> int:
    """Build the site from the given notebooks (default: all) and say where it is."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--out", type=Path, default=ROOT / "site")
    args = parser.parse_args(argv)
    notebooks = args.notebooks or sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if not notebooks:
        print("no notebooks found under notebooks/", file=sys.stderr)
        return 1
    written = build_site(notebooks, args.out)
    print(f"wrote {len(written) - 1} notebook pages and {written[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
