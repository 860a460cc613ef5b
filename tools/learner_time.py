"""Estimate how long a learner needs for each notebook, for the README's table.

The estimate is a stated formula, not a measurement: the markdown read at 150 words a
minute, 15 s to read and run each code cell the learner sees (hidden solutions not
counted), and 4 minutes per exercise, rounded to the nearest 5 minutes.
`python -m tools.learner_time` prints one line per notebook; tests/test_readme.py checks
that the README's table says the same.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
WORDS_PER_MINUTE = 150
MINUTES_PER_CODE_CELL = 0.25
MINUTES_PER_EXERCISE = 4


def markdown_words(nb: nbformat.NotebookNode) -> int:
    """Count the markdown cells' whitespace-separated tokens: the word budget's unit."""
    return sum(len(re.findall(r"\S+", cell.source))
               for cell in nb.cells if cell.cell_type == "markdown")


def learner_minutes(path: Path) -> int:
    """Return the estimated minutes for one notebook, rounded to the nearest 5."""
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    tags = [set(c.metadata.get("tags", [])) for c in code]
    shown = sum(1 for t in tags if "solution" not in t)
    exercises = sum(1 for t in tags if "exercise" in t)
    minutes = (markdown_words(nb) / WORDS_PER_MINUTE + shown * MINUTES_PER_CODE_CELL
               + exercises * MINUTES_PER_EXERCISE)
    return 5 * round(minutes / 5)


def main() -> int:
    """Print each notebook's estimated learner time."""
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        print(f"{path.name:40s} {learner_minutes(path):3d} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
