"""Sphinx settings for `make html` (tools/build_site.py): the notebooks as stored."""

import re

import nbformat
from docutils import nodes

project = "PyTorch on GPUs: a hands-on course"
extensions = ["myst_nb"]
nb_execution_mode = "off"  # render the stored outputs; execute nothing
myst_heading_anchors = 3
myst_heading_slug_func = "tools.build_site.jupyter_anchor"  # as notebooks link them
html_theme = "alabaster"  # its search works from file:// (searchindex.js is a script)
html_theme_options = {"show_relbars": True, "page_width": "1100px",
                      "font_family": "sans-serif", "head_font_family": "sans-serif"}
html_sidebars = {"**": ["about.html", "searchfield.html", "navigation.html",
                        "relations.html"]}
suppress_warnings = ["misc.highlighting_failure"]  # a cell Pygments cannot lex
html_copy_source = html_show_copyright = False
html_show_sourcelink = False
TITLE = re.compile(r"title=f?[\"']([^\"']+)")  # a plot helper's or matplotlib's title


def _fold_hidden_sources(app, docname, source) -> None:
    """Fold the code that JupyterLab shows folded (solutions, the Colab cell)."""
    if app.env.doc2path(docname).suffix != ".ipynb":
        return
    nb = nbformat.reads(source[0], as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("jupyter", {}).get("source_hidden"):
            cell.metadata["tags"] = [*cell.metadata.get("tags", []), "hide-input"]
    source[0] = nbformat.writes(nb)


def _offline_images(app, doctree) -> None:
    """Show a remote image (the Colab badge) as its alt text: pages fetch nothing;
    give each plot an alt text from its title, or from its section's."""
    for image in list(doctree.findall(nodes.image)):
        if re.match(r"^(https?:)?//", image["uri"]):
            image.replace_self(nodes.Text(image.get("alt") or "image"))
        elif not image.get("alt"):
            cell, section = image.parent, image.parent
            while cell is not None and "cell" not in cell.get("classes", []):
                cell = cell.parent
            while section is not None and not isinstance(section, nodes.section):
                section = section.parent
            code = cell.next_node(nodes.literal_block) if cell is not None else None
            found = TITLE.search(code.astext()) if code is not None else None
            about = found[1] if found else section[0].astext() if section else "page"
            image["alt"] = "Plot: " + re.sub(r"\{[^}]*\}", "…", about)


def setup(app) -> None:
    app.connect("source-read", _fold_hidden_sources)
    app.connect("doctree-read", _offline_images)
