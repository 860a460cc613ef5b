"""Read a profiler's Chrome trace and draw it as a timeline: one lane per row and depth.

A row is a CPU thread or a GPU stream; depth is how deeply an event nests inside others
on its row (a `record_function` label at 0, the ops it calls at 1, ...). Importing this
module imports no matplotlib (until a plot is drawn) and never touches CUDA.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helpers.plotting import FONT_SIZE, TITLE_SIZE, subplots

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["GPU_CATEGORIES", "LABELS", "TraceEvent", "plot_trace", "trace_events"]

# Chrome-trace categories that the GPU itself runs; every other complete event is CPU.
GPU_CATEGORIES = frozenset(
    {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"})
_EPS = 1e-3  # microseconds: rounding slack when one event nests inside another
_PHASE_COLORS = {"forward": "#4C72B0", "backward": "#DD8452", "optimizer": "#55A868"}
_OTHER_COLORS = ["#8172B3", "#C44E52", "#937860", "#DA8BC3", "#CCB974", "#64B5CD"]
_UNLABELLED = "#A0A0A0"
_CHAR_PX = 8.5  # a generous width of one character at 10 pt and 100 dpi, in pixels


@dataclass(frozen=True)
class TraceEvent:
    """One timed event: where it ran, when (ms from the trace's start) and its label."""

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


def _row_names(keys: list[tuple]) -> dict[tuple, str]:
    """Name each row key as 'CPU thread 0', 'CPU thread 1', ... or 'GPU 0 stream 7'."""
    names: dict[tuple, str] = {}
    threads = 0
    for key in keys:
        if key in names:
            continue
        if key[0] == "gpu":
            names[key] = f"GPU {key[1]} stream {key[2]}"
        else:
            names[key] = f"CPU thread {threads}"
            threads += 1
    return names


def _row_key(e: dict) -> tuple:
    """Return the row an event belongs to: its GPU stream or its CPU thread."""
    args = e.get("args") or {}
    if e.get("cat") in GPU_CATEGORIES:
        return ("gpu", args.get("device", e.get("pid")),
                args.get("stream", e.get("tid")))
    return ("cpu", e.get("pid"), e.get("tid"))


LABELS = ("forward", "backward", "optimizer")


def trace_events(trace: Any, labels: Sequence[str] = LABELS) -> list[TraceEvent]:
    """Return a trace's complete events, nested per row and tagged with their label.

    `trace` is a `torch.profiler.profile`, a Chrome-trace dict or a path to one. An
    event's phase is the innermost event named in `labels` around it on its row, else
    the shortest labelled CPU event running when it starts (autograd's own thread);
    a GPU event takes the phase of the CPU call that launched it ("correlation" id).
    """
    raw = [e for e in _load(trace).get("traceEvents", [])
           if e.get("ph") == "X" and isinstance(e.get("pid"), int)
           and "ts" in e and "dur" in e]
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


def _short(name: str) -> str:
    """Shorten an op's name for a bar label: 'aten::addmm' reads 'addmm'."""
    for prefix in ("autograd::engine::evaluate_function: ", "aten::",
                   "Optimizer.step#"):
        name = name.removeprefix(prefix)
    return name


def _fit(text: str, width_px: float) -> str:
    """Return `text`, cut short with an ellipsis, to fit a bar `width_px` wide."""
    chars = int((width_px - 4) / _CHAR_PX)
    if chars >= len(text):
        return text
    return text[:chars - 1] + "\u2026" if chars >= 5 else ""


def plot_trace(events: Sequence[TraceEvent], title: str = "",
               max_depth: int = 3) -> Figure:
    """Draw `events` as bars on lanes, one per row and depth, coloured by phase.

    Events deeper than `max_depth - 1` are left out; a bar carries its (shortened)
    name where the name fits.
    """
    from matplotlib.patches import Patch

    if max_depth < 1:
        raise ValueError(f"max_depth must be at least 1, got {max_depth}")
    shown = [e for e in events if e.depth < max_depth]
    if not shown:
        raise ValueError("no events to draw")
    rows = sorted(dict.fromkeys(e.row for e in shown),
                  key=lambda row: row.startswith("GPU"))  # CPU rows first
    lanes = [(row, d) for row in rows
             for d in sorted({e.depth for e in shown if e.row == row})]
    lane_of = {lane: i for i, lane in enumerate(lanes)}
    phases = list(dict.fromkeys(e.phase for e in shown))
    others = iter(_OTHER_COLORS * (1 + len(phases) // len(_OTHER_COLORS)))
    colors = {p: _PHASE_COLORS.get(p) or (next(others) if p else _UNLABELLED)
              for p in phases}
    t0 = min(e.start for e in shown)
    span = max(e.end for e in shown) - t0 or 1.0  # ms
    fig, ax = subplots()
    for e in shown:
        ax.barh(lane_of[(e.row, e.depth)], e.duration, left=e.start - t0, height=0.8,
                color=colors[e.phase], edgecolor="white", linewidth=0.5)
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels([row if d == min(dd for r, dd in lanes if r == row)
                        else f"  depth {d}" for row, d in lanes])
    ax.invert_yaxis()
    xlim = span * 1.01
    ax.set_xlim(0, xlim)
    for i in range(1, len(lanes)):
        if lanes[i][0] != lanes[i - 1][0]:
            ax.axhline(i - 0.5, color="black", linewidth=0.8)
    handles = [Patch(color=colors[p], label=p or "unlabelled") for p in phases]
    ax.legend(handles=handles, fontsize=FONT_SIZE, loc="upper right", ncol=len(phases),
              bbox_to_anchor=(1.0, -0.14), frameon=False)
    ax.set_title(title, fontsize=TITLE_SIZE)
    ax.set_xlabel("ms from the first event", fontsize=FONT_SIZE + 1)
    ax.tick_params(labelsize=FONT_SIZE)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    axes_px = ax.get_position().width * fig.get_figwidth() * fig.dpi
    for e in shown:  # names last, once the layout fixes the axes' width in pixels
        label = _fit(_short(e.name), e.duration / xlim * axes_px)
        if label:
            ax.text(e.start - t0 + e.duration / 2, lane_of[(e.row, e.depth)], label,
                    ha="center", va="center", fontsize=FONT_SIZE, color="white",
                    clip_on=True)
    return fig
