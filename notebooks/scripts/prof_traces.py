"""Read a profiler's Chrome trace back as timed events, nested per row and labelled.

    prof.export_chrome_trace("step.json")   # under torch.profiler.profile
    events = trace_events("step.json")      # or trace_events(prof)

A row is a CPU thread or a GPU stream; depth is how deeply an event nests inside others
on its row (a `record_function` label at 0, the ops it calls at 1, ...); an event's
phase is the label around it. prof_step.py reads its traces with complete_events.
Notebooks 06, 07 and 11 read and draw traces with it. It is the profiling family's
shared file; it uses only the standard library, so it also works alone.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

# Chrome-trace categories that the GPU itself runs; every other complete event is CPU.
_GPU_CATEGORIES = frozenset(
    {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"})
_EPS = 1e-3  # microseconds: rounding slack when one event nests inside another


class TraceEvent(NamedTuple):
    """One timed event: where it ran, when (ms from start), its phase."""

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
    """Return a Chrome trace as a dict, from a profiler, a dict or a file path."""
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
    return json.loads(Path(trace).read_text(encoding="utf-8"))


def complete_events(trace: Any) -> list[dict]:
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


LABELS = ("forward", "backward", "optimizer")  # the phases a training step labels


def trace_events(trace: Any, labels: Sequence[str] = LABELS) -> list[TraceEvent]:
    """Return a trace's complete events, nested per row and labelled.

    `trace` is a `torch.profiler.profile`, a Chrome-trace dict or a path to one. An
    event's phase is the innermost event named in `labels` around it on its row, else
    the shortest labelled CPU event running when it starts (autograd's own thread);
    a GPU event takes the phase of the CPU call that launched it ("correlation" id).
    """
    raw = complete_events(trace)
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
