"""Paired runs for the benchmarks: ratios that mean the same on a busy machine.

A shared machine's load drifts while a benchmark runs, so a ratio of two timings
means something only when both sides ran close together. `interleave` (the order
of helpers.timing.paired_ratio, which notebooks 07 and 08 use) runs every
configuration once per round, in forward order in even rounds and backward in odd
ones (A B, B A, A B, ...: the ABBA design), so a load that rises or falls through
the benchmark slows both sides alike, and the pairs that drift pushes one way
alternate with pairs it pushes the other way. `ratio_entry` reports a ratio as the
median over pairs of each pair's ratio, with the lowest and highest pair's ratio as
its spread: `<key>`, `<key>_spread` = [lo, hi], `<key>_pairs` = n.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from torch.utils.benchmark import Compare, Measurement, TaskSpec

from helpers import timing

PAIRS = 5  # rounds of every benchmark: each gives one ratio per pair of configurations
T = TypeVar("T")


def interleave(configs: Mapping[str, Callable[[], T]],
               rounds: int = PAIRS) -> dict[str, list[T]]:
    """Call every configuration once per round, reversing the order every other round.

    helpers.timing's ABBA order, with PAIRS rounds unless told: entry i of two
    configurations' results ran side by side.
    """
    return timing.interleave(configs, rounds)


def pair_ratios(num: Sequence[float], den: Sequence[float]) -> list[float]:
    """Return num[i] / den[i] for each pair (the two sequences must match)."""
    return [a / b for a, b in zip(num, den, strict=True)]


def median_spread(ratios: Sequence[float]) -> tuple[float, float, float]:
    """Return the median of the ratios, and their lowest and highest."""
    if not ratios:
        raise ValueError("median_spread needs at least one ratio")
    return statistics.median(ratios), min(ratios), max(ratios)


def ratio_keys(key: str) -> tuple[str, str, str]:
    """Return the names `ratio_entry(key, ...)` writes."""
    return key, f"{key}_spread", f"{key}_pairs"


def ratio_entry(key: str, ratios: Sequence[float]) -> dict[str, float | list | int]:
    """Return {key: median, key_spread: [lowest, highest], key_pairs: n}."""
    median, lo, hi = median_spread(ratios)
    name, spread, pairs = ratio_keys(key)
    return {name: median, spread: [round(lo, 3), round(hi, 3)], pairs: len(ratios)}


def show(label: str, seconds: Mapping[str, Sequence[float]],
         threads: Mapping[str, int] | None = None) -> str:
    """Return torch.utils.benchmark's table of each configuration's time in each pair.

    `seconds` maps a configuration to its time in each pair (as measured by the
    script it ran), one column per pair; `threads` its threads per process (1 if
    not given).
    """
    threads = threads or {}
    return str(Compare([
        Measurement(1, [t], TaskSpec(stmt=name, setup="", label=label, sub_label=name,
                                     description=f"pair {i + 1}",
                                     num_threads=threads.get(name, 1)))
        for name, times in seconds.items() for i, t in enumerate(times)]))


def describe(key: str, ratios: Sequence[float]) -> str:
    """Return one line: the key, its pairs' ratios, their median and spread."""
    median, lo, hi = median_spread(ratios)
    return (f"   {key}: median {median:.3f} [{lo:.3f}, {hi:.3f}] of "
            + ", ".join(f"{r:.3f}" for r in ratios))
