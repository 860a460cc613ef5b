"""Plot helpers draw what they are given, and refuse mismatched data."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from helpers import bar_chart, line_plot  # noqa: E402


def test_bar_chart_labels_each_bar():
    fig = bar_chart(["cpu", "gpu"], [2.0, 0.5], title="t", ylabel="s")
    ax = fig.axes[0]
    assert [p.get_height() for p in ax.patches] == [2.0, 0.5]
    assert [t.get_text() for t in ax.texts] == ["2", "0.5"]
    assert fig.get_size_inches().tolist() == [5.0, 3.0]
    plt.close(fig)


def test_bar_chart_rejects_mismatch():
    with pytest.raises(ValueError, match="2 labels but 1 values"):
        bar_chart(["a", "b"], [1.0])


def test_line_plot_draws_each_series():
    fig = line_plot([1, 2, 4], {"cpu": [3, 2, 1], "gpu": [1, 1, 1]}, logx=True)
    ax = fig.axes[0]
    assert [ln.get_label() for ln in ax.lines] == ["cpu", "gpu"]
    assert ax.get_xscale() == "log" and ax.get_legend() is not None
    plt.close(fig)


def test_line_plot_rejects_mismatch():
    with pytest.raises(ValueError, match="has 2 points"):
        line_plot([1, 2, 3], {"a": [1, 2]})
