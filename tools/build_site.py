"""Export the executed course to a static site for offline reading (`make html`).

    python -m tools.build_site [--out site] [--machine TEXT] [notebooks/01_x.ipynb ...]

Every notebook is converted from its STORED outputs (nothing is re-executed) with
nbconvert's JupyterLab template, minus the scripts that template fetches from CDNs
(require.js, MathJax, Mermaid, widgets): pages fetch nothing from the network, and
maths shows as its TeX source. Links between notebooks point at their pages, the
Colab badge image becomes a plain link, local files that notebooks link (scripts)
are copied beside the pages, and each plot gets alt text from its title. An
index.html lists the notebooks in course order, says how to run them and on what
machine the stored outputs were made.
"""

from __future__ import annotations

import argparse
import ast
import copy
import html
import re
import shutil
import sys
from pathlib import Path

import jinja2
import nbformat
from nbconvert import HTMLExporter

__all__ = ["COURSE_TITLE", "build_site", "figure_titles", "machine_report", "main",
           "notebook_summary", "notebook_title"]

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
{%- block data_png scoped -%}
<div class="jp-RenderedImage jp-OutputArea-output {{ extra_class }}">
<img src="data:image/png;base64,{{ output.data['image/png'] | escape_html }}"
 alt="{{ output | get_metadata('alt', 'image/png') | escape_html }}">
</div>
{%- endblock data_png -%}
{%- block data_jpg scoped -%}
<div class="jp-RenderedImage jp-OutputArea-output {{ extra_class }}">
<img src="data:image/jpeg;base64,{{ output.data['image/jpeg'] | escape_html }}"
 alt="{{ output | get_metadata('alt', 'image/jpeg') | escape_html }}">
</div>
{%- endblock data_jpg -%}
{%- block data_svg scoped -%}
<div class="jp-RenderedSVG jp-OutputArea-output {{ extra_class }}">
<img src="data:image/svg+xml;base64,{{ output.data['image/svg+xml'] | text_base64 }}"
 alt="{{ output | get_metadata('alt', 'image/svg+xml') | escape_html }}">
</div>
{%- endblock data_svg -%}
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
  pre.machine {{ background: #f4f4f4; padding: 0.8em; overflow-x: auto; }}
</style>
</head>
<body>
<h1>{title}</h1>
<p>The course's notebooks in order, with the outputs stored from their last run
(nothing here was re-executed).</p>
<ol class="notebooks">
{items}
</ol>
<h2>Run the course</h2>
<ul>
<li>On your machine: in a clone of the repository, <code>make lab</code> sets up
<code>.venv</code> (the first time only) and opens the notebooks in JupyterLab.</li>
<li>On Colab: open a notebook from its page's "Open in Colab" link, then
<em>Runtime &rarr; Change runtime type &rarr; T4 GPU</em>; its first cell fetches
the course's helpers.</li>
</ul>
<h2>Where the stored outputs come from</h2>
<p>The outputs on these pages were made by <code>make outputs</code> on this
machine{source}:</p>
<pre class="machine">{machine}</pre>
<p>Your numbers will differ on other hardware; each notebook prints the verdicts
from the numbers it measures.</p>
</body>
</html>
"""

_BADGE = re.compile(r"^\[!\[Open In Colab\]")
_BADGE_MD = re.compile(r"\[!\[Open In Colab\]\([^)]*\)\]\(([^)]*)\)")
_NB_LINK = re.compile(r"(\]\(|href=[\"'])(\d\d_[\w-]+)\.ipynb(?=[#)\"'])")
_LOCAL_LINK = re.compile(r"(?:\]\(|href=[\"'])(?![a-z]+:|#)([^)\"'\s#]+)")
IMAGES = ("image/png", "image/jpeg", "image/svg+xml")
PLOTTERS = {"bar_chart": "Bar chart", "line_plot": "Line plot",
            "plot_timeline": "Timeline"}  # helpers that draw a figure, by kind
TITLE_CALLS = {"set_title", "suptitle", "title"}  # matplotlib calls that set a title


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


def _literal(node: ast.expr) -> str | None:
    """Return a string literal's text; an f-string's placeholders become "…"."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "…"
                       for v in node.values)
    return None


def _called(func: ast.expr) -> str:
    return func.id if isinstance(func, ast.Name) else (
        func.attr if isinstance(func, ast.Attribute) else "")


def figure_titles(source: str) -> list[str]:
    """Return a description ("Bar chart: title") of each figure a cell draws."""
    code = "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln
                     for ln in source.split("\n"))
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    calls = sorted((n for n in ast.walk(tree) if isinstance(n, ast.Call)),
                   key=lambda n: (n.lineno, n.col_offset))
    found = []
    for call in calls:
        name = _called(call.func)
        if name in PLOTTERS:
            title = next((_literal(k.value) for k in call.keywords if k.arg == "title"),
                         None)
            if not title and call.args and isinstance(call.args[0], ast.Dict):
                names = [_literal(k) for k in call.args[0].keys if k is not None]
                title = ", ".join(n for n in names if n)  # plot_timeline's panels
            found.append(f"{PLOTTERS[name]}: {title}" if title else PLOTTERS[name])
        elif name in TITLE_CALLS and call.args and _literal(call.args[0]):
            found.append(_literal(call.args[0]))
    return found


