"""notebooks/scripts/prof_step.py: its options, how step_breakdown splits a step
into parts, then one real 2-rank gloo launch whose traces it reads."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import NOTEBOOK_DIR, load_script

from helpers.launch import torchrun

SCRIPT = NOTEBOOK_DIR / "scripts" / "prof_step.py"
if str(SCRIPT.parent) not in sys.path:  # the script imports its siblings
    sys.path.insert(0, str(SCRIPT.parent))


@pytest.fixture(scope="module")
def script():
    return load_script(SCRIPT)


def test_args_default_to_every_run_and_refuse_zero_steps(script):
    args = script.parse_args([])
    assert args.runs == ["healthy", "tiny", "item"], args.runs
    assert (args.steps, args.batch, args.device) == (4, 32, "auto")
    with pytest.raises(SystemExit):
        script.parse_args(["--steps", "0"])


def test_without_torchrun_it_says_how_to_start(script, monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    with pytest.raises(SystemExit, match="start me with torchrun"):
        script.main(["--runs", "tiny"])


def _x(name, ts, dur, cat="cpu_op", pid=100, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts,
            "dur": dur, "args": args}


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


def test_a_cpu_step_splits_into_parts_that_sum_to_it(script):
    b = script.step_breakdown([_cpu_rank(), _cpu_rank(second_step=False)])
    # Step 1 (both ranks): sync 5, data 10, compute 50, exposed comm 20 (10 of its 30
    # hide behind compute), other 15. Step 2 (rank 0): compute 40, other 10. In us:
    want = {"sync": 10, "data": 20, "compute": 140, "comm": 40, "other": 40}
    assert b.parts == pytest.approx({k: v / 3e3 for k, v in want.items()}), b.parts
    assert list(b.parts) == list(script.PARTS)
    assert b.step == pytest.approx(sum(b.parts.values())) == pytest.approx(0.250 / 3)
    assert b.shares == pytest.approx([90 / 150, 50 / 100]), "compute / step per rank"


def test_a_gpu_step_counts_kernels_as_compute_and_nccl_as_communication(script):
    gpu = {"traceEvents": [
        _x("ProfilerStep#1", 0.0, 100.0, cat="user_annotation"),
        _x("aten::mm", 5.0, 2.0),  # the host's launch: the GPU computes
        _x("gemm", 10.0, 40.0, cat="kernel", pid=0, tid=7),
        _x("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 40.0, 30.0, cat="kernel", pid=0,
           tid=9),
        _x("cudaStreamSynchronize", 80.0, 10.0, cat="cuda_runtime")]}
    b = script.step_breakdown([gpu])
    want = {"sync": 10, "data": 0, "compute": 40, "comm": 20, "other": 30}
    assert b.parts == pytest.approx({k: v / 1e3 for k, v in want.items()}), b.parts


def test_a_trace_without_profiler_steps_is_refused(script):
    with pytest.raises(ValueError, match="ProfilerStep"):
        script.step_breakdown([{"traceEvents": [_x("aten::mm", 0.0, 5.0)]}])
    with pytest.raises(ValueError, match="ProfilerStep"):
        script.step_breakdown([])


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="torchrun on Linux")
def test_two_gloo_ranks_write_traces_that_break_down(script, tmp_path):
    result = torchrun(SCRIPT, "--runs", "tiny", "item", "--steps", "2", "--batch", "2",
                      "--image-size", "8", "--width", "4", "--device", "cpu", "--out",
                      tmp_path, nproc=2, timeout=180, echo=False)
    assert any(line.startswith("item: 2 steps") for line in result.lines(0)), (
        result.output)
    for run in ("tiny", "item"):
        paths = [tmp_path / f"{run}_rank{r}.json" for r in (0, 1)]
        events = json.loads(paths[0].read_text())["traceEvents"]
        names = [e.get("name", "") for e in events]
        steps = [n for n in names if n.startswith("ProfilerStep#")]
        assert len(steps) == (8 if run == "tiny" else 2), steps  # tiny: 4x the steps
        assert "gloo:all_reduce" in names, "no all-reduce in the trace"
        b = script.step_breakdown(paths)
        assert b.parts["compute"] > 0 and len(b.shares) == 2, b
        assert ("aten::item" in names) == (run == "item"), run  # the planted sync
