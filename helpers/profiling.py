"""Read a profiler's Chrome trace: as timed events, or as where each step's time went.

A row is a CPU thread or a GPU stream; depth is how deeply an event nests inside others
on its row (a `record_function` label at 0, the ops it calls at 1, ...).
`helpers.plotting.plot_trace` draws them. Nothing here touches CUDA. Each docstring
ends with the notebooks that use it.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.timing import verdict

__all__ = ["FIXES", "LABELS", "StepBreakdown", "TraceEvent", "diagnose",
           "step_breakdown", "trace_events"]

# Chrome-trace categories that the GPU itself runs; every other complete event is CPU.
_GPU_CATEGORIES = frozenset(
    {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"})
_EPS = 1e-3  # microseconds: rounding slack when one event nests inside another


@dataclass(frozen=True)
class TraceEvent:
    """One timed event: where it ran, when (ms from start), its phase (06, 07, 11)."""

    name: str
    row: str
    start: float
    duration: float
    depth: int = 0
    phase: str = ""

    @property
    def end(self) -> float:
        """Return the time the event ended, in ms."""
        return self.start + self.duration


def _load(trace: Any) -> dict:
    """Return a Chrome trace as a dict, from a profiler, a dict or a (.gz) file path."""
    if isinstance(trace, dict):
        return trace
    if hasattr(trace, "export_chrome_trace"):  # a torch.profiler.profile
        fd, name = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        try:
            trace.export_chrome_trace(name)
            return _load(name)
        finally:
            os.remove(name)
    path = Path(trace)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def _complete(trace: Any) -> list[dict]:
    """Return a trace's complete ("X") events that belong to a process."""
    return [e for e in _load(trace).get("traceEvents", []) if e.get("ph") == "X"
            and isinstance(e.get("pid"), int) and "ts" in e and "dur" in e]


def _row_names(keys: list[tuple]) -> dict[tuple, str]:
    """Name each row key as 'CPU thread 0', 'CPU thread 1', ... or 'GPU 0 stream 7'."""
    names: dict[tuple, str] = {}
    for key in dict.fromkeys(keys):  # in order of first appearance
        cpu = sum(k[0] == "cpu" for k in names)
        names[key] = (f"GPU {key[1]} stream {key[2]}" if key[0] == "gpu"
                      else f"CPU thread {cpu}")
    return names


def _row_key(e: dict) -> tuple:
    """Return the row an event belongs to: its GPU stream or its CPU thread."""
    args = e.get("args") or {}
    if e.get("cat") in _GPU_CATEGORIES:
        return ("gpu", args.get("device", e.get("pid")),
                args.get("stream", e.get("tid")))
    return ("cpu", e.get("pid"), e.get("tid"))


LABELS = ("forward", "backward", "optimizer")  # the phases notebook 06 labels


def trace_events(trace: Any, labels: Sequence[str] = LABELS) -> list[TraceEvent]:
    """Return a trace's complete events, nested per row and labelled (notebooks 06, 11).

    `trace` is a `torch.profiler.profile`, a Chrome-trace dict or a path to one. An
    event's phase is the innermost event named in `labels` around it on its row, else
    the shortest labelled CPU event running when it starts (autograd's own thread);
    a GPU event takes the phase of the CPU call that launched it ("correlation" id).
    """
    raw = _complete(trace)
    raw.sort(key=lambda e: (float(e["ts"]), -float(e["dur"])))
    if not raw:
        return []
    keys = [_row_key(e) for e in raw]
    names = _row_names(keys)
    stacks: dict[tuple, list[tuple[float, str]]] = {}  # row: open (end, phase)s
    nested: list[tuple[dict, tuple, int, str]] = []
    for e, key in zip(raw, keys, strict=True):
        start = float(e["ts"])
        stack = stacks.setdefault(key, [])
        while stack and stack[-1][0] <= start + _EPS:
            stack.pop()
        inner = stack[-1][1] if stack else ""
        phase = e["name"] if e.get("name") in labels else inner
        stack.append((start + float(e["dur"]), phase))
        nested.append((e, key, len(stack) - 1, phase))
    spans = sorted(((float(e["dur"]), float(e["ts"]), e["name"])
                    for e, key, _, _ in nested
                    if key[0] == "cpu" and e.get("name") in labels))
    launched: dict[Any, str] = {}  # correlation id: phase of the CPU call
    for i, (e, key, depth, phase) in enumerate(nested):
        if key[0] == "gpu":
            continue
        if not phase:  # the shortest label running at this time, on any thread
            t = float(e["ts"])
            phase = next((n for d, s, n in spans if s <= t + _EPS <= s + d + _EPS), "")
            nested[i] = (e, key, depth, phase)
        corr = (e.get("args") or {}).get("correlation")
        if corr is not None:
            launched[corr] = phase
    origin = float(raw[0]["ts"])
    events = []
    for e, key, depth, phase in nested:
        if key[0] == "gpu" and not phase:
            phase = launched.get((e.get("args") or {}).get("correlation"), "")
        events.append(TraceEvent(str(e.get("name", "")), names[key],
                                 (float(e["ts"]) - origin) / 1e3,
                                 float(e["dur"]) / 1e3, depth, phase))
    return events


