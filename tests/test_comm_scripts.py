"""Tests of notebook 11's scripts: their parts in one process, then one 3-rank run
of comm_ring.py under the recorder of test_p2p_order.py (3 ranks: the ring's chunks
are uneven), read twice: its record, and its point-to-point order replayed as nccl
would run it. Notebook 11 launches comm_lessons.py (all seven lessons, 4 ranks) and
asserts what each collective leaves on every rank."""

from __future__ import annotations

import json
import sys

import pytest
import torch
from conftest import NOTEBOOK_DIR, load_script

SCRIPTS = NOTEBOOK_DIR / "scripts"
linux_only = pytest.mark.skipif(sys.platform != "linux", reason="torchrun on Linux")


@pytest.fixture(scope="module")
def coll():
    return load_script(SCRIPTS / "comm_bandwidth.py")


@pytest.fixture(scope="module")
def ring():
    return load_script(SCRIPTS / "comm_ring.py")


@pytest.fixture(scope="module")
def buckets():
    return load_script(SCRIPTS / "comm_buckets.py")


@pytest.fixture(scope="module")
def model():
    return load_script(SCRIPTS / "comm_model.py")


@pytest.fixture(scope="module")
def overlap():
    return load_script(SCRIPTS / "comm_overlap.py")


@pytest.fixture(scope="module")
def squeeze():
    return load_script(SCRIPTS / "comm_compress.py")


@pytest.fixture(scope="module")
def join():
    return load_script(SCRIPTS / "comm_join.py")


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


def test_ring_on_one_rank_sends_nothing_and_changes_nothing(ring, group):
    t = torch.arange(5.0)
    assert ring.ring_all_reduce(t) == 0
    assert torch.equal(t, torch.arange(5.0))


def _event(name, ts, dur, **extra):
    return {"ph": "X", "name": name, "ts": ts, "dur": dur, **extra}


def test_overlap_fraction_counts_comm_time_inside_backward_only(overlap):
    fn = "autograd::engine::evaluate_function: AddmmBackward0"
    label = {"cat": "user_annotation"}
    cpu = {"traceEvents": [_event("backward", 0, 100, **label), _event(fn, 10, 40),
                           _event("gloo:all_reduce", 30, 40),  # 20 of 40 inside
                           _event("gloo:all_reduce", 60, 20)]}  # after compute
    assert overlap.overlap_fraction(cpu) == pytest.approx(20 / 60)
    launch = {"cat": "cuda_runtime", "args": {"correlation": 7}}
    gpu = {"traceEvents": [
        _event("backward", 50, 5, cat="gpu_user_annotation"),  # the GPU's copy
        _event("backward", 0, 10, **label), _event("cudaLaunchKernel", 5, 1, **launch),
        _event("gemm", 20, 30, cat="kernel", args={"correlation": 7}),
        _event("late_copy", 90, 10, cat="kernel", args={"correlation": 8}),
        _event("ncclDevKernel_AllReduce", 40, 20, cat="kernel", args={})]}
    assert overlap.overlap_fraction(gpu) == pytest.approx(10 / 20)


def test_seen_buckets_match_the_cap(buckets, model, group):
    x, y = model.batch(32, 8, 0, torch.device("cpu"))
    for cap_mb, count in ((4096 / 2**20, 4), (8192 / 2**20, 2), (25, 1)):
        mlp = model.make_model(layers=4, width=32)  # 4 KiB + 128 B per layer
        ddp = model.wrap(mlp, torch.device("cpu"), cap_mb)
        seen = buckets.seen_buckets(ddp, x, y)
        assert [i for i, _ in seen] == list(range(count)), (cap_mb, seen)
        assert sum(b for _, b in seen) == sum(p.numel() * 4 for p in mlp.parameters())


def test_count_bytes_adds_up_what_all_reduce_is_given(squeeze, group):
    sent = []
    fake = squeeze.count_bytes(sent)
    fake(torch.zeros(3, dtype=torch.bfloat16))
    fake(torch.zeros(2))
    assert sent == [6, 8]


@pytest.fixture(scope="module")
def three_ranks(tmp_path_factory):
    """One 3-rank launch of comm_ring.py under the recorder: (record, calls)."""
    from test_p2p_order import recorded

    out = tmp_path_factory.mktemp("comm")
    calls, _ = recorded(out, "comm_ring.py", "--device", "cpu", "--ring-numel", "1001",
                        nproc=3)
    return load_script(SCRIPTS / "common.py").load_record(
        out / "ring.json", load_script(SCRIPTS / "comm_ring.py").Ring), calls


