"""Draw the course's bar charts and line plots, readable on a laptop and a projector.

Every figure is 7 x 4 in at 100 dpi (700 x 400 px) with no text under 10 pt. Sizes
are set on each figure, never in matplotlib's global settings: importing this module
changes nothing (it does not even import matplotlib until a plot is drawn).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["DPI", "FIGSIZE", "FONT_SIZE", "TITLE_SIZE", "bar_chart", "line_plot",
           "subplots"]

FIGSIZE = (7.0, 4.0)  # inches
DPI = 100
FONT_SIZE = 10  # points: tick labels, bar labels, legends; the smallest text drawn
TITLE_SIZE = 12


def subplots(nrows: int = 1, ncols: int = 1, **kwargs: Any) -> tuple[Figure, Any]:
    """Return `plt.subplots(...)` at the course's size and dpi (kwargs may override)."""
    import matplotlib.pyplot as plt

    kwargs.setdefault("figsize", FIGSIZE)
    kwargs.setdefault("dpi", DPI)
    return plt.subplots(nrows, ncols, **kwargs)


def _finish(ax: Axes, title: str, ylabel: str, xlabel: str = "") -> Figure:
    """Label `ax` at readable sizes, tidy its figure and return the figure."""
    ax.set_title(title, fontsize=TITLE_SIZE)
    ax.set_ylabel(ylabel, fontsize=FONT_SIZE + 1)
    ax.set_xlabel(xlabel, fontsize=FONT_SIZE + 1)
    ax.tick_params(which="both", labelsize=FONT_SIZE)
    ax.grid(axis="y", alpha=0.3)
    ax.figure.tight_layout()
    return ax.figure


def bar_chart(labels: Sequence[str], values: Sequence[float], title: str = "",
              ylabel: str = "", errors: Sequence[float] | None = None,
              fmt: str = "{:.3g}") -> Figure:
    """Draw one bar per label, with its value written above it."""
    if len(labels) != len(values):
        raise ValueError(f"{len(labels)} labels but {len(values)} values")
    fig, ax = subplots()
    bars = ax.bar(list(labels), list(values), yerr=errors, capsize=4, color="#4C72B0")
    ax.bar_label(bars, labels=[fmt.format(v) for v in values], fontsize=FONT_SIZE)
    ax.margins(y=0.15)
    return _finish(ax, title, ylabel)


def line_plot(x: Sequence[float], ys: dict[str, Sequence[float]], title: str = "",
              xlabel: str = "", ylabel: str = "", logx: bool = False,
              logy: bool = False) -> Figure:
    """Draw one marked line per entry of `ys` against the shared `x`."""
    fig, ax = subplots()
    for name, y in ys.items():
        if len(y) != len(x):
            raise ValueError(f"series {name!r} has {len(y)} points, x has {len(x)}")
        ax.plot(list(x), list(y), marker="o", markersize=5, label=name)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    if len(ys) > 1:
        ax.legend(fontsize=FONT_SIZE)
    return _finish(ax, title, ylabel, xlabel)
