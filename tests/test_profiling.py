"""notebooks/scripts/prof_traces.py reads Chrome traces (nesting, rows, phases);
helpers.plotting.plot_trace draws them."""

from __future__ import annotations

import json
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from conftest import NOTEBOOK_DIR, assert_readable  # noqa: E402
from torch.profiler import ProfilerActivity, profile, record_function  # noqa: E402

from helpers.plotting import plot_trace  # noqa: E402

sys.path.insert(0, str(NOTEBOOK_DIR / "scripts"))  # as the notebooks import it
from prof_traces import TraceEvent, trace_events  # noqa: E402


def _x(name, ts, dur, cat="cpu_op", pid=100, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts,
            "dur": dur, "args": args}


# One step as a CUDA run writes it: labels and ops on the main thread, backward on
# autograd's thread, kernels on a GPU stream linked to their launches by correlation.
GPU_TRACE = {"traceEvents": [
    {"ph": "M", "name": "process_name", "pid": 100, "args": {"name": "python"}},
    _x("forward", 1000.0, 100.0, cat="user_annotation"),
    _x("aten::linear", 1010.0, 50.0),
    _x("aten::addmm", 1020.0, 30.0),
    _x("cudaLaunchKernel", 1030.0, 5.0, cat="cuda_runtime", correlation=7),
    _x("backward", 1100.0, 200.0, cat="user_annotation"),
    _x("evaluate_function: AddmmBackward0", 1150.0, 60.0, tid=2),
    _x("cudaLaunchKernel", 1160.0, 5.0, cat="cuda_runtime", tid=2, correlation=8),
    _x("gemm_fwd", 1040.0, 80.0, cat="kernel", pid=0, tid=7, device=0, stream=7,
       correlation=7),
    _x("gemm_bwd", 1170.0, 90.0, cat="kernel", pid=0, tid=7, device=0, stream=7,
       correlation=8),
    _x("Memcpy HtoD", 990.0, 8.0, cat="gpu_memcpy", pid=0, tid=7, device=0, stream=7),
    _x("PyTorch Profiler (0)", 0.0, 9e9, cat="Trace", pid="Spans"),
    {"ph": "f", "cat": "ac2g", "name": "ac2g", "pid": 0, "tid": 7, "ts": 1040.0},
]}


def test_rows_depths_and_times_of_a_gpu_trace():
    events = trace_events(GPU_TRACE)
    by_name = {e.name: e for e in events}
    assert set(by_name) == {
        "forward", "aten::linear", "aten::addmm", "cudaLaunchKernel", "backward",
        "evaluate_function: AddmmBackward0", "gemm_fwd", "gemm_bwd", "Memcpy HtoD",
    }, sorted(by_name)
    assert by_name["Memcpy HtoD"].start == 0.0  # the earliest event is the origin
    assert by_name["forward"].start == pytest.approx(0.010)  # ms
    assert by_name["gemm_bwd"].duration == pytest.approx(0.090)
    assert by_name["gemm_bwd"].end == pytest.approx(0.270)
    assert [by_name[n].depth for n in ("forward", "aten::linear", "aten::addmm")] == [
        0, 1, 2]
    assert by_name["gemm_fwd"].depth == by_name["gemm_bwd"].depth == 0  # in sequence
    rows = {e.row for e in events}
    assert rows == {"CPU thread 0", "CPU thread 1", "GPU 0 stream 7"}, rows
    assert by_name["evaluate_function: AddmmBackward0"].row == "CPU thread 1"
    assert [e.start for e in events] == sorted(e.start for e in events)


def test_phases_follow_labels_and_correlation_ids():
    events = trace_events(GPU_TRACE)
    phase = {e.name: e.phase for e in events}
    assert phase["aten::addmm"] == "forward"
    assert phase["gemm_fwd"] == "forward", "a kernel takes its launch's phase"
    # Autograd's thread has no label of its own: the label running then counts.
    assert phase["evaluate_function: AddmmBackward0"] == "backward"
    assert phase["gemm_bwd"] == "backward"
    assert phase["Memcpy HtoD"] == "", "no launch with its correlation id: unlabelled"
    assert phase["backward"] == "backward"
    assert {e.phase for e in trace_events(GPU_TRACE, labels=())} == {""}


