"""Jev selection: the strict score prefix, rendered in source order.

Scores are produced once per task and generation (by the ranker role) and shared by every N.
Top N takes the N highest scores, ties broken by source order, with no probability threshold;
the chosen units are then restored to source order. With fewer than N units, all are kept and
the actual count is what gets reported.
"""

from __future__ import annotations

from collections.abc import Sequence


def rank(scores: Sequence[float]) -> list[int]:
    """Unit indices from the highest score to the lowest; equal scores keep source order."""
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


def top_n(scores: Sequence[float], n: int) -> list[int]:
    """The indices of the Top ``n`` units, in source order."""
    if n < 0:
        raise ValueError(f"top-N must be >= 0, got {n}")
    return sorted(rank(scores)[:n])
