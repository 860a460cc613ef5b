"""Pipeline arithmetic: what stage timelines show, idle time and overlap.

A timeline is a list of `Event`s, as notebooks/scripts/pipe_stages.py records them;
`helpers.plotting.plot_timeline` draws one. Each docstring ends with its notebooks.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["idle_fraction", "overlap_time"]  # Event: a type alias, for annotations

# A bar of a timeline: notebooks/scripts/pipe_stages.py's `Event`, the one definition (a
# NamedTuple: stage, kind, micro, start, end; the scripts cannot import helpers/), or a
# row of one read back from JSON. Both unpack by position, as below.
Event = Sequence


def idle_fraction(events: Sequence[Event]) -> float:
    """Return the idle share of stage time, first start to last end (12, 13)."""
    if not events:
        raise ValueError("no events")
    stages = {stage for stage, _, _, _, _ in events}
    span = (max(end for *_, end in events)
            - min(start for _, _, _, start, _ in events))
    busy = sum(end - start for _, _, _, start, end in events)
    return 1.0 - busy / (len(stages) * span)


def overlap_time(events: Sequence[Event]) -> float:
    """Return the seconds during which stage 0 and stage 1 were both busy (12, 13)."""
    bars = {0: [], 1: []}
    for stage, _, _, start, end in events:
        bars.setdefault(stage, []).append((start, end))
    return sum(max(0.0, min(a_end, b_end) - max(a_start, b_start))
               for a_start, a_end in bars[0] for b_start, b_end in bars[1])
