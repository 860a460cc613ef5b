"""The timing helper warms up, synchronises and reports median and spread."""

from __future__ import annotations

import time

import pytest
import torch

from helpers import Timing, benchmark, paired_ratio, synchronize
from helpers import timing as timing_mod


def test_counts_warmup_and_repeats():
    calls = []
    t = benchmark(lambda: calls.append(1), warmup=2, repeats=5, number=3)
    assert len(calls) == 2 + 5 * 3
    assert t.repeats == 5 and t.device == "cpu" and t.method == "perf_counter"


def test_a_known_sleep_is_never_timed_shorter():
    """A sleep lasts at least what it asks for; a busy machine only makes it longer."""
    t = benchmark(lambda: time.sleep(0.01), warmup=1, repeats=5, number=2)
    assert t.min >= 0.0099, f"min {t.min:.4f} s per call for a 0.01 s sleep"
    assert t.min <= t.median <= t.max and t.iqr >= 0, t


def test_times_per_call_and_the_spread_of_the_repeats(monkeypatch):
    ticks = iter([0, 8, 8, 12, 12, 24, 24, 28, 28, 32])  # 5 repeats of 4 calls each
    monkeypatch.setattr(timing_mod.time, "perf_counter", lambda: next(ticks))
    t = benchmark(lambda: None, warmup=0, repeats=5, number=4)
    assert (t.median, t.min, t.max, t.iqr) == (1, 1, 3, 1), t  # per call: 2 1 3 1 1


def test_median_resists_one_outlier(monkeypatch):
    ticks = iter([0, 1, 1, 2, 2, 100, 100, 101, 101, 102])  # start/stop pairs
    monkeypatch.setattr(timing_mod.time, "perf_counter", lambda: next(ticks))
    t = benchmark(lambda: None, warmup=0, repeats=5)
    assert t.median == 1 and t.max == 98


def test_synchronises_the_device_it_times(monkeypatch):
    seen = []
    monkeypatch.setattr(timing_mod, "synchronize", lambda d: seen.append(str(d)))
    benchmark(lambda: None, device="cpu", warmup=1, repeats=3)
    assert seen == ["cpu"] * 4  # once after warm-up, once per repeat


@pytest.mark.parametrize(("device", "waits"), [
    ("cpu", []), (torch.device("cpu"), []), ("cuda:1", ["cuda:1"]),
    (torch.device("cuda", 0), ["cuda:0"]), ("mps", ["mps"])])
def test_synchronize_waits_for_the_device_it_is_given(monkeypatch, device, waits):
    seen = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda d: seen.append(str(d)))
    monkeypatch.setattr(torch.mps, "synchronize", lambda: seen.append("mps"))
    synchronize(device)
    assert seen == waits, f"synchronize({device!r}) waited for {seen}, not {waits}"


@pytest.mark.parametrize("kw", [{"warmup": -1}, {"repeats": 0}, {"number": 0}])
def test_rejects_bad_arguments(kw):
    with pytest.raises(ValueError):
        benchmark(lambda: None, **kw)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_events_on_gpu():  # the CPU path is covered above; this adds the GPU one
    x = torch.randn(256, 256, device="cuda")
    t = benchmark(lambda: x @ x, device="cuda", repeats=3)
    assert t.method == "CUDA events" and t.median > 0


def test_paired_ratio_alternates_and_takes_the_median_ratio(monkeypatch):
    calls, medians = [], iter([4.0, 2.0, 3.0, 9.0, 6.0, 2.0])  # slow, fast, fast, ...

    def fake(fn, **kwargs):
        calls.append((fn(), kwargs))
        return Timing(next(medians), 0.0, 0.0, 0.0, 1, "cpu", "perf_counter")

    monkeypatch.setattr(timing_mod, "benchmark", fake)
    ratio, spread = paired_ratio(lambda: "slow", lambda: "fast", rounds=3, repeats=2)
    assert [c for c, _ in calls] == ["slow", "fast", "fast", "slow", "slow", "fast"]
    assert all(kw == {"repeats": 2} for _, kw in calls)
    assert (ratio, spread) == (3.0, (2.0, 3.0))  # ratios 2, 3, 3


def test_paired_ratio_needs_a_round():
    with pytest.raises(ValueError):
        paired_ratio(lambda: None, lambda: None, rounds=0)