# --- Where a training step's time went (notebook 17) ---------------------------------
# Each instant of a step counts once, as the first of PARTS that applies (_kind).
PARTS = ("sync", "data", "compute", "comm", "other")
FIXES = {"sync": "drop the per-step .item(): log every N steps",
         "data": "feed it faster: DataLoader workers, pin_memory",
         "comm": "a bigger per-rank batch, or no_sync: fewer all-reduces",
         "other": "a bigger per-rank batch, or fewer, larger kernels (notebook 07)"}
_DEVICE = _GPU_CATEGORIES - {"gpu_user_annotation"}  # what the GPU itself runs


def _kind(e: dict, gpu: bool) -> str:
    """Return an event's part: host sync, DataLoader wait, compute (GPU kernels, or
    CPU operators in a CPU-only trace), gloo/nccl communication, or "" for none."""
    name, cat = str(e.get("name", "")), e.get("cat")
    if name.startswith(("gloo:", "c10d::")) or "nccl" in name.lower():
        return "comm"
    if name in ("aten::item", "aten::_local_scalar_dense") or (
            cat == "cuda_runtime" and "Synchronize" in name):
        return "sync"
    return "data" if name.startswith("enumerate(DataLoader)") else (
        "compute" if cat in (_DEVICE if gpu else {"cpu_op"}) else "")


def _covered(spans: list[tuple[float, float]]) -> float:
    """Return the length of the union of (start, end) spans."""
    total, end = 0.0, -math.inf
    for lo, hi in sorted(spans):
        total, end = total + max(0.0, hi - max(lo, end)), max(end, hi)
    return total


def _steps(trace: Any) -> list[dict[str, float]]:
    """Return each "ProfilerStep#N" of a trace as {part: microseconds}."""
    raw = _complete(trace)
    gpu = any(e.get("cat") in _DEVICE for e in raw)
    spans: dict[str, list] = {k: [] for k in (*PARTS, "")}
    for e in raw:
        spans[_kind(e, gpu)].append((float(e["ts"]), float(e["ts"]) + float(e["dur"])))
    rows = []
    for e in raw:
        if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"):
            lo, hi = float(e["ts"]), float(e["ts"]) + float(e["dur"])
            clip = [[(max(a, lo), min(b, hi)) for a, b in spans[k] if a < hi and b > lo]
                    for k in PARTS[:-1]]
            edges = [0.0, *(_covered(sum(clip[:i], [])) for i in (1, 2, 3, 4)), hi - lo]
            rows.append({p: edges[i + 1] - edges[i] for i, p in enumerate(PARTS)})
    return rows


@dataclass
class StepBreakdown:
    """A step's mean ms per part (summing to `step`), each rank's compute share (15)."""

    step: float
    parts: dict[str, float]
    shares: list[float]


def step_breakdown(traces: Sequence[Any]) -> StepBreakdown:
    """Split each "ProfilerStep#N" of each rank's trace into PARTS (notebook 17)."""
    ranks = [_steps(t) for t in traces]
    if not ranks or not all(ranks):
        raise ValueError("a trace has no ProfilerStep#N: profile with a schedule and "
                         "call prof.step() after every step")
    rows = [r for steps in ranks for r in steps]
    parts = {p: statistics.fmean(r[p] for r in rows) / 1e3 for p in PARTS}
    shares = [sum(r["compute"] for r in s) / sum(sum(r.values()) for r in s)
              for s in ranks]
    return StepBreakdown(sum(parts.values()), parts, shares)


def diagnose(b: StepBreakdown, banded: bool = True) -> str:
    """Say if a step can scale (banded=False: no band) and what to fix first (15)."""
    share = 100 * b.parts["compute"] / b.step
    lo, hi = 100 * min(b.shares), 100 * max(b.shares)
    words = verdict(share, [
        (50, "mostly overhead: more devices barely help"),
        (80, "part overhead: scaling falls short of the ideal"),
        (math.inf, "mostly compute, the part that more devices divide")],
        spread=(lo, hi), unit=" % compute") if banded else (
        f"{share:.0f} % compute (ranks {lo:.0f} % to {hi:.0f} %)")
    worst = max((p for p in PARTS if p != "compute"), key=b.parts.get)
    return (f"{words}; largest overhead: {worst}, {b.parts[worst]:.1f} of "
            f"{b.step:.1f} ms; fix: {FIXES[worst]}")
