"""Time code honestly: warm up, synchronise, report the median and spread; say what it
means. Each docstring ends with the notebooks that use it."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import torch

__all__ = ["Timing", "benchmark", "paired_ratio", "synchronize", "verdict"]
T = TypeVar("T")


@dataclass(frozen=True)
class Timing:
    """Seconds per call over repeats, as benchmark measured them.

    Used by notebooks 01-03, 05-07, 09, 12-16, 18.
    """

    median: float
    iqr: float
    min: float
    max: float
    repeats: int
    device: str
    method: str


def synchronize(device: torch.device | str) -> None:
    """Wait until all queued work on `device` has finished (03, 07, 12, 13)."""
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    elif dev.type == "mps":
        torch.mps.synchronize()


def benchmark(fn: Callable[[], object], device: torch.device | str = "cpu",
              warmup: int = 3, repeats: int = 10, number: int = 1) -> Timing:
    """Time fn() after warming up: median of repeats (01-03, 05-07, 09, 12-16, 18)."""
    if warmup < 0 or repeats < 1 or number < 1:
        raise ValueError("benchmark needs warmup >= 0, repeats >= 1 and number >= 1")
    dev = torch.device(device)
    for _ in range(warmup):
        fn()
    synchronize(dev)
    samples = []
    use_events = dev.type == "cuda"
    for _ in range(repeats):
        if use_events:  # record on `dev`'s stream, whichever GPU is current
            with torch.cuda.device(dev):
                start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
                start.record()
                for _ in range(number):
                    fn()
                end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) / 1e3 / number)
        else:
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            synchronize(dev)
            samples.append((time.perf_counter() - t0) / number)
    iqr = 0.0
    if repeats > 1:
        q = statistics.quantiles(samples, n=4, method="inclusive")
        iqr = q[2] - q[0]
    return Timing(statistics.median(samples), iqr, min(samples), max(samples),
                  repeats, str(dev), "CUDA events" if use_events else "perf_counter")


def interleave(runs: Mapping[str, Callable[[], T]], rounds: int) -> dict[str, list[T]]:
    """Call each of `runs` once a round, in reverse order every other round (ABBA).

    Entry i of any two lists ran side by side: a load that drifts slows both alike.
    """
    if rounds < 1 or not runs:
        raise ValueError(f"interleave needs rounds >= 1 (got {rounds}) and a run")
    names = list(runs)
    results: dict[str, list[T]] = {name: [] for name in names}
    for i in range(rounds):
        for name in names if i % 2 == 0 else reversed(names):
            results[name].append(runs[name]())
    return results


def paired_ratio(slow: Callable[[], object], fast: Callable[[], object],
                 rounds: int = 5, **kwargs: Any) -> tuple[float, tuple[float, float]]:
    """Time `slow` and `fast` side by side in rounds; return the median ratio and range.

    Each round benchmarks both (`kwargs` go to `benchmark`) in interleave's order
    (notebooks 07, 08).
    """
    times = interleave({"slow": lambda: benchmark(slow, **kwargs).median,
                        "fast": lambda: benchmark(fast, **kwargs).median}, rounds)
    ratios = [s / f for s, f in zip(times["slow"], times["fast"], strict=True)]
    return statistics.median(ratios), (min(ratios), max(ratios))


def _band(value: float, limits: list[float]) -> int:
    """Return the index of the band that holds `value`."""
    if value >= limits[-1]:
        raise ValueError(f"{value} is above every band; end the bands with math.inf")
    return next(i for i, limit in enumerate(limits) if value < limit)


def verdict(value: float, bands: list[tuple[float, str]], *, ideal: float | None = None,
            spread: tuple[float, float] | None = None, unit: str = "x") -> str:
    """Return the words for `value` from `bands` of (upper limit, words), in order.

    `spread` is the (lowest, highest) of the samples behind `value`: when they fall in
    different bands, the words say the run was too noisy to tell.
    Used by notebooks 01, 03, 05-08, 11-15, 18.
    """
    limits = [limit for limit, _ in bands]
    if limits != sorted(limits):
        raise ValueError(f"bands must be in increasing order of limit, got {limits}")
    i = _band(value, limits)
    if spread is not None and len({_band(v, limits) for v in spread}) > 1:
        lo, hi = sorted(spread)
        return (f"{value:.2f}{unit}: too noisy to tell here (the runs spread from "
                f"{lo:.2f}{unit} to {hi:.2f}{unit}, across a band's edge); rerun on a "
                "quieter machine")
    limit, words = bands[i]
    lower = limits[i - 1] if i else None
    where = f"below {limit:g}{unit}" if lower is None else (
        f"{lower:g}{unit} or more" if math.isinf(limit) else
        f"between {lower:g}{unit} and {limit:g}{unit}")
    text = f"{value:.2f}{unit}: {words} ({where})"
    if ideal is not None and value > ideal:
        text += (f"; above the ideal {ideal:g}{unit}, so noise or contention on this "
                 "machine, not a real result")
    return text
