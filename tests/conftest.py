"""Shared fixtures and paths for the course's tests."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb"))
SANITIZE = ROOT / "tests" / "sanitize.cfg"

if str(ROOT) not in sys.path:  # lets tests import tools/ without installing it
    sys.path.insert(0, str(ROOT))
