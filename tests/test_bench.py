"""bench/pairs.py on made-up timings, and the README's bench table against bench.run."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest

from bench import pairs, run

README = Path(__file__).resolve().parents[1] / "README.md"
TRUE = 2.0  # A takes twice as long as B on a quiet machine


class Machine:
    """A fake machine: each run takes its true time times the load at that moment."""

    def __init__(self, load) -> None:
        self.load, self.clock, self.order = load, 0, []

    def timer(self, name: str, seconds: float):
        def timed() -> float:
            self.order.append(name)
            self.clock += 1
            return seconds * self.load(self.clock - 1)
        return timed


def _interleaved(load, rounds: int = pairs.PAIRS) -> tuple[list[float], Machine]:
    machine = Machine(load)
    times = pairs.interleave({"a": machine.timer("a", TRUE),
                              "b": machine.timer("b", 1.0)}, rounds)
    return pairs.pair_ratios(times["a"], times["b"]), machine


def _one_after_the_other(load, rounds: int = pairs.PAIRS) -> float:
    """What all runs of A, then all of B, would report: a ratio of their medians."""
    machine = Machine(load)
    a = [machine.timer("a", TRUE)() for _ in range(rounds)]
    b = [machine.timer("b", 1.0)() for _ in range(rounds)]
    return statistics.median(a) / statistics.median(b)


def test_interleave_reverses_the_order_every_other_round():
    ratios, machine = _interleaved(lambda t: 1.0)
    assert machine.order == ["a", "b", "b", "a", "a", "b", "b", "a", "a", "b"], \
        machine.order
    assert ratios == [TRUE] * pairs.PAIRS, ratios


def test_a_second_job_starting_midway_is_cancelled_by_pairing():
    def load(t: int) -> float:  # another job doubles every run's time from run 5 on
        return 1.0 if t < 5 else 2.0

    ratios, _ = _interleaved(load)
    median, lo, hi = pairs.median_spread(ratios)
    assert median == TRUE, f"paired median {median}, true ratio {TRUE}"
    assert (lo, hi) == (1.0, TRUE), f"only the pair astride the change is off: {ratios}"
    sequential = _one_after_the_other(load)
    assert sequential == pytest.approx(1.0), \
        f"A then B reports {sequential}, the load's change and not the ratio"


def test_a_steady_drift_moves_the_median_by_one_run_at_most():
    def load(t: int) -> float:  # the machine slows by 5 % of its quiet speed per run
        return 1.0 + 0.05 * t

    ratios, _ = _interleaved(load)
    median, lo, hi = pairs.median_spread(ratios)
    assert lo < TRUE < hi, f"ABBA pairs bracket the true ratio: {lo:.3f}, {hi:.3f}"
    assert abs(median / TRUE - 1) < 0.05, f"paired median {median:.3f}, true {TRUE}"
    sequential = _one_after_the_other(load)
    assert abs(sequential / TRUE - 1) > 0.15, \
        f"A then B reports {sequential:.3f}: the drift of the whole benchmark"


def test_ratio_entry_writes_the_median_spread_and_pair_count():
    entry = pairs.ratio_entry("x_speedup", [1.5, 1.7, 1.6, 1.2, 1.65])
    assert entry == {"x_speedup": 1.6, "x_speedup_spread": [1.2, 1.7],
                     "x_speedup_pairs": 5}, entry
    assert tuple(entry) == pairs.ratio_keys("x_speedup"), entry
    with pytest.raises(ValueError):
        pairs.median_spread([])
    with pytest.raises(ValueError):
        pairs.interleave({"a": lambda: 1.0}, rounds=0)


def test_show_prints_torch_benchmarks_table():
    table = pairs.show("fake", {"one": [0.2, 0.21, 0.19], "two": [0.1, 0.11, 0.1]},
                       {"two": 2})
    assert "fake" in table and "one" in table and "two" in table, table
    assert "2 threads" in table, table


def _readme_bench_keys() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Benchmarks", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([a-z0-9_]+)` \|", section, flags=re.MULTILINE)


def test_every_key_of_the_readme_bench_table_is_written_by_bench_run():
    named = _readme_bench_keys()
    assert len(named) >= 7, f"found only {named} in README.md's bench table"
    written = run.keys()
    missing = [key for key in named if key not in written]
    assert not missing, f"README.md's bench table names {missing}; bench: {written}"
    for key in ("ddp_cpu_speedup_2proc", "pipeline_cpu_speedup", "fsdp_cpu_step_ratio"):
        assert set(pairs.ratio_keys(key)) <= set(written), f"{key}: no spread or pairs"
