"""Hierarchical averaging, as the study specifies.

Fields within an answer, answers within a generation, generations within a task, then tasks
equally. Cohorts (primary, control) are reported separately. A failed planned condition stays
in the denominator as 0: callers pass 0.0 for it, never drop it. An empty denominator is
``None`` (reported as n/a), never 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return sum(values) / len(values) if values else None


def task_score(generations: Sequence[Sequence[float]]) -> float | None:
    """Per-answer scores grouped by generation -> the task's score."""
    return mean(m for m in (mean(answers) for answers in generations) if m is not None)


def cohort_means(task_scores: dict[str, float], cohorts: dict[str, str]) -> dict[str, float | None]:
    """Task scores -> the mean per cohort and over all tasks, every task weighted equally."""
    out = {c: mean(s for t, s in task_scores.items() if cohorts[t] == c) for c in ("primary", "control")}
    out["all"] = mean(task_scores.values())
    return out
