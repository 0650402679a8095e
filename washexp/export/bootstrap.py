"""The paired bootstrap over tasks ``washexp compare`` shows beside a regression (B - A per arm
and cohort), and the study's nested scores. Records decide with the exact sign-flip test instead
(:mod:`washexp.export.decide`): a percentile bootstrap over 4 tasks covers 76-80 % at nominal 95 %.

Every arm sees the same tasks (and generations), so arms are compared task by task: the
difference ``a[t] - b[t]`` per task is resampled with replacement (tasks, not generations or
fields), ``RESAMPLES`` times from a fixed seed, and the 2.5th and 97.5th percentiles of the
resampled means bound a 95% percentile interval. Same inputs, same interval, on any machine.

With a handful of tasks the interval is coarse: there are few distinct resamples, and the
percentile bootstrap is known to be too narrow for small n. It is an estimate of spread, not a
significance test, and a record shows n beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RESAMPLES = 10_000
SEED = 20261130
LEVEL = 0.95


@dataclass(frozen=True)
class Interval:
    """A mean paired difference and its bootstrap interval."""

    n: int
    """Tasks paired."""
    mean_a: float
    mean_b: float
    diff: float
    """mean(a - b) over the paired tasks."""
    low: float
    high: float


def paired(
    a: dict[str, float], b: dict[str, float], *, resamples: int = RESAMPLES, seed: int = SEED, level: float = LEVEL
) -> Interval | None:
    """Compare per-task scores ``a`` and ``b`` on the tasks both have; None if there are none."""
    tasks = sorted(a.keys() & b.keys())
    if not tasks:
        return None
    xa = np.array([a[t] for t in tasks], dtype=float)
    xb = np.array([b[t] for t in tasks], dtype=float)
    d = xa - xb
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), size=(resamples, len(d)))].mean(axis=1)
    tail = (1.0 - level) / 2
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return Interval(len(tasks), float(xa.mean()), float(xb.mean()), float(d.mean()), float(low), float(high))


Nested = dict[str, list[list[float]]]
"""task -> its generations -> each generation's answer scores (the study's hierarchy)."""


def nested_mean(scores: list[list[float]]) -> float:
    """A task's score: answers averaged per generation, then generations (``aggregate.task_score``)."""
    return float(np.mean([np.mean(g) for g in scores]))