def _with_alt_text(nb: nbformat.NotebookNode, title: str) -> None:
    """Give every image output an alt text: its own, the cell's, or its title."""
    for i, cell in enumerate(nb.cells):
        images = [o for o in cell.get("outputs", [])
                  if any(m in o.get("data", {}) for m in IMAGES)]
        described = figure_titles(cell.source) if images else []
        for k, out in enumerate(images):
            mime = next(m for m in IMAGES if m in out.data)
            meta = out.setdefault("metadata", {}).setdefault(mime, {})
            if len(described) == len(images):
                guess = described[k]
            else:
                guess = "; ".join(described) or f"Plot {k + 1} of cell {i} in {title}"
            meta["alt"] = (meta.get("alt") or out.metadata.get("alt")
                           or cell.metadata.get("alt") or guess)


def _for_the_site(nb: nbformat.NotebookNode, title: str) -> nbformat.NotebookNode:
    """Return a copy of `nb` with links to pages, no badge image, and alt texts."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            source = _BADGE_MD.sub(r"[Open in Colab](\1)", cell.source)
            cell.source = _NB_LINK.sub(r"\1\2.html", source)
    _with_alt_text(nb, title)
    return nb


def _copy_linked_files(nb: nbformat.NotebookNode, folder: Path, out: Path) -> None:
    """Copy the local files that `nb`'s markdown links (e.g. scripts/x.py) into out."""
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for target in _LOCAL_LINK.findall(cell.source):
            src = (folder / target).resolve()
            if src.is_file() and src.is_relative_to(folder.resolve()) \
                    and src.suffix != ".ipynb":
                (out / target).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, out / target)


def machine_report(nbs: list[nbformat.NotebookNode]) -> str | None:
    """Return the stored output of the first `env_report()` cell, if any."""
    for nb in nbs:
        for cell in nb.cells:
            if cell.cell_type == "code" and "env_report(" in cell.source:
                text = "".join(o.get("text", "") for o in cell.outputs
                               if o.output_type == "stream" and o.name == "stdout")
                if text.strip():
                    return text.strip()
    return None


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


def build_site(notebooks: list[Path], out: Path,
               machine: str | None = None) -> list[Path]:
    """Write one HTML page per notebook and an index.html into `out`; return them.

    `machine` describes where the stored outputs were made; by default it is the
    stored output of the first notebook cell that prints `env_report()`.
    """
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
        body, _ = exporter.from_notebook_node(_for_the_site(nb, titles[i]),
                                              resources=resources)
        _copy_linked_files(nb, path.parent, out)
        (out / pages[i]).write_text(body, encoding="utf-8")
        written.append(out / pages[i])
    items = []
    for page, title, nb in zip(pages, titles, nbs, strict=True):
        summary = _inline(notebook_summary(nb))
        items.append(f"<li>{_link(page, title)}"
                     + (f'<span class="summary">{summary}</span>' if summary else "")
                     + "</li>")
    index = out / "index.html"
    source = ""
    if machine is None:
        machine = machine_report(nbs) or "not recorded (no notebook printed it)"
        source = " (the stored output of <code>env_report()</code>)"
    index.write_text(INDEX.format(title=html.escape(COURSE_TITLE),
                                  items="\n".join(items), source=source,
                                  machine=html.escape(machine)), encoding="utf-8")
    return [index, *written]


def main(argv: list[str] | None = None) -> int:
    """Build the site from the given notebooks (default: all) and say where it is."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--out", type=Path, default=ROOT / "site")
    parser.add_argument("--machine", default=None,
                        help="where the stored outputs were made (default: the "
                             "env_report() output stored in the notebooks)")
    args = parser.parse_args(argv)
    notebooks = args.notebooks or sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if not notebooks:
        print("no notebooks found under notebooks/", file=sys.stderr)
        return 1
    written = build_site(notebooks, args.out, machine=args.machine)
    print(f"wrote {len(written) - 1} notebook pages and {written[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