@pytest.mark.slow
@linux_only
def test_three_ranks_ring_all_reduce_equals_all_reduce(three_ranks):
    ring = three_ranks[0]
    assert abs(ring.sent - 2 * 2 / 3 * 1001 * 4) <= 2 * 2 * 4, ring  # uneven chunks
    assert ring.max_diff <= 1e-6 * ring.max_abs, ring


@pytest.mark.slow
@linux_only
def test_the_ring_all_reduce_of_notebook_11_runs_on_nccl(three_ranks):
    from test_p2p_order import count, replay

    programs = three_ranks[1]
    assert all(count(calls, "batch") == 2 * 2 for calls in programs.values()), (
        "a 3-rank ring makes 2 (3 - 1) grouped steps on every rank")
    said = replay(programs)
    assert said is None, said


def test_busbw_rows_follow_the_factor_and_a_renamed_field_fails(coll, tmp_path):
    common = load_script(SCRIPTS / "common.py")
    rec = coll.Bandwidth(3, 1.0, {"gloo": [coll.Row(1024, 1e-3, [1e-3], 1.024e-3,
                                                    1.024e-3 * coll.busbw_factor(3))]})
    common.save_record(tmp_path / "b.json", rec)
    back = common.load_record(tmp_path / "b.json", coll.Bandwidth)
    assert back == rec and back.sweeps["gloo"][0].busbw == pytest.approx(
        back.sweeps["gloo"][0].algbw * 4 / 3)
    body = json.loads((tmp_path / "b.json").read_text())
    body["sweeps"]["gloo"][0]["bus_bw"] = body["sweeps"]["gloo"][0].pop("busbw")
    (tmp_path / "b.json").write_text(json.dumps(body))
    with pytest.raises(KeyError, match=r"\['bus_bw', 'busbw'\].*Row"):
        common.load_record(tmp_path / "b.json", coll.Bandwidth)


def test_sweep_rows_are_nccl_tests_algbw_and_busbw(coll, group):
    rows = coll.sweep(torch.device("cpu"), [1024, 4096])
    assert [r.bytes for r in rows] == [1024, 4096]
    assert all(r.algbw == pytest.approx(r.bytes / r.seconds / 1e9) for r in rows)
    assert all(r.busbw == r.algbw * coll.busbw_factor(1) for r in rows)


def test_an_earlier_runs_flight_record_is_not_left_as_this_runs(model, join, group,
                                                                tmp_path):
    stale = tmp_path / "fr_rank0.json"
    stale.write_text('[{"collective_seq_id": 99, "profiling_name": "stale"}]')
    base = model.make_model(layers=2, width=8)
    result = join.uneven(base, torch.device("cpu"), 8, 4, 5.0, tmp_path)
    assert result.hang is None and result.join_rank_spread == 0, result
    assert not stale.exists() or "stale" not in stale.read_text(), stale.read_text()


def test_compression_sends_bfloat16_on_every_device(model, squeeze, group):
    base = model.make_model(layers=2, width=8)
    got = squeeze.compress(base, torch.device("cpu"), 8, 4, steps=2)
    assert got.bfloat16.bytes_per_step * 2 == got.float32.bytes_per_step, got
    src = (SCRIPTS / "comm_compress.py").read_text()
    assert "is_bf16_supported" not in src.replace(
        "torch.cuda.is_bf16_supported is\nabout computing", ""), (
        "is_bf16_supported is about computing in bf16, not about nccl sending it")


def test_bucket_caps_are_timed_without_a_python_hook(buckets, group, monkeypatch,
                                                     tmp_path):
    timed = []
    monkeypatch.setattr(buckets, "time_caps", lambda models, *a, **k: (
        timed.extend(models.values()), {c: [0.0] for c in models})[1])
    hooked = []
    real = buckets.seen_buckets
    monkeypatch.setattr(buckets, "seen_buckets", lambda m, x, y: (
        hooked.append(m), real(m, x, y))[1])
    args = load_script(SCRIPTS / "comm_model.py").parse_args(
        "", ["--out", str(tmp_path), "--layers", "2", "--width", "8",
             "--caps", "0.0001,25"])
    got = buckets.run(args, torch.device("cpu"))
    assert len(timed) == 2 and not any(m in hooked for m in timed), (
        "the timed models must not be the ones a Python comm hook was put on")
    assert got == load_script(SCRIPTS / "common.py").load_record(
        tmp_path / "buckets.json", buckets.Buckets)
