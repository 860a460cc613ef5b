"""Plot helpers (bars, lines, pipeline timelines, traces) draw what they are given,
readably, and refuse mismatched data."""

from __future__ import annotations

import subprocess
import sys
from collections import namedtuple

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from conftest import assert_readable  # noqa: E402

from helpers import bar_chart, line_plot, plotting  # noqa: E402
from helpers.plotting import plot_timeline, plot_trace  # noqa: E402


def test_bar_chart_labels_each_bar_readably():
    fig = bar_chart(["cpu", "gpu"], [2.0, 0.5], title="t", ylabel="s")
    ax = fig.axes[0]
    assert [p.get_height() for p in ax.patches] == [2.0, 0.5]
    assert [t.get_text() for t in ax.texts] == ["2", "0.5"]
    assert_readable(fig)
    plt.close(fig)


def test_bar_chart_rejects_mismatch():
    with pytest.raises(ValueError, match="2 labels but 1 values"):
        bar_chart(["a", "b"], [1.0])


def test_line_plot_draws_each_series_readably():
    fig = line_plot([1, 2, 4], {"cpu": [3, 2, 1], "gpu": [1, 1, 1]}, logx=True,
                    logy=True, title="sweep", xlabel="n", ylabel="ms")
    ax = fig.axes[0]
    assert [ln.get_label() for ln in ax.lines] == ["cpu", "gpu"]
    assert ax.get_xscale() == "log" and ax.get_legend() is not None
    assert_readable(fig)  # log axes draw minor tick labels too
    plt.close(fig)


def test_line_plot_rejects_mismatch():
    with pytest.raises(ValueError, match="has 2 points"):
        line_plot([1, 2, 3], {"a": [1, 2]})


def test_subplots_uses_the_course_size_and_lets_callers_override():
    fig, ax = plotting.subplots()
    assert tuple(fig.get_size_inches()) == plotting.FIGSIZE and fig.dpi == plotting.DPI
    plt.close(fig)
    fig, axes = plotting.subplots(2, 1, figsize=(7.0, 5.0))
    assert len(axes) == 2 and tuple(fig.get_size_inches()) == (7.0, 5.0)
    plt.close(fig)


@pytest.mark.slow  # a child Python, which has not imported matplotlib yet
def test_import_has_no_side_effects():
    """Importing the helpers neither imports matplotlib nor changes its settings."""
    code = ("import sys, helpers, helpers.plotting\n"
            "assert 'matplotlib' not in sys.modules, 'helpers imported matplotlib'\n"
            "import matplotlib\n"
            "changed = {k for k, v in matplotlib.rcParams.items()\n"
            "           if k != 'backend' and v != matplotlib.rcParamsDefault[k]}\n"
            "helpers.bar_chart(['a'], [1.0])\n"
            "changed2 = {k for k, v in matplotlib.rcParams.items()\n"
            "            if k != 'backend' and v != matplotlib.rcParamsDefault[k]}\n"
            "assert changed2 == changed, f'drawing changed: {changed2 - changed}'\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True,
                            text=True, env={"MPLBACKEND": "Agg"}, check=False)
    assert result.returncode == 0, result.stderr[-2000:]


def _labels(ax, axis):
    """Return the non-empty tick labels of `axis` ("x" or "y") inside the view."""
    ax.figure.canvas.draw()
    ticks = ax.get_yticklabels() if axis == "y" else ax.get_xticklabels()
    lo, hi = sorted(ax.get_ylim() if axis == "y" else ax.get_xlim())
    return [t.get_text() for t in ticks
            if t.get_text() and lo <= (t.get_position()[1 if axis == "y" else 0]) <= hi]


@pytest.mark.parametrize("lo, hi", [(20.0, 206.0), (30.0, 60.0), (0.02, 0.9)])
def test_a_log_axis_within_a_few_decades_labels_values_between_powers_of_ten(lo, hi):
    """A sweep from 20 to 206 GFLOP/s once drew a single label, "10²"."""
    fig = line_plot([32, 64, 128, 256], {"cpu": [lo, (lo + hi) / 2, hi, hi]},
                    logx=True, logy=True, ylabel="GFLOP/s")
    labels = _labels(fig.axes[0], "y")
    assert len(labels) >= 3, labels
    values = [float(t.replace("\u2212", "-")) for t in labels]  # plain numbers
    assert all(lo / 2 <= v <= hi * 2 for v in values), values
    assert_readable(fig)
    plt.close(fig)


