"""Decisions from paired per-task values: the exact sign-flip test, its interval, Holm, verdicts.

The task is the unit (a task's value is already the study's hierarchical mean of its answers and
generations). For paired per-task differences ``d`` the statistic is ``mean(d)``; under the null
each difference is as likely to have either sign, so the null distribution is ``mean(s * d)`` over
sign patterns ``s``:

- with ``n <= EXACT_MAX`` tasks every one of the ``2**n`` patterns is enumerated and
  ``p = hits / 2**n``, counting the observed pattern and its mirror (all signs flipped), which
  always tie with it: no two-sided p is below ``2 / 2**n`` (0.125 with 4 tasks, 0.0625 for one
  side);
- past that ``SAMPLES`` random patterns from ``SEED`` and ``p = (hits + 1) / (B + 1)``.

The interval is every shift ``mu`` the same two-sided test does not reject at ``ALPHA`` when
applied to ``d - mu`` (unadjusted). Each pattern ties or beats the observed statistic on one
closed range of ``mu`` that holds ``mean(d)``, so the accepted shifts form one interval, found
exactly from those ranges' ends; when the always-tying patterns alone keep p above ``ALPHA``
(5 tasks or fewer) it is the whole range.

Equivalence (TOST): two one-sided sign-flip tests on ``d - delta`` and ``d + delta``; its p is
the larger. A verdict's precedence: a Holm-adjusted difference, then Holm-adjusted equivalence,
else undecided with about how many tasks would decide it (a normal approximation, floored by the
test's discreteness). Pure: numpy only, nothing read or written.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

EXACT_MAX = 16
"""Enumerate every sign pattern up to this many tasks (2**16 patterns)."""
SAMPLES = 10_000
SEED = 20261206
ALPHA = 0.05
DELTA = 0.05
POWER = 0.80
RANGE = (-1.0, 1.0)
"""Where a difference of two values in [0, 1] can lie: the whole range."""
_TIE = 1e-12
"""Float noise below which two statistics tie, or a difference is none (values are in [0, 1])."""


def describe(seed: int = SEED, samples: int = SAMPLES) -> str:
    """How the records' tests are made, in words."""
    return (
        f"exact paired sign-flip test over tasks (statistic: mean of per-task differences; every one of the "
        f"2^n sign patterns up to n = {EXACT_MAX}, p = hits / 2^n counting the observed pattern and its mirror, "
        f"so no two-sided p is below 2 / 2^n: 0.125 with 4 tasks; past that {samples:,} random patterns, "
        f"seed {seed}, p = (hits + 1) / (B + 1)); two-sided, level {ALPHA}"
    )


@functools.lru_cache(maxsize=64)
def patterns(n: int, *, seed: int = SEED, samples: int = SAMPLES) -> tuple[np.ndarray, bool]:
    """The sign patterns (rows of +-1, read-only: cached) for ``n`` tasks, and whether they are
    every pattern."""
    if n <= EXACT_MAX:
        bits = (np.arange(2**n)[:, None] >> np.arange(n)) & 1
        signs = 1.0 - 2.0 * bits
    else:
        signs = np.random.default_rng(seed).choice((-1.0, 1.0), size=(samples, n))
    signs.flags.writeable = False
    return signs, n <= EXACT_MAX


@functools.lru_cache(maxsize=64)
def _balance(n: int, seed: int) -> np.ndarray:
    """Each pattern's mean sign (cached with the patterns)."""
    return patterns(n, seed=seed)[0].mean(axis=1)


def _p(hits: int, total: int, exact: bool) -> float:
    return hits / total if exact else (hits + 1) / (total + 1)


def p_value(d, shift: float = 0.0, side: str = "two", *, seed: int = SEED) -> float:
    """The sign-flip p of ``mean(d - shift)``: ``side`` "two" (two-sided), "less" (small if the mean
    is below ``shift``) or "greater" (small if it is above)."""
    x = np.asarray(d, dtype=float) - shift
    signs, exact = patterns(len(x), seed=seed)
    t = x.mean()
    null = signs @ x / len(x)
    if side == "two":
        hits = np.abs(null) >= abs(t) - _TIE
    elif side == "less":
        hits = null <= t + _TIE
    elif side == "greater":
        hits = null >= t - _TIE
    else:
        raise ValueError(f"side {side!r}: two, less or greater")
    return _p(int(hits.sum()), len(signs), exact)


