"""Build the static site of the executed course for offline reading (`make html`).

    python -m tools.build_site [--out site] [notebooks/01_x.ipynb ...]

Sphinx with myst-nb renders each notebook from its STORED outputs (nothing runs),
with search, a sidebar in course order and previous/next links; settings and the
home page are in tools/html/. The notebooks and the scripts they link are copied
into a scratch folder first, so the build writes nothing into the checkout but `out`.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from sphinx.cmd.build import build_main

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
CONF = Path(__file__).with_name("html")  # conf.py and index.md


def jupyter_anchor(heading: str) -> str:
    """Return the anchor JupyterLab gives a heading ("1 · Part" -> "1-·-Part")."""
    return heading.replace(" ", "-")


def build_site(notebooks: list[Path], out: Path, *sphinx_args: str) -> int:
    """Render `notebooks` and an index into `out` (replaced); return Sphinx's status."""
    if not notebooks:
        raise ValueError("no notebooks to build")
    if out.is_dir() and any(out.iterdir()) and not (out / ".buildinfo").exists():
        raise ValueError(f"{out} holds files but no site: not replacing it")
    with tempfile.TemporaryDirectory() as tmp:
        src, html = Path(tmp, "src"), Path(tmp, "html")
        src.mkdir()
        shutil.copy2(CONF / "index.md", src)
        for nb in map(Path, notebooks):
            shutil.copy2(nb, src)
            scripts = nb.parent / "scripts"
            if scripts.is_dir() and not (src / "scripts").exists():
                shutil.copytree(scripts, src / "scripts",
                                ignore=shutil.ignore_patterns("__pycache__", "*.md"))
        # One process: Sphinx's -j forks workers, which can deadlock when the caller
        # already runs threads (torch's, under pytest), and 18 pages need no more.
        status = build_main(["-b", "html", "-q", "-c", str(CONF),
                             "-d", str(Path(tmp, "doctrees")), *sphinx_args,
                             str(src), str(html)])
        if status == 0:
            shutil.rmtree(out, ignore_errors=True)
            shutil.copytree(html, out)
    return status


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
    status = build_site(notebooks, args.out)
    if status == 0:
        print(f"wrote {len(notebooks)} notebook pages: open {args.out / 'index.html'}")
    return status


if __name__ == "__main__":
    sys.exit(main())