def test_a_log_axis_over_many_decades_keeps_the_decades():
    fig = line_plot([1, 2, 4], {"gpu": [1.0, 1e3, 1e6]}, logy=True)
    labels = _labels(fig.axes[0], "y")
    assert 3 <= len(labels) <= 10, labels
    plt.close(fig)


# A trace event as notebooks/scripts/prof_traces.py's TraceEvent holds one.
ev = namedtuple("ev", "name row start duration depth phase end")


def test_trace_colours_unknown_phases_and_refuses_nothing_to_draw():
    events = [ev("copy 0", "side stream", 0.0, 2.0, 0, "copy", 2.0),
              ev("compute 0", "main stream", 2.0, 3.0, 0, "compute", 5.0)]
    fig = plot_trace(events)
    colors = {p.get_facecolor() for p in fig.axes[0].patches if p.get_width() > 0}
    assert len(colors) == 2, colors
    plt.close(fig)
    with pytest.raises(ValueError, match="no events"):
        plot_trace([ev("deep", "r", 0.0, 1.0, 5, "", 1.0)])
    with pytest.raises(ValueError, match="max_depth"):
        plot_trace(events, max_depth=0)


def test_trace_gives_each_collective_its_own_colour_and_legend_entry():
    """Notebook 11's all-reduces ran inside backward and were drawn as backward."""
    events = [ev("forward", "CPU thread 0", 0.0, 2.0, 0, "forward", 2.0),
              ev("backward", "CPU thread 0", 2.0, 4.0, 0, "backward", 6.0),
              ev("gloo:all_reduce", "CPU thread 1", 3.0, 2.0, 0, "backward", 5.0),
              ev("nccl:all_gather", "CPU thread 1", 5.0, 1.0, 0, "backward", 6.0),
              ev("aten::broadcast_tensors", "CPU thread 0", 2.0, 1.0, 1, "backward",
                 3.0)]
    fig = plot_trace(events)
    ax = fig.axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["forward", "backward", "all-reduce", "all-gather"], legend
    colors = [p.get_facecolor() for p in ax.patches if p.get_width() > 0]
    assert len(set(colors)) == 4, colors  # broadcast_tensors is no collective
    handles = {t.get_text(): h.get_facecolor()
               for t, h in zip(ax.get_legend().get_texts(),
                               ax.get_legend().legend_handles, strict=True)}
    assert colors[2] == handles["all-reduce"] != handles["backward"] == colors[1]
    assert_readable(fig)
    plt.close(fig)


def test_timeline_draws_one_chart_per_timeline():
    events = [(0, "F", 0, 0.0, 0.01), (1, "F", 0, 0.01, 0.02), (1, "B", 0, 0.02, 0.04),
              (0, "B", 0, 0.04, 0.05)]
    fig = plot_timeline({"a": events, "b": events[:2]}, title="t")
    assert len(fig.axes) == 2 and "idle 50%" in fig.axes[1].get_title()
    assert tuple(fig.get_size_inches()) == (7, 4) and fig.dpi == 100
    plt.close(fig)


def test_timeline_labels_every_bar_even_short_ones():
    # one long backward and very short forwards, as stage 2 has with small batches
    events = [(0, "F", i, i * 0.01, i * 0.01 + 0.009) for i in range(4)]
    events += [(1, "F", i, 0.04 + i * 0.2, 0.041 + i * 0.2) for i in range(4)]
    events += [(1, "B", i, 0.041 + i * 0.2, 0.2 + i * 0.2) for i in range(4)]
    fig = plot_timeline({"t": events})
    labels = sorted(t.get_text() for t in fig.axes[0].texts)
    assert labels == sorted(f"{kind}{micro}" for _, kind, micro, _, _ in events)
    assert min(t.get_fontsize() for t in fig.axes[0].texts) >= 10
    plt.close(fig)
