"""The notebook metadata ipykernel itself writes, which every course notebook carries.

tests/test_notebooks.py checks each notebook against these, so opening a notebook in
JupyterLab rewrites nothing.
"""

from __future__ import annotations

# What ipykernel reports (tests/test_notebooks.py checks): Lab then rewrites nothing.
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python",
              "name": "python3"}


def language_info() -> dict:
    """Return the language_info this Python's kernel reports (and Lab would write)."""
    from ipykernel.ipkernel import IPythonKernel

    return dict(IPythonKernel.language_info)
