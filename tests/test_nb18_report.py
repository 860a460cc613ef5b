"""Notebook 18's table, verdicts and report on machines this one is not: its own cells
(read as JSON, no Jupyter needed) run on faked runs of a 2-GPU machine and of a CPU,
so a CPU run cannot hide a wrong GPU row, and a noisy run must read "too noisy"."""

from __future__ import annotations

import json
import math
import os
import statistics

import pytest
from conftest import NOTEBOOK_DIR

from helpers import verdict

NOTEBOOK = NOTEBOOK_DIR / "18_benchmark_report.ipynb"
CELLS = ("cell-016-b", "cell-025", "cell-026", "cell-029", "cell-029-b")
ARTICLE = {"CPU": 888.595, "1 GPU": 80.06, "DataParallel, 2 GPUs": 60.7744,
           "DDP, 2 GPUs": 48.7986}


def _sources() -> dict[str, str]:
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    return {c["id"]: "".join(c["source"]) for c in cells if c.get("id") in CELLS}


def _row(windows: list[float], device: str) -> dict:
    return {"ms": statistics.median(windows), "windows": windows, "device": device}


def _run(runs: dict, ddp_name: str, best: int = 1,
         per_thread_ms: float | None = None, load: float | None = None) -> dict:
    """Run the table and notes cells on `runs`; return the notebook's names. The CPU
    row ran at `best` threads; one thread took `per_thread_ms` (if None: the row's)."""
    per_thread_ms = per_thread_ms or runs["CPU, 1 process"]["ms"]
    ns = {"runs": runs, "ddp_name": ddp_name, "ARTICLE": ARTICLE, "verdict": verdict,
          "math": math, "cpu_ms": runs["CPU, 1 process"]["ms"],
          "Markdown": lambda text: text, "BEST": best, "os": os,
          "HARDWARE": {"load_at_start": load},
          "per_threads": {1: per_thread_ms, best: runs["CPU, 1 process"]["ms"]}}
    src = _sources()
    assert set(src) == set(CELLS), f"cells not in the notebook: {set(CELLS) - set(src)}"
    for cid in CELLS:
        if cid == "cell-029":
            ns["measured"] = [r for r in ns["rows"] if r["speedup"] is not None]
        exec(compile(src[cid], cid, "exec"), ns)
    return ns


def test_two_gpu_rows_get_efficiencies_and_match_the_articles_kind():
    runs = {"CPU, 1 process": _row([100.0, 101.0, 99.0, 100.0], "cpu"),
            "1 GPU": _row([10.0, 10.1, 9.9], "cuda"),
            "DataParallel, 2 GPUs": _row([8.0, 8.1, 7.9], "cuda"),
            "DDP, 2 GPUs": _row([7.0, 7.1, 6.9], "cuda")}
    ns = _run(runs, "DDP, 2 GPUs")
    rows = {r["run"]: r for r in ns["rows"]}
    assert all(r["like_article"] for r in rows.values()), rows
    assert rows["DDP, 2 GPUs"]["efficiency"] == pytest.approx(10.0 / 14.0)
    assert rows["1 GPU"]["efficiency"] is None, "one GPU has no scaling efficiency"
    assert "not like ours" not in ns["TABLE"], ns["TABLE"]
    notes = "\n".join(ns["notes"])
    assert notes.count("scaling efficiency") == 2, notes
    assert "faster than the CPU row" in notes and "too noisy" not in notes, notes


def test_a_cpu_ddp_row_is_labelled_unlike_the_articles_gpus():
    runs = {"CPU, 1 process": _row([60.0, 61.0, 59.0, 60.0], "cpu"),
            "DDP, 2 CPU processes (gloo)": _row([80.0, 81.0, 79.0], "cpu")}
    ns = _run(runs, "DDP, 2 CPU processes (gloo)")
    ddp = next(r for r in ns["rows"] if r["run"].startswith("DDP"))
    assert ddp["like_article"] is False and ddp["efficiency"] is None, ddp
    assert "DDP, 2 GPUs (not like ours)" in ns["TABLE"], ns["TABLE"]
    assert "slower than the CPU row" in ns["notes"][0], ns["notes"]
    assert "on the CPU row's cores" in ns["notes"][0], ns["notes"]


def test_a_ratio_whose_windows_straddle_a_band_reads_too_noisy():
    # the CPU row got slower after the launch: its windows span the "same" band's edge
    runs = {"CPU, 1 process": _row([60.0, 61.0, 59.0, 90.0], "cpu"),
            "DDP, 2 CPU processes (gloo)": _row([62.0, 63.0, 61.0], "cpu")}
    ns = _run(runs, "DDP, 2 CPU processes (gloo)")
    assert "too noisy" in ns["notes"][0], ns["notes"]


def test_two_cpu_processes_beyond_twice_one_thread_are_flagged():
    # 2 one-thread ranks against the CPU row at 1 thread: at best 2x; 3x is noise
    runs = {"CPU, 1 process": _row([600.0, 610.0, 590.0, 600.0], "cpu"),
            "DDP, 2 CPU processes (gloo)": _row([200.0, 201.0, 199.0], "cpu")}
    ns = _run(runs, "DDP, 2 CPU processes (gloo)")
    assert "above the ideal 2x" in ns["notes"][0], ns["notes"]
    # the CPU row at 4 threads, 3x faster than one: two one-thread ranks reach 0.67x
    runs["DDP, 2 CPU processes (gloo)"] = _row([800.0, 801.0, 799.0], "cpu")
    ns = _run(runs, "DDP, 2 CPU processes (gloo)", best=4, per_thread_ms=1800.0)
    assert "above the ideal" in ns["notes"][0], ns["notes"]
    runs["DDP, 2 CPU processes (gloo)"] = _row([1000.0, 1001.0, 999.0], "cpu")
    ns = _run(runs, "DDP, 2 CPU processes (gloo)", best=4, per_thread_ms=1800.0)
    assert "above the ideal" not in ns["notes"][0], ns["notes"]


def test_a_busy_machine_is_named_beside_the_ratios():
    runs = {"CPU, 1 process": _row([60.0, 61.0, 59.0, 60.0], "cpu"),
            "DDP, 2 CPU processes (gloo)": _row([80.0, 81.0, 79.0], "cpu")}
    quiet = _run(runs, "DDP, 2 CPU processes (gloo)", load=0.5)
    assert not any("busy" in n for n in quiet["notes"]), quiet["notes"]
    busy = _run(runs, "DDP, 2 CPU processes (gloo)", load=4.0 * os.cpu_count())
    assert "The machine was busy" in busy["notes"][-1], busy["notes"]
