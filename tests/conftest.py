"""Shared fixtures and paths for the course's tests."""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb"))
SANITIZE = ROOT / "tests" / "sanitize.cfg"

if str(ROOT) not in sys.path:  # lets tests import tools/ without installing it
    sys.path.insert(0, str(ROOT))


def cell_sources(path: Path) -> dict[str, str]:
    """Return each cell's source by id, read as JSON (the floor has no nbformat)."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return {c["id"]: "".join(c["source"]) for c in cells}


@pytest.fixture
def group():
    """A one-process gloo group in this process, left again afterwards."""
    import torch.distributed as dist

    from helpers.launch import free_port  # here: the hygiene tests import no torch

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}",
                            rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def load_script(path: Path) -> ModuleType:
    """Import a notebook script (notebooks/scripts/*.py) as a module, by its path."""
    if str(path.parent) not in sys.path:  # as `python script.py` does: siblings import
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # a dataclass looks its module up while it is made
    spec.loader.exec_module(module)
    return module


def foreign_imports(path: Path, allowed: Iterable[str] = ()) -> set[str]:
    """Return the top-level modules `path` imports beyond torch, `allowed`, stdlib."""
    tree = ast.parse(path.read_text())
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
             for alias in node.names}
    names |= {node.module for node in ast.walk(tree)
              if isinstance(node, ast.ImportFrom) and node.module}
    tops = {name.split(".")[0] for name in names}
    return tops - {"torch", *allowed} - set(sys.stdlib_module_names)


def text_sizes(fig: Any) -> dict[str, float]:
    """Return {text: font size} for every visible, non-empty text the figure draws."""
    import matplotlib.text

    fig.canvas.draw()  # tick labels exist only once drawn
    texts = [t for t in fig.findobj(matplotlib.text.Text)
             if t.get_visible() and t.get_text().strip()]
    return {t.get_text(): t.get_fontsize() for t in texts}


def assert_readable(fig: Any) -> None:
    """Assert the course's figure size and dpi, and no text under its smallest size."""
    from helpers.plotting import DPI, FIGSIZE, FONT_SIZE

    assert tuple(fig.get_size_inches()) == FIGSIZE, fig.get_size_inches()
    assert fig.dpi == DPI, f"dpi {fig.dpi}, want {DPI}"
    small = {t: s for t, s in text_sizes(fig).items() if s < FONT_SIZE}
    assert not small, f"text under {FONT_SIZE} pt: {small}"



def said(ns: dict, answer: str, call: str) -> str:
    """Run `answer`, then a check's `call`, in a copy of `ns`; return its output."""
    space = dict(ns)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(answer + "\n" + call, space)
    return out.getvalue().strip()
