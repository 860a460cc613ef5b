"""Notebook 01's exercise 2 on a faked GPU: its check times on a simulated machine, and
a CPU run never takes the CUDA-event path of `benchmark` through it. Here that path
runs, with torch.cuda's device context and events faked, so a CPU cannot hide a wrong
device answer. The notebook's own cells are loaded (stdlib json: no Jupyter needed)."""

from __future__ import annotations

import contextlib
import io
import json
from unittest import mock

import pytest
import torch
from conftest import NOTEBOOK_DIR

NOTEBOOK = NOTEBOOK_DIR / "01_cuda_queries.ipynb"
CELLS = ("cell-002", "cell-027", "cell-042-a", "cell-042-c", "cell-042-d",
         "cell-042-e", "cell-042-f", "cell-042-b")


def _source(cell: dict) -> str:
    """Return a cell's Python, its IPython magics dropped."""
    text = "".join(cell["source"])
    return "\n".join(line for line in text.split("\n") if not line.startswith("%"))


@pytest.fixture()
def notebook() -> dict:
    """Return the namespace of the notebook's exercise-2 cells, `device` the CPU."""
    cells = {c.get("id"): c for c in json.loads(NOTEBOOK.read_text())["cells"]}
    ns = {"device": torch.device("cpu")}
    for cid in CELLS:
        exec(compile(_source(cells[cid]), f"<{cid}>", "exec"), ns)  # noqa: S102
    return ns


@contextlib.contextmanager
def cuda_timing(ns: dict):
    """Make the notebook's matmul timing take benchmark's CUDA path, on faked CUDA."""
    bench, context = ns["benchmark"], lambda _dev: contextlib.nullcontext()
    with mock.patch.object(torch.cuda, "device", context), \
            mock.patch.dict(ns, matmul_timing=lambda x, y, number=1: bench(
                lambda: x @ y, torch.device("cuda"), number=number)):
        yield


def _said(ns: dict, fn) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ns["check"](fn, test=ns["test_rates"])
    return out.getvalue()


def test_cuda_events_time_the_simulated_multiply_exactly(notebook):
    x, y = torch.randn(32, 32), torch.randn(32, 32)
    with notebook["simulated_machine"]() as sim, cuda_timing(notebook):
        t = notebook["matmul_timing"](x, y)
    want = 2 * 32**3 / (sim.clock.gflops[torch.float32] * 1e9)
    assert t.method == "CUDA events", t.method
    assert t.median == pytest.approx(want, rel=1e-9), (t.median, want)


def test_on_faked_cuda_the_solution_is_right_and_no_synchronise_wrong(notebook):
    solution = ("def solve(n):\n"
                "    made = {dt: [torch.randn(n, n, dtype=dt) for _ in 'xy'] "
                "for dt in DTYPES}\n"
                "    return {dt: matmul_rate(x, y) for dt, (x, y) in made.items()}\n")
    unsynced = ("import time\n"
                "def rush(n):\n"
                "    rates = {}\n"
                "    for dt in DTYPES:\n"
                "        x, y = (torch.randn(n, n, dtype=dt) for _ in 'xy')\n"
                "        x @ y\n"
                "        t0 = time.perf_counter()\n"
                "        x @ y\n"
                "        rates[dt] = gflops(n, time.perf_counter() - t0)\n"
                "    return rates\n")
    exec(solution + unsynced, notebook)  # noqa: S102
    with cuda_timing(notebook):
        assert _said(notebook, notebook["solve"]).startswith("right")
        said = _said(notebook, notebook["rush"])
    assert said.startswith("not yet") and "synchronise" in said, said
