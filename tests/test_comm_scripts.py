"""Tests of notebook 11's scripts: their parts in one process, then one 3-rank run."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import pytest
import torch
from conftest import NOTEBOOK_DIR, load_script

from helpers.launch import torchrun

SCRIPTS = NOTEBOOK_DIR / "scripts"
linux_only = pytest.mark.skipif(sys.platform != "linux", reason="torchrun on Linux")


@pytest.fixture(scope="module")
def coll():
    return load_script(SCRIPTS / "comm_collectives.py")


@pytest.fixture(scope="module")
def buckets():
    return load_script(SCRIPTS / "comm_buckets.py")


def test_busbw_factor_is_nccl_tests_all_reduce_factor(coll):
    assert [coll.busbw_factor(n) for n in (1, 2, 4, 8)] == [0.0, 1.0, 1.5, 1.75]


def test_max_kib_cuts_the_sweep_of_sizes_four_times_apart(coll):
    assert coll.sweep_sizes(4) == coll.sweep_sizes(15) == [1024, 4096]
    full = coll.sweep_sizes(64 * 1024)  # the default: up to 64 MiB
    assert (full[0], full[-1], len(full)) == (1024, 64 * 2**20, 9), full
    assert all(b == 4 * a for a, b in zip(full, full[1:], strict=False)), full
    assert coll.sweep_sizes(10**9) == full, "nothing above 64 MiB is swept"
    with pytest.raises(ValueError, match="starts at 1 KiB"):
        coll.sweep_sizes(0)


def test_ring_on_one_rank_sends_nothing_and_changes_nothing(coll, group):
    t = torch.arange(5.0)
    assert coll.ring_all_reduce(t) == 0
    assert torch.equal(t, torch.arange(5.0))


def _event(name, ts, dur, **extra):
    return {"ph": "X", "name": name, "ts": ts, "dur": dur, **extra}


def test_overlap_fraction_counts_comm_time_inside_backward_only(buckets):
    fn = "autograd::engine::evaluate_function: AddmmBackward0"
    label = {"cat": "user_annotation"}
    cpu = {"traceEvents": [_event("backward", 0, 100, **label), _event(fn, 10, 40),
                           _event("gloo:all_reduce", 30, 40),  # 20 of 40 inside
                           _event("gloo:all_reduce", 60, 20)]}  # after compute
    assert buckets.overlap_fraction(cpu) == pytest.approx(20 / 60)
    launch = {"cat": "cuda_runtime", "args": {"correlation": 7}}
    gpu = {"traceEvents": [
        _event("backward", 50, 5, cat="gpu_user_annotation"),  # the GPU's copy
        _event("backward", 0, 10, **label), _event("cudaLaunchKernel", 5, 1, **launch),
        _event("gemm", 20, 30, cat="kernel", args={"correlation": 7}),
        _event("late_copy", 90, 10, cat="kernel", args={"correlation": 8}),
        _event("ncclDevKernel_AllReduce", 40, 20, cat="kernel", args={})]}
    assert buckets.overlap_fraction(gpu) == pytest.approx(10 / 20)


def test_seen_buckets_match_the_cap(buckets, group):
    x, y = buckets.batch(32, 8, 0, torch.device("cpu"))
    for cap_mb, count in ((4096 / 2**20, 4), (8192 / 2**20, 2), (25, 1)):
        model = buckets.make_model(layers=4, width=32)  # 4 KiB + 128 B per layer
        ddp = buckets.wrap(model, torch.device("cpu"), cap_mb)
        seen = buckets.seen_buckets(ddp, x, y)
        assert [i for i, _ in seen] == list(range(count)), (cap_mb, seen)
        assert sum(b for _, b in seen) == sum(
            p.numel() * 4 for p in model.parameters())


def test_count_bytes_adds_up_what_all_reduce_is_given(buckets, group):
    sent = []
    fake = buckets.count_bytes(sent)
    fake(torch.zeros(3, dtype=torch.bfloat16))
    fake(torch.zeros(2))
    assert sent == [6, 8]


@pytest.mark.slow
@linux_only
def test_three_ranks_run_the_collectives_and_the_ring(tmp_path):
    torchrun(SCRIPTS / "comm_collectives.py", "--out", tmp_path, "--device", "cpu",
             "--max-kib", 4, "--ring-numel", 1001, nproc=3, echo=False, timeout=120)
    held = json.loads((tmp_path / "collectives.json").read_text())
    before = torch.tensor(held["all_reduce"]["before"])
    assert held["all_reduce"]["after"] == [before.sum(0).tolist()] * 3
    assert held["reduce_scatter"]["after"] == [[v] for v in before.sum(0).tolist()]
    bw = json.loads((tmp_path / "bandwidth.json").read_text())
    ring = bw["ring"]
    assert abs(ring["sent"] - 2 * 2 / 3 * 1001 * 4) <= 2 * 2 * 4, ring  # uneven chunks
    assert ring["max_diff"] <= 1e-6 * ring["max_abs"], ring
    rows = bw["sweeps"]["gloo"]
    assert [r["bytes"] for r in rows] == [1024, 4096]
    assert all(r["busbw"] == pytest.approx(r["algbw"] * 4 / 3) for r in rows)


def test_an_earlier_runs_flight_record_is_not_left_as_this_runs(buckets, group,
                                                                tmp_path):
    stale = tmp_path / "fr_rank0.json"
    stale.write_text('[{"collective_seq_id": 99, "profiling_name": "stale"}]')
    base = buckets.make_model(layers=2, width=8)
    result = buckets.uneven(base, torch.device("cpu"), 8, 4, 5.0, tmp_path)
    assert result["hang"] is None and result["join_rank_spread"] == 0, result
    assert not stale.exists() or "stale" not in stale.read_text(), stale.read_text()


def test_compression_sends_bfloat16_on_every_device(buckets, group):
    base = buckets.make_model(layers=2, width=8)
    got = buckets.compress(base, torch.device("cpu"), 8, 4, steps=2)
    assert set(got) == {"float32", "bfloat16", "weight_rel_diff"}, got
    assert got["bfloat16"]["bytes_per_step"] * 2 == got["float32"]["bytes_per_step"]
    src = (SCRIPTS / "comm_buckets.py").read_text()
    assert "is_bf16_supported" not in src.replace(
        "torch.cuda.is_bf16_supported is about computing", ""), (
        "is_bf16_supported is about computing in bf16, not about nccl sending it")


def test_bucket_caps_are_timed_without_a_python_hook(buckets, group, monkeypatch):
    timed = []
    monkeypatch.setattr(buckets, "time_caps", lambda models, *a, **k: (
        timed.extend(models.values()), {c: [0.0] for c in models})[1])
    monkeypatch.setattr(buckets, "profile_step", lambda *a, **k: None)
    monkeypatch.setattr(buckets, "compress", lambda *a, **k: {})
    monkeypatch.setattr(buckets, "uneven", lambda *a, **k: {})
    monkeypatch.setattr(buckets, "overlap_fraction", lambda trace: 0.0)
    hooked = []
    real = buckets.seen_buckets
    monkeypatch.setattr(buckets, "seen_buckets", lambda m, x, y: (
        hooked.append(m), real(m, x, y))[1])
    monkeypatch.setattr(buckets, "setup", lambda device: torch.device("cpu"))
    monkeypatch.setattr(buckets.dist, "destroy_process_group", lambda: None)
    out = Path(tempfile.mkdtemp())
    for name in ("ddp", "by_hand"):
        (out / f"trace_{name}.json").write_text("{}")
    buckets.main(["--out", str(out), "--layers", "2", "--width", "8",
                  "--caps", "0.0001,25"])
    assert len(timed) == 2 and not any(m in hooked for m in timed), (
        "the timed models must not be the ones a Python comm hook was put on")
