"""Shared fixtures and paths for the course's tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb"))
SANITIZE = ROOT / "tests" / "sanitize.cfg"

if str(ROOT) not in sys.path:  # lets tests import tools/ without installing it
    sys.path.insert(0, str(ROOT))


def load_script(path: Path) -> ModuleType:
    """Import a notebook script (notebooks/scripts/*.py) as a module, by its path."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
