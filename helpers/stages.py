"""Pipeline arithmetic: what stage timelines show, idle time and overlap.

A timeline is a list of `Event`s, as notebooks/scripts/stages.py records them;
`helpers.plotting.plot_timeline` draws one. Each docstring ends with its notebooks.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["Event", "idle_fraction", "overlap_time"]

Event = tuple[int, str, int, float, float]
"""One bar of a timeline: (stage, "F" or "B", micro-batch, start s, end s)."""


def idle_fraction(events: Sequence[Event]) -> float:
    """Return the idle share of stage time, first start to last end (12, 13)."""
    if not events:
        raise ValueError("no events")
    stages = {e[0] for e in events}
    span = max(e[4] for e in events) - min(e[3] for e in events)
    busy = sum(e[4] - e[3] for e in events)
    return 1.0 - busy / (len(stages) * span)


def overlap_time(events: Sequence[Event]) -> float:
    """Return the seconds during which stage 0 and stage 1 were both busy (12, 13)."""
    first = [e for e in events if e[0] == 0]
    second = [e for e in events if e[0] == 1]
    return sum(max(0.0, min(a[4], b[4]) - max(a[3], b[3]))
               for a in first for b in second)
