"""Plot helpers draw what they are given, readably, and refuse mismatched data."""

from __future__ import annotations

import subprocess
import sys

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from conftest import assert_readable  # noqa: E402

from helpers import bar_chart, line_plot, plotting  # noqa: E402


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
