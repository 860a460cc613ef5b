"""Every test module loads without the Jupyter stack, as the floor lane needs.

`make test-floor` runs the tests on an interpreter with torch and no Jupyter stack;
a test module that imports nbformat at its top stops that whole lane at collection.
Here the suite is collected in a child Python that refuses those imports, so the
mistake fails `make test` too, not only the lane that CI runs last.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT

pytestmark = [pytest.mark.tooling, pytest.mark.slow]

JUPYTER_STACK = ("nbformat", "nbval", "nbclient", "nbconvert", "jupyter_client",
                 "ipykernel", "IPython", "sphinx", "myst_nb", "selenium")

CHILD = f"""
import importlib.abc, sys
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {JUPYTER_STACK!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Refuse())
import pytest
sys.exit(pytest.main(["--collect-only", "-q", "tests", "--ignore=tests/browser",
                      "-p", "no:nbval"]))
"""


def test_every_module_collects_without_jupyter():
    done = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True,
                          text=True, timeout=240)
    errors = [line for line in done.stdout.splitlines() if line.startswith("ERROR")]
    assert done.returncode == 0 and not errors, (
        f"collecting without the Jupyter stack failed (exit {done.returncode}): "
        f"{errors or done.stdout[-2000:]}")
