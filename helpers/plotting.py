"""Draw the course's figures, readable on a laptop and a projector, in one palette.

Every figure is 7 x 4 in at 100 dpi with no text under 10 pt, set on each figure:
importing this changes nothing, nor imports matplotlib. Docstrings end with notebooks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from helpers.stages import Event, idle_fraction

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["DPI", "FIGSIZE", "FONT_SIZE", "PALETTE", "TITLE_SIZE", "bar_chart",
           "line_plot", "plot_timeline", "plot_trace", "subplots"]

FIGSIZE = (7.0, 4.0)  # inches
DPI = 100
FONT_SIZE = 10  # points: tick labels, bar labels, legends; the smallest text drawn
TITLE_SIZE = 12
# seaborn's "deep" colours; the first three also mean forward, backward and optimizer
PALETTE = ("#4C72B0", "#DD8452", "#55A868", "#8172B3", "#C44E52", "#937860",
           "#DA8BC3", "#CCB974", "#64B5CD")
PHASES = {"forward": PALETTE[0], "backward": PALETTE[1], "optimizer": PALETTE[2]}
_GREY = "#A0A0A0"  # bars with no phase
_CHAR_PX = 8.5  # a generous width of one character at 10 pt and 100 dpi, in pixels
# what a trace bar's label leaves out: "aten::addmm" reads "addmm"
_PREFIXES = re.compile(
    r"^(?:autograd::engine::evaluate_function: |aten::|Optimizer\.step#)+")
# collectives by the names nccl, gloo and c10d give them: each is drawn as its own kind
_COLLECTIVES = {"all-reduce": r"all_?reduce", "all-gather": r"all_?gather",
                "reduce-scatter": r"reduce_?scatter", "all-to-all": r"all_?to_?all",
                "broadcast": r"(?<![a-z])broadcast(?!_tensors|_to|_shapes)",
                "send/recv": r"(?<![a-z])(?:i?send|i?recv)(?![a-z])",
                "barrier": r"(?<![a-z])barrier"}


def subplots(nrows: int = 1, ncols: int = 1, **kwargs: Any) -> tuple[Figure, Any]:
    """Return `plt.subplots(...)` at the course's size and dpi (notebooks 06, 14)."""
    import matplotlib.pyplot as plt

    kwargs.setdefault("figsize", FIGSIZE)
    kwargs.setdefault("dpi", DPI)
    return plt.subplots(nrows, ncols, **kwargs)


def _finish(ax: Axes, title: str, ylabel: str, xlabel: str = "",
            grid: str = "y") -> Figure:
    """Label `ax` at readable sizes, tidy its figure and return the figure."""
    ax.set_title(title, fontsize=TITLE_SIZE)
    ax.set_ylabel(ylabel, fontsize=FONT_SIZE + 1)
    ax.set_xlabel(xlabel, fontsize=FONT_SIZE + 1)
    ax.tick_params(which="both", labelsize=FONT_SIZE)
    ax.grid(axis=grid, alpha=0.3)
    ax.figure.tight_layout()
    return ax.figure


def bar_chart(labels: Sequence[str], values: Sequence[float], title: str = "",
              ylabel: str = "", fmt: str = "{:.3g}") -> Figure:
    """Draw one bar per label, its value above it (notebooks 05, 07-09, 12, 13, 18)."""
    if len(labels) != len(values):
        raise ValueError(f"{len(labels)} labels but {len(values)} values")
    fig, ax = subplots()
    bars = ax.bar(list(labels), list(values), color=PALETTE[0])
    ax.bar_label(bars, labels=[fmt.format(v) for v in values], fontsize=FONT_SIZE)
    ax.margins(y=0.15)
    return _finish(ax, title, ylabel)


def line_plot(x: Sequence[float], ys: dict[str, Sequence[float]], title: str = "",
              xlabel: str = "", ylabel: str = "", logx: bool = False,
              logy: bool = False) -> Figure:
    """Draw one marked line per entry of `ys` against `x` (01, 03, 05, 07, 11, 13)."""
    fig, ax = subplots()
    for name, y in ys.items():
        if len(y) != len(x):
            raise ValueError(f"series {name!r} has {len(y)} points, x has {len(x)}")
        ax.plot(list(x), list(y), marker="o", markersize=5, label=name)
    values = [v for y in ys.values() for v in y]
    for axis, on, data in ((ax.xaxis, logx, list(x)), (ax.yaxis, logy, values)):
        if on:
            _log_ticks(ax, axis, data)
    if len(ys) > 1:
        ax.legend(fontsize=FONT_SIZE)
    return _finish(ax, title, ylabel, xlabel)


