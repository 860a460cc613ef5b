"""Draw the course's small, consistent bar charts and line plots."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt

__all__ = ["bar_chart", "line_plot"]

_FIGSIZE = (5.0, 3.0)
_DPI = 80


def _finish(ax: plt.Axes, title: str, ylabel: str, xlabel: str = "") -> plt.Figure:
    """Label `ax`, tidy its figure and return the figure."""
    ax.set_title(title, fontsize=10)
    ax.set_ylabel(ylabel)
    if xlabel:
        ax.set_xlabel(xlabel)
    ax.grid(axis="y", alpha=0.3)
    ax.figure.tight_layout()
    return ax.figure


def bar_chart(labels: Sequence[str], values: Sequence[float], title: str = "",
              ylabel: str = "", errors: Sequence[float] | None = None,
              fmt: str = "{:.3g}") -> plt.Figure:
    """Draw one bar per label, with its value written above it."""
    if len(labels) != len(values):
        raise ValueError(f"{len(labels)} labels but {len(values)} values")
    fig, ax = plt.subplots(figsize=_FIGSIZE, dpi=_DPI)
    bars = ax.bar(list(labels), list(values), yerr=errors, capsize=3, color="#4C72B0")
    ax.bar_label(bars, labels=[fmt.format(v) for v in values], fontsize=8)
    ax.margins(y=0.15)
    return _finish(ax, title, ylabel)


def line_plot(x: Sequence[float], ys: dict[str, Sequence[float]], title: str = "",
              xlabel: str = "", ylabel: str = "", logx: bool = False,
              logy: bool = False) -> plt.Figure:
    """Draw one marked line per entry of `ys` against the shared `x`."""
    fig, ax = plt.subplots(figsize=_FIGSIZE, dpi=_DPI)
    for name, y in ys.items():
        if len(y) != len(x):
            raise ValueError(f"series {name!r} has {len(y)} points, x has {len(x)}")
        ax.plot(list(x), list(y), marker="o", markersize=3, label=name)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    if len(ys) > 1:
        ax.legend(fontsize=8)
    return _finish(ax, title, ylabel, xlabel)
