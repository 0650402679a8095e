"""The sign-flip decisions (washexp.export.decide) against an independent brute force, Holm by hand,
and the interval's coverage by simulation (seeded)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from washexp.export import decide

SIM_SEED = 50_2026


def brute_p(d: list[float], side: str = "two") -> float:
    """Every sign pattern by itertools, statistics as Python sums: an implementation of its own."""
    n = len(d)
    t = sum(d) / n
    hits = 0
    for signs in itertools.product((1, -1), repeat=n):
        s = sum(x * y for x, y in zip(signs, d, strict=True)) / n
        if side == "two":
            hits += abs(s) >= abs(t) - 1e-12
        elif side == "less":
            hits += s <= t + 1e-12
        else:
            hits += s >= t - 1e-12
    return hits / 2**n


@pytest.mark.parametrize(
    "d",
    [
        [0.1, 0.2, -0.05, 0.3],
        [0.5, 0.5, 0.5, 0.5],
        [0.0, 0.0, 0.0, 0.0],
        [0.3, -0.1, 0.2, 0.25, 0.05, -0.02, 0.4, 0.1, 0.0, 0.33],
        [1 / 3, -1 / 6, 0.25, 0.75, -0.5],
    ],
)
def test_exact_p_is_the_brute_force(d):
    assert decide.p_value(d) == brute_p(d)
    assert decide.p_value(d, 0.05, "less") == brute_p([x - 0.05 for x in d], "less")
    assert decide.p_value(d, -0.05, "greater") == brute_p([x + 0.05 for x in d], "greater")


def test_four_tasks_never_below_one_eighth():
    # the observed pattern and its mirror always tie: 2 / 2^4
    assert decide.p_value([0.9, 0.8, 0.7, 0.95]) == 0.125
    assert decide.interval([0.9, 0.8, 0.7, 0.95]) == decide.RANGE
    assert decide.whole_range(*decide.interval([0.9, 0.8, 0.7, 0.95]))
    # one side: 1 / 2^4, so no equivalence on 4 tasks either
    assert decide.equivalence_p([0.0, 0.0, 0.01, -0.01]) == 0.0625


def test_equivalence_needs_both_sides():
    near = [0.0, 0.01, -0.01, 0.0, 0.005, -0.005, 0.0, 0.01, 0.0, -0.01]
    assert decide.equivalence_p(near) == brute_p([x - 0.05 for x in near], "less")  # the larger side here
    assert decide.equivalence_p(near) < decide.ALPHA
    below = [x - 0.3 for x in near]  # far below -delta: far from equivalent, though below +delta
    above = [x + 0.3 for x in near]
    assert decide.equivalence_p(below) == 1.0 and decide.equivalence_p(above) == 1.0


def test_sampled_p_counts_plus_one():
    d = np.full(20, 0.3)  # every random pattern but the all-plus one is below the statistic
    signs, exact = decide.patterns(20)
    assert not exact and len(signs) == decide.SAMPLES
    hits = int((np.abs(signs.mean(axis=1) * 0.3) >= 0.3 - 1e-12).sum())
    assert decide.p_value(d) == (hits + 1) / (decide.SAMPLES + 1)


def test_interval_inverts_the_test():
    rng = np.random.default_rng(SIM_SEED)
    for n in (6, 9, 17):
        d = rng.normal(0.1, 0.2, n)
        low, high = decide.interval(d)
        assert low < d.mean() < high
        eps = 1e-7
        assert decide.p_value(d - low - eps) > decide.ALPHA  # just inside: not rejected
        assert decide.p_value(d - high + eps) > decide.ALPHA
        assert decide.p_value(d - low + eps) <= decide.ALPHA  # just outside: rejected
        assert decide.p_value(d - high - eps) <= decide.ALPHA


def test_holm_by_hand():
    # sorted 0.01, 0.03, 0.04 over m = 3: 3 x 0.01, 2 x 0.03, max(0.06, 1 x 0.04)
    assert decide.holm([0.04, 0.01, 0.03]) == [pytest.approx(0.06), pytest.approx(0.03), pytest.approx(0.06)]
    assert decide.holm([0.5, 0.6]) == [pytest.approx(1.0), pytest.approx(1.0)]
    assert decide.holm([]) == []


def test_verdict_precedence():
    big = decide.test([0.3, 0.25, 0.4, 0.35, 0.3, 0.28, 0.33, 0.31])
    assert decide.verdict("S", "H", big, big.p, big.p_equiv, 1) == "S keeps more than H"
    flip = decide.test([-x for x in [0.3, 0.25, 0.4, 0.35, 0.3, 0.28, 0.33, 0.31]])
    assert decide.verdict("S", "H", flip, flip.p, flip.p_equiv, 1) == "H keeps more than S"
    tied = decide.test([0.0, 0.01, -0.01, 0.0, 0.005, -0.005, 0.0, 0.01])
    assert decide.verdict("S", "H", tied, tied.p, tied.p_equiv, 1) == "within ±0.05 of each other"
    few = decide.test([0.1, 0.2, -0.05, 0.3])
    said = decide.verdict("S", "H", few, 0.5, 1.0, 6)
    assert said.startswith("undecided (about ") and "tasks would decide" in said
    assert int(said.split("about ")[1].split()[0]) >= decide.min_tasks(decide.ALPHA / 6)


def test_fewer_than_two_tasks_is_refused():
    with pytest.raises(ValueError, match="at least 2"):
        decide.test([0.1])


@pytest.mark.parametrize("n", [4, 10, 40])
def test_interval_covers_the_true_difference(n):
    """1,000 simulated panels per size, each task's difference the true one plus task noise
    (symmetric: normal or Laplace, alternating): at least 93 % of the intervals hold it. With 4
    tasks the interval is the whole range (it cannot reject anything), so it always covers."""
    rng = np.random.default_rng([SIM_SEED, n])
    true = 0.1
    covered = 0
    panels = 1_000
    for i in range(panels):
        noise = rng.normal(0, 0.2, n) if i % 2 else rng.laplace(0, 0.15, n)
        low, high = decide.interval(np.clip(true + noise, -1, 1))
        covered += low <= true <= high
    assert covered / panels >= 0.93
    if n == 4:
        assert covered == panels
    else:
        assert covered / panels <= 0.99  # an interval this size is not just the whole range


def test_tasks_for_meets_its_power_by_simulation():
    """The planner's count gives about 80 % power: simulated panels of that many tasks (normal
    per-task differences) reject at 0.05 in at least 70 % of draws; one task in three fewer, less."""
    effect, sd = 0.1, 0.15
    n = decide.tasks_for(effect, sd)
    assert n == math.ceil(((1.959964 + 0.841621) * sd / effect) ** 2)
    rng = np.random.default_rng([SIM_SEED, 80])
    hits = sum(decide.p_value(rng.normal(effect, sd, n)) < decide.ALPHA for _ in range(300))
    assert hits / 300 >= 0.70
    fewer = sum(decide.p_value(rng.normal(effect, sd, n // 3)) < decide.ALPHA for _ in range(300))
    assert fewer < hits


def test_discreteness_floor():
    # two-sided exact p is at least 2 / 2^n: 0.05 needs 6 tasks (2/64), 0.05 / 6 needs 8 (2/256)
    assert decide.min_tasks(0.05) == 6
    assert decide.min_tasks(0.05 / 6) == 8
    assert decide.tasks_for(0.5, 0.0) == 6
