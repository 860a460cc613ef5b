"""Notebook 01's exercise 2 on a faked GPU: its check times on a simulated machine,
which queues work only where `device` is an accelerator, so a CPU run never sees a
timing that forgets to synchronise, nor the CUDA-event path of `benchmark`. Here both
run, with the machine queueing and torch.cuda's device context and events faked, so a
CPU cannot hide a wrong device answer; and a right CPU answer is shown to stay right
there. The notebook's own cells are loaded (stdlib json: no Jupyter needed)."""

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
         "cell-042-e", "cell-042-f", "cell-042-g", "cell-042-b")


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
            mock.patch.dict(ns, SIM_QUEUES=True,
                            matmul_timing=lambda x, y, number=1: bench(
                                lambda: x @ y, torch.device("cuda"), number=number)):
        yield


def _said(ns: dict, fn) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ns["check"](fn, test=ns["test_rates"])
    return out.getvalue()


def test_cuda_events_time_the_simulated_multiply_exactly(notebook):
    x, y = torch.randn(32, 32), torch.randn(32, 32)
    with cuda_timing(notebook), notebook["simulated_machine"]() as sim:
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


HAND_TIMED = ("import time, statistics\n"
              "def by_hand(n):\n"
              "    rates = {}\n"
              "    for dt in DTYPES:\n"
              "        x, y = (torch.randn(n, n, dtype=dt) for _ in 'xy')\n"
              "        for _ in range(3):\n"
              "            x @ y\n"
              "        times = []\n"
              "        for _ in range(5):\n"
              "            t0 = time.perf_counter()\n"
              "            x @ y\n"
              "            times.append(time.perf_counter() - t0)\n"
              "        rates[dt] = gflops(n, statistics.median(times))\n"
              "    return rates\n")


def test_on_a_cpu_a_warm_hand_timed_answer_is_right(notebook):
    """A CPU finishes each multiply before the call returns: no synchronise needed."""
    exec(HAND_TIMED, notebook)  # noqa: S102
    assert not notebook["SIM_QUEUES"]
    assert _said(notebook, notebook["by_hand"]).startswith("right")


def test_on_faked_cuda_timings_that_never_wait_for_the_gpu_are_wrong(notebook):
    """benchmark on the CPU's clock, or a synchronise for CUDA only (as on MPS)."""
    answers = ("def cpu_clock(n):\n"
               "    made = {dt: [torch.randn(n, n, dtype=dt) for _ in 'xy'] "
               "for dt in DTYPES}\n"
               "    return {dt: gflops(n, benchmark(lambda: x @ y).median)\n"
               "            for dt, (x, y) in made.items()}\n" + HAND_TIMED)
    exec(answers, notebook)  # noqa: S102
    with mock.patch.dict(notebook, SIM_QUEUES=True):
        for name in ("cpu_clock", "by_hand"):
            said = _said(notebook, notebook[name])
            assert said.startswith("not yet") and "synchronise" in said, (name, said)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_on_a_cpu_a_cuda_only_synchronise_is_wrong(notebook):
    """torch.cuda.synchronize() raises without a driver, so the answer cannot run."""
    answer = ("def cuda_wait(n):\n"
              "    made = {dt: [torch.randn(n, n, dtype=dt) for _ in 'xy']\n"
              "            for dt in DTYPES}\n"
              "    for x, y in made.values():\n"
              "        x @ y\n"
              "        torch.cuda.synchronize()\n"
              "    return {dt: matmul_rate(x, y) for dt, (x, y) in made.items()}\n")
    exec(answer, notebook)  # noqa: S102
    assert _said(notebook, notebook["cuda_wait"]).startswith("not yet")


def test_a_queueing_machine_drains_on_every_wait_a_gpu_answer_may_use(notebook):
    """torch.cuda's, torch.accelerator's and a stream's synchronize drain the queue."""
    waits = {"no wait": None, "torch.cuda": lambda: torch.cuda.synchronize(),
             "torch.accelerator": lambda: torch.accelerator.synchronize(),
             "a stream": lambda: torch.cuda.Stream.synchronize(None)}
    with mock.patch.dict(notebook, SIM_QUEUES=True):
        for name, wait in waits.items():
            with notebook["simulated_machine"]() as sim:
                sim.clock.run(1.0)
                if wait is not None:
                    wait()
                drained = sim.clock.host == sim.clock.queue
            assert drained == (wait is not None), (name, sim.clock.host)
