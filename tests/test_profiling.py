"""helpers.profiling reads Chrome traces (nesting, rows, phases) and splits training
steps into their parts; plot_trace draws."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from conftest import assert_readable  # noqa: E402
from torch.profiler import ProfilerActivity, profile, record_function  # noqa: E402

from helpers.plotting import plot_trace  # noqa: E402
from helpers.profiling import (  # noqa: E402
    FIXES,
    PARTS,
    StepBreakdown,
    TraceEvent,
    diagnose,
    step_breakdown,
    trace_events,
)


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


def test_a_file_and_a_gzip_file_read_the_same(tmp_path):
    plain, packed = tmp_path / "t.json", tmp_path / "t.json.gz"
    plain.write_text(json.dumps(GPU_TRACE))
    with gzip.open(packed, "wt") as f:
        json.dump(GPU_TRACE, f)
    assert trace_events(plain) == trace_events(packed) == trace_events(GPU_TRACE)
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


def _cpu_rank(second_step=True):
    """A CPU-only DDP rank: data, compute, an all-reduce on gloo's thread, .item()."""
    events = [_x("ProfilerStep#1", 0.0, 100.0, cat="user_annotation"),
              _x("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 0.0,
                 10.0, cat="user_annotation"),
              _x("aten::stack", 2.0, 5.0),  # inside the data wait: not compute
              _x("aten::conv2d", 10.0, 50.0),
              _x("gloo:all_reduce", 50.0, 30.0, cat="user_annotation", tid=2),
              _x("aten::item", 85.0, 5.0), _x("aten::_local_scalar_dense", 86.0, 3.0)]
    if second_step:
        events += [_x("ProfilerStep#2", 100.0, 50.0, cat="user_annotation"),
                   _x("aten::mm", 100.0, 40.0)]
    return {"traceEvents": events}


def test_a_cpu_step_splits_into_parts_that_sum_to_it():
    b = step_breakdown([_cpu_rank(), _cpu_rank(second_step=False)])
    # Step 1 (both ranks): sync 5, data 10, compute 50, exposed comm 20 (10 of its 30
    # hide behind compute), other 15. Step 2 (rank 0): compute 40, other 10. In us:
    want = {"sync": 10, "data": 20, "compute": 140, "comm": 40, "other": 40}
    assert b.parts == pytest.approx({k: v / 3e3 for k, v in want.items()}), b.parts
    assert list(b.parts) == list(PARTS)
    assert b.step == pytest.approx(sum(b.parts.values())) == pytest.approx(0.250 / 3)
    assert b.shares == pytest.approx([90 / 150, 50 / 100]), "compute / step per rank"


def test_a_gpu_step_counts_kernels_as_compute_and_nccl_as_communication():
    gpu = {"traceEvents": [
        _x("ProfilerStep#1", 0.0, 100.0, cat="user_annotation"),
        _x("aten::mm", 5.0, 2.0),  # the host's launch: the GPU computes
        _x("gemm", 10.0, 40.0, cat="kernel", pid=0, tid=7),
        _x("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 40.0, 30.0, cat="kernel", pid=0,
           tid=9),
        _x("cudaStreamSynchronize", 80.0, 10.0, cat="cuda_runtime")]}
    b = step_breakdown([gpu])
    want = {"sync": 10, "data": 0, "compute": 40, "comm": 20, "other": 30}
    assert b.parts == pytest.approx({k: v / 1e3 for k, v in want.items()}), b.parts


def test_a_trace_without_profiler_steps_is_refused():
    with pytest.raises(ValueError, match="ProfilerStep"):
        step_breakdown([GPU_TRACE])
    with pytest.raises(ValueError, match="ProfilerStep"):
        step_breakdown([])


def _breakdown(compute, comm, shares):
    parts = {"sync": 0.1, "data": 0.2, "compute": compute, "comm": comm, "other": 0.5}
    return StepBreakdown(sum(parts.values()), parts, shares)


def test_diagnose_bands_the_compute_share_and_names_the_worst_overhead():
    healthy = diagnose(_breakdown(90.0, 5.0, [0.93, 0.95]))
    assert "mostly compute" in healthy and "largest overhead: comm" in healthy, healthy
    tiny = diagnose(_breakdown(2.0, 4.0, [0.25, 0.35]))
    assert "mostly overhead" in tiny and FIXES["comm"] in tiny, tiny
    noisy = diagnose(_breakdown(85.0, 10.0, [0.7, 0.9]))  # the ranks straddle an edge
    assert "too noisy to tell" in noisy, noisy
    shared = diagnose(_breakdown(85.0, 10.0, [0.7, 0.9]), banded=False)
    want = "89 % compute (ranks 70 % to 90 %); largest overhead: comm"
    assert shared.startswith(want), shared


def test_importing_touches_neither_cuda_nor_matplotlib():
    code = ("import sys, torch, helpers.profiling, helpers.plotting; "
            "print(torch.cuda.is_initialized(), 'matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False"], out
