"""Paired bootstraps over tasks: how far a mean difference between two arms can be trusted.

Two forms, one seed and one task draw:

- :func:`paired` resamples tasks only (a task's score is fixed);
- :func:`hierarchical` resamples tasks, then within each drawn task its generations, then within
  each drawn generation its answers (all with replacement), so the spread of a task's own
  generations and answers widens the interval as it should. Its task draw is :func:`paired`'s, so
  with one generation and one answer per task it gives the same interval, bit for bit. The
  records' intervals use it and say so (:func:`describe`).

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


def describe(resamples: int = RESAMPLES, seed: int = SEED) -> str:
    """How the records' intervals are made, in words."""
    return (
        "intervals: hierarchical bootstrap over tasks, generations within a task, answers within a "
        f"generation; B={resamples:,}, seed={seed}"
    )


def nested_mean(scores: list[list[float]]) -> float:
    """A task's score: answers averaged per generation, then generations (``aggregate.task_score``)."""
    return float(np.mean([np.mean(g) for g in scores]))


def hierarchical(
    a: Nested, b: Nested, *, resamples: int = RESAMPLES, seed: int = SEED, level: float = LEVEL
) -> Interval | None:
    """Compare nested scores ``a`` and ``b`` on the tasks both have (None if there are none):
    tasks are drawn as :func:`paired` draws them (the same tasks for both arms), then each arm's
    generations and answers are drawn within each drawn task from a second stream of the same seed.
    A generation without answers is a ValueError (a context that is not there scores one 0)."""
    tasks = sorted(a.keys() & b.keys())
    if not tasks:
        return None
    rng = np.random.default_rng(seed)
    draw = rng.integers(0, len(tasks), size=(resamples, len(tasks)))
    within = np.random.default_rng([seed, 1])
    sa = _resampled([a[t] for t in tasks], tasks, draw, within)
    sb = _resampled([b[t] for t in tasks], tasks, draw, within)
    means = (sa - sb).mean(axis=1)
    tail = (1.0 - level) / 2
    low, high = np.quantile(means, [tail, 1.0 - tail])
    xa = np.array([nested_mean(a[t]) for t in tasks])
    xb = np.array([nested_mean(b[t]) for t in tasks])
    return Interval(len(tasks), float(xa.mean()), float(xb.mean()), float((xa - xb).mean()), float(low), float(high))


def _resampled(per_task: list[list[list[float]]], names: list[str], draw: np.ndarray, rng) -> np.ndarray:
    """The drawn task slots' scores, each slot its own draw of generations and answers."""
    out = np.empty(draw.shape, dtype=float)
    for i, gens in enumerate(per_task):
        if not gens or any(len(g) == 0 for g in gens):
            raise ValueError(f"task {names[i]}: a generation without answer scores (or no generation)")
        lens = np.array([len(g) for g in gens])
        width = int(lens.max())
        table = np.zeros((len(gens), width))
        for g, answers in enumerate(gens):
            table[g, : len(answers)] = answers
        slots = np.nonzero(draw == i)
        k = len(slots[0])
        if k == 0:
            continue
        g_idx = rng.integers(0, len(gens), size=(k, len(gens)))
        n = lens[g_idx]  # answers of each drawn generation
        a_idx = np.floor(rng.random((k, len(gens), width)) * n[..., None]).astype(int)
        picked = table[g_idx[..., None], a_idx]
        mask = np.arange(width) < n[..., None]
        out[slots] = ((picked * mask).sum(axis=-1) / n).mean(axis=-1)
    return out
