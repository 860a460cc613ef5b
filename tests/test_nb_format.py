"""Each notebook is a file that JupyterLab opens and leaves unchanged, and that holds
only what every machine would print: valid nbformat, ipykernel's own metadata, cells
run once in order, errors only where tagged, no paths or names of this machine, a
small file, and nbval's markers as cell tags.
"""

from __future__ import annotations

import getpass
import re
import socket

import pytest

pytest.importorskip("nbformat", reason="no nbformat: the notebook hygiene tests read "
                    "notebooks with it")
import nbformat
from conftest import NOTEBOOKS
from notebook_reading import IDS, output_text, read, tags

pytestmark = pytest.mark.tooling  # the notebook files only: no torch runs

MAX_BYTES = 300_000
LEAKS = [r"/root\b", r"/home/", r"/Users/", r"/work/", r"/tmp/", r"\.venv",
         r"site-packages", r"[A-Za-z]:\\\\"]


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found under notebooks/"


def _kernel_reports() -> tuple[dict, dict]:
    """Return the kernelspec and language_info that the installed ipykernel reports,
    i.e. what JupyterLab writes into a notebook once its kernel has started."""
    from ipykernel.ipkernel import IPythonKernel
    from ipykernel.kernelspec import KERNEL_NAME, get_kernel_dict

    spec = get_kernel_dict()
    kernelspec = {"display_name": spec["display_name"], "language": spec["language"],
                  "name": KERNEL_NAME}
    return kernelspec, dict(IPythonKernel.language_info)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_kernelspec_is_what_ipykernel_reports(path):
    """Else JupyterLab rewrites it on opening, and the checkout turns dirty."""
    kernelspec, _ = _kernel_reports()
    stored = dict(read(path).metadata.get("kernelspec", {}))
    assert stored == kernelspec, (
        f"{path.name}: kernelspec {stored} differs from ipykernel's {kernelspec}")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_language_info_is_what_the_kernel_reports(path):
    """All but "version", which is the Python that ran `make outputs`: on another
    Python JupyterLab rewrites that one field (see tests/browser/test_lab_opens.py)."""
    _, reported = _kernel_reports()
    stored = dict(read(path).metadata.get("language_info", {}))
    version = stored.pop("version", None)
    reported.pop("version")
    assert stored == reported, (
        f"{path.name}: language_info {stored} differs from the kernel's {reported}; "
        "run `make outputs`")
    assert re.fullmatch(r"3\.\d+\.\d+", version or ""), (
        f"{path.name}: language_info.version {version!r} is not a Python version")


def test_language_info_versions_agree():
    """One `make outputs`, one Python: every notebook stores the same version."""
    versions = {p.name: read(p).metadata.get("language_info", {}).get("version")
                for p in NOTEBOOKS}
    assert len(set(versions.values())) == 1, (
        f"notebooks were executed by different Pythons: {versions}")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_valid_nbformat_with_cell_ids(path):
    nb = read(path)
    nbformat.validate(nb)
    assert all(cell.get("id") for cell in nb.cells), "every cell needs an id"
    assert nb.metadata["kernelspec"]["name"] == "python3"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_execution_counts_are_sequential(path):
    counts = [c.execution_count for c in read(path).cells if c.cell_type == "code"]
    assert counts == list(range(1, len(counts) + 1)), (
        "run `make outputs` so every code cell is executed once, in order")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_errors_only_where_tagged(path):
    for i, cell in enumerate(read(path).cells):
        if cell.cell_type != "code":
            continue
        tagged = "raises-exception" in tags(cell)
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert bool(errors) == tagged, (
            f"cell {i}: {'untagged error' if errors else 'tagged but raised nothing'}")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_machine_specific_leaks(path):
    secrets = [re.escape(getpass.getuser()), re.escape(socket.gethostname())]
    patterns = LEAKS + [rf"\b{s}\b" for s in secrets if len(s) > 3 and s != "root"]
    for i, cell in enumerate(read(path).cells):
        for out in cell.get("outputs", []):
            text = output_text(out)
            for pat in patterns:
                assert not re.search(pat, text), f"cell {i} output leaks {pat!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_size_is_small(path):
    size = path.stat().st_size
    assert size < MAX_BYTES, f"{path.name}: {size} bytes, over {MAX_BYTES}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_nbval_markers_are_tags_not_comments(path):
    found = [(i, line.strip()) for i, c in enumerate(read(path).cells)
             if c.cell_type == "code" for line in c.source.split("\n")
             if re.match(r"\s*#\s*NBVAL_", line)]
    assert not found, (f"{path.name}: use cell tags (nbval-ignore-output, "
                       f"raises-exception, ...) instead of comments: {found}")