def _log_ticks(ax: Axes, axis: Any, data: Sequence[float]) -> None:
    """Set a log scale; label 1, 2, 5 per decade in plain numbers if it spans few."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    (ax.set_xscale if axis is ax.xaxis else ax.set_yscale)("log")
    positive = [float(v) for v in data if v > 0]
    if not positive or max(positive) / min(positive) >= 1e4:
        return  # many decades: the decades themselves are enough labels
    subs = (1.0, 2.0, 5.0) if max(positive) / min(positive) >= 10 else (
        1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 7.0)
    axis.set_major_locator(LogLocator(base=10, subs=subs))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


Bar = tuple[float, float, float, str, str]  # lane, left, width, colour, label


def _lanes(ax: Axes, bars: Sequence[Bar], height: float, xlim: float,
           above: bool = False) -> None:
    """Draw bars on lanes, each label inside its bar where it fits, else `above` it."""
    for lane, left, width, color, _ in bars:
        ax.barh(lane, width, left=left, height=height, color=color,
                edgecolor="white", linewidth=0.5)
    ax.set_xlim(0, xlim)
    ax.figure.tight_layout()  # labels last, once the layout fixes the axes' width
    fig = ax.figure
    px_per_x = ax.get_position().width * fig.get_figwidth() * fig.dpi / xlim
    for lane, left, width, color, label in bars:
        chars = int((width * px_per_x - 4) / _CHAR_PX)
        text = label if chars >= len(label) else (
            label[:chars - 1] + "\u2026" if chars >= 5 and not above else "")
        if text:
            ax.text(left + width / 2, lane, text, ha="center", va="center",
                    fontsize=FONT_SIZE, color="white", clip_on=True)
        elif above:  # a short bar: its label goes just above it
            ax.text(left + width / 2, lane - height / 2 - 0.02, label, ha="center",
                    va="bottom", fontsize=FONT_SIZE, color=color)


def plot_timeline(timelines: Mapping[str, Sequence[Event]],
                  title: str = "") -> Figure:
    """Draw a Gantt chart per timeline: a row per stage, a bar per F or B (12, 13)."""
    fig, axes = subplots(len(timelines), 1, sharex=True, squeeze=False)
    spans = {name: max(end for *_, end in ev) - min(start for *_, start, _ in ev)
             for name, ev in timelines.items()}
    for ax, (name, events) in zip(axes[:, 0], timelines.items(), strict=True):
        stages = sorted({stage for stage, *_ in events})
        ax.set_yticks(stages, [f"stage {s + 1}" for s in stages], fontsize=FONT_SIZE)
        ax.set_ylim(max(stages) + 0.45, min(stages) - 0.85)
        ax.tick_params(axis="x", labelsize=FONT_SIZE)
        ax.set_title(f"{name}: {spans[name] * 1e3:.0f} ms, idle "
                     f"{idle_fraction(events):.0%}", fontsize=FONT_SIZE + 1)
    axes[-1, 0].set_xlabel("time (ms); blue = forward (F), orange = backward (B)",
                           fontsize=FONT_SIZE)
    if title:
        fig.suptitle(title, fontsize=TITLE_SIZE)
    for ax, events in zip(axes[:, 0], timelines.values(), strict=True):
        first = min(start for *_, start, _ in events)
        bars = [(stage, (start - first) * 1e3, (end - start) * 1e3,
                 PHASES["forward" if kind == "F" else "backward"], f"{kind}{i}")
                for stage, kind, i, start, end in events]
        _lanes(ax, bars, 0.5, max(spans.values()) * 1e3, above=True)
    return fig


def _kind(event: Any) -> str:
    """Return what a trace bar is coloured by: its collective, else its phase."""
    name = event.name.lower()
    found = (kind for kind, pattern in _COLLECTIVES.items() if re.search(pattern, name))
    return next(found, event.phase)


def plot_trace(events: Sequence[Any], title: str = "", max_depth: int = 3) -> Figure:
    """Draw trace events on lanes, one per row and depth, by phase (06, 07, 11).

    `events` are scripts/prof_traces.py's TraceEvents; those deeper than `max_depth - 1`
    are left out; a bar carries its (shortened) name where the name fits. A collective
    (all-reduce, all-gather, ...) gets its own colour and legend entry, whatever phase
    it ran in.
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
    phases = list(dict.fromkeys(_kind(e) for e in shown))
    others = iter(PALETTE[3:] * (1 + len(phases) // len(PALETTE[3:])))
    colors = {p: PHASES.get(p) or (next(others) if p else _GREY) for p in phases}
    t0 = min(e.start for e in shown)
    span = max(e.end for e in shown) - t0 or 1.0  # ms
    fig, ax = subplots()
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels([row if d == min(dd for r, dd in lanes if r == row)
                        else f"  depth {d}" for row, d in lanes])
    ax.invert_yaxis()
    for i in range(1, len(lanes)):
        if lanes[i][0] != lanes[i - 1][0]:
            ax.axhline(i - 0.5, color="black", linewidth=0.8)
    handles = [Patch(color=colors[p], label=p or "unlabelled") for p in phases]
    ax.legend(handles=handles, fontsize=FONT_SIZE, loc="upper right",
              ncol=min(len(phases), 4),
              bbox_to_anchor=(1.0, -0.14), frameon=False)
    _finish(ax, title, "", "ms from the first event", grid="x")
    bars = [(lane_of[(e.row, e.depth)], e.start - t0, e.duration, colors[_kind(e)],
             _PREFIXES.sub("", e.name)) for e in shown]
    _lanes(ax, bars, 0.8, span * 1.01)
    return fig