def interval(d, *, alpha: float = ALPHA, seed: int = SEED, bounds: tuple[float, float] = RANGE) -> tuple[float, float]:
    """The shifts the two-sided test does not reject at ``alpha``, clipped to ``bounds`` (all of
    them when the test cannot reject anything: the whole range).

    A pattern ``s`` (mean ``b``, ``a = mean(s * d)``) ties or beats the observed statistic at shift
    ``mu`` iff ``(a - b mu)^2 >= (mean(d) - mu)^2``, i.e. for ``mu`` between
    ``(mean(d) - a) / (1 - b)`` and ``(mean(d) + a) / (1 + b)`` (always, if ``b = +-1``). Counting
    the ranges that reach past ``mu`` gives p at ``mu``; the last ``mu`` where p stays above
    ``alpha`` on each side is an end of the interval."""
    x = np.asarray(d, dtype=float)
    signs, exact = patterns(len(x), seed=seed)
    total = len(signs)
    m = x.mean()
    b = _balance(len(x), seed)
    a = signs @ x / len(x)
    always = np.isclose(np.abs(b), 1.0)
    bb, aa = b[~always], a[~always]
    r1 = (m - aa) / (1.0 - bb)
    r2 = (m + aa) / (1.0 + bb)
    lows, highs = np.minimum(r1, r2), np.maximum(r1, r2)
    base = int(always.sum())
    # p(mu) > alpha needs base + j hits: the j-th largest high (smallest low) is the last accepted mu
    need = _needed(base, total, exact, alpha)
    if need == 0:
        return bounds
    hi = float(-np.partition(-highs, need - 1)[need - 1])
    lo = float(np.partition(lows, need - 1)[need - 1])
    return max(lo, bounds[0]), min(hi, bounds[1])


def _needed(base: int, total: int, exact: bool, alpha: float) -> int:
    """The fewest hits beyond ``base`` that keep p above ``alpha`` (a first guess, then exact)."""
    j = max(0, math.floor(alpha * (total if exact else total + 1)) - base - (0 if exact else 1))
    while _p(base + j, total, exact) <= alpha:
        j += 1
    while j > 0 and _p(base + j - 1, total, exact) > alpha:
        j -= 1
    return j


def whole_range(low: float, high: float, bounds: tuple[float, float] = RANGE) -> bool:
    return low <= bounds[0] and high >= bounds[1]


def equivalence_p(d, delta: float = DELTA, *, seed: int = SEED) -> float:
    """TOST: the larger of the one-sided p's that the mean is below ``delta`` and above ``-delta``."""
    return max(p_value(d, delta, "less", seed=seed), p_value(d, -delta, "greater", seed=seed))


def holm(ps: list[float]) -> list[float]:
    """Holm's step-down adjustment over one family's p-values, in their order."""
    out = [0.0] * len(ps)
    running = 0.0
    for rank, (p, i) in enumerate(sorted((p, i) for i, p in enumerate(ps))):
        running = max(running, min(1.0, (len(ps) - rank) * p))
        out[i] = running
    return out


def min_tasks(alpha: float, *, two_sided: bool = True) -> int:
    """The fewest tasks whose smallest exact p (2 / 2^n two-sided, 1 / 2^n one side) is below alpha."""
    return max(2, math.ceil(math.log2((2 if two_sided else 1) / alpha) + 1e-12))


def tasks_for(effect: float, sd: float, *, alpha: float = ALPHA, power: float = POWER, two_sided: bool = True) -> int:
    """About how many tasks detect a mean per-task difference ``effect`` (per-task spread ``sd``)
    with ``power`` at level ``alpha``: the normal approximation of the sign-flip test, never below
    the fewest tasks its discreteness allows (:func:`min_tasks`)."""
    if effect <= 0:
        raise ValueError(f"effect {effect}: no difference to detect")
    floor = min_tasks(alpha, two_sided=two_sided)
    z = NormalDist().inv_cdf(1 - alpha / (2 if two_sided else 1)) + NormalDist().inv_cdf(power)
    return max(floor, math.ceil((z * sd / effect) ** 2))


@dataclass(frozen=True)
class Test:
    """One paired comparison, before the family's adjustment."""

    n: int
    diff: float
    low: float
    high: float
    p: float
    p_equiv: float
    sd: float


def test(d, *, delta: float = DELTA, seed: int = SEED) -> Test:
    """Every number a decision needs from the per-task differences ``d`` (at least 2 tasks)."""
    x = np.asarray(d, dtype=float)
    if len(x) < 2:
        raise ValueError(f"{len(x)} task(s) in common: a paired test needs at least 2")
    low, high = interval(x, seed=seed)
    return Test(
        len(x),
        float(x.mean()),
        low,
        high,
        p_value(x, seed=seed),
        equivalence_p(x, delta, seed=seed),
        float(x.std(ddof=1)),
    )


def verdict(a: str, b: str, t: Test, p_holm: float, equiv_holm: float, family_size: int, delta: float = DELTA) -> str:
    """In words, by precedence: a difference (Holm p < ALPHA), equivalence within ±delta (Holm
    TOST p < ALPHA), else undecided and about how many tasks would decide it."""
    if p_holm < ALPHA:
        return f"{a} keeps more than {b}" if t.diff > 0 else f"{b} keeps more than {a}"
    if equiv_holm < ALPHA:
        return f"within ±{delta:g} of each other"
    level = ALPHA / family_size  # Holm's first step: the strictest level a member can face
    if abs(t.diff) > _TIE:
        return f"undecided ({_about(tasks_for(abs(t.diff), t.sd, alpha=level))} would decide a difference this size)"
    need = tasks_for(delta, t.sd, alpha=level, two_sided=False)
    return f"undecided ({_about(need)} would show equivalence within ±{delta:g})"


def _about(n: int) -> str:
    return f"about {n} tasks" if n <= 10_000 else "more than 10,000 tasks"