def test_a_file_and_a_dict_read_the_same(tmp_path):
    plain = tmp_path / "t.json"
    plain.write_text(json.dumps(GPU_TRACE))
    assert trace_events(plain) == trace_events(GPU_TRACE)
    assert trace_events({"traceEvents": []}) == []


def _labelled_step():
    net = torch.nn.Linear(8, 4)
    with record_function("forward"):
        loss = net(torch.randn(16, 8)).square().mean()
    with record_function("backward"):
        loss.backward()


@pytest.mark.filterwarnings("ignore:.*Profiler clears events")  # older torch says so
def test_a_real_cpu_profile_nests_ops_under_their_labels():
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        _labelled_step()
    events = trace_events(prof)
    labels = [e for e in events if e.name in ("forward", "backward")]
    assert [e.name for e in labels] == ["forward", "backward"], labels
    assert labels[0].end <= labels[1].start + 1e-6, "forward ends before backward"
    ops = [e for e in events if e.name.startswith("aten::") and e.phase == "forward"]
    assert ops and all(e.depth > labels[0].depth for e in ops), ops
    assert all(labels[0].start <= e.start and e.end <= labels[0].end + 1e-6
               for e in ops), "a forward op outside the forward label"
    assert {e.row for e in events if e.phase} == {"CPU thread 0"}


def test_plot_draws_one_lane_per_row_and_depth_and_labels_wide_bars():
    events = trace_events(GPU_TRACE)
    fig = plot_trace(events, title="step", max_depth=2)
    ax = fig.axes[0]
    ticks = [t.get_text() for t in ax.get_yticklabels()]
    assert ticks == ["CPU thread 0", "  depth 1", "CPU thread 1", "  depth 1",
                     "GPU 0 stream 7"], ticks  # CPU rows first, then the GPU's
    bars = [p for p in ax.patches if p.get_width() > 0]
    assert len(bars) == sum(e.depth < 2 for e in events), len(bars)
    texts = {t.get_text() for t in ax.texts}
    assert {"forward", "backward", "gemm_fwd", "gemm_bwd", "linear"} <= texts, texts
    assert "addmm" not in texts, "depth 2 is past max_depth"
    assert any(t.endswith("\u2026") for t in texts), "a long name is cut short"
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for text in ax.texts:  # each label inside its own bar
        box = text.get_window_extent(renderer)
        bar = next(p for p in bars if p.get_window_extent(renderer).contains(
            box.x0 + box.width / 2, box.y0 + box.height / 2))
        assert box.width <= bar.get_window_extent(renderer).width, text.get_text()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["unlabelled", "forward", "backward"], legend
    assert_readable(fig)
    plt.close(fig)


def test_plot_colours_unknown_phases_and_refuses_nothing_to_draw():
    events = [TraceEvent("copy 0", "side stream", 0.0, 2.0, phase="copy"),
              TraceEvent("compute 0", "main stream", 2.0, 3.0, phase="compute")]
    fig = plot_trace(events)
    colors = {p.get_facecolor() for p in fig.axes[0].patches if p.get_width() > 0}
    assert len(colors) == 2, colors
    plt.close(fig)
    with pytest.raises(ValueError, match="no events"):
        plot_trace([TraceEvent("deep", "r", 0.0, 1.0, depth=5)])
    with pytest.raises(ValueError, match="max_depth"):
        plot_trace(events, max_depth=0)


@pytest.mark.slow
def test_importing_plotting_touches_neither_cuda_nor_matplotlib():
    code = ("import sys, torch, helpers.plotting; "
            "print(torch.cuda.is_initialized(), 'matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False"], out
