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
    for n in (6, 7, 8, 9, 12, 17, 30):  # odd and even: each end is one of a mirrored pair of ranges
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
    assert decide.holm([0.6, 0.7]) == [1.0, 1.0]  # 2 x 0.6 capped at 1
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
    assert decide.min_tasks(0.05, two_sided=False) == 5  # one side: 1/2^n
    assert decide.min_tasks(0.5) == 3  # 2/2^2 is 0.5 itself: not below it
    assert decide.min_tasks(0.9) == 2  # never fewer than a pair
    assert decide.tasks_for(0.5, 0.0, two_sided=False) == 5
    assert decide.tasks_for(0.5, 0.0) == 6


def sampled_p(d, seed: int, side: str = "two", shift: float = 0.0) -> float:
    """The sampled p by hand: SAMPLES patterns from ``seed`` as the module draws them, (hits + 1) / (B + 1)."""
    x = np.asarray(d) - shift
    signs = np.random.default_rng(seed).choice((-1.0, 1.0), size=(decide.SAMPLES, len(x)))
    null, t = signs @ x / len(x), x.mean()
    hits = {"two": np.abs(null) >= abs(t) - 1e-12, "less": null <= t + 1e-12, "greater": null >= t - 1e-12}[side]
    return (int(hits.sum()) + 1) / (decide.SAMPLES + 1)


def test_a_seed_reaches_every_sampled_number():
    """Past 16 tasks the patterns are drawn from the seed given, in every number a test reports."""
    d = np.random.default_rng(7).normal(0.02, 0.1, 20)
    assert decide.p_value(d, seed=7) == sampled_p(d, 7) != decide.p_value(d)
    lower = sampled_p(d, 7, "less", decide.DELTA)
    upper = sampled_p(d, 7, "greater", -decide.DELTA)
    assert decide.equivalence_p(d, seed=7) == max(lower, upper) != decide.equivalence_p(d)
    assert decide.interval(d, seed=7) != decide.interval(d)
    t = decide.test(d, seed=7, delta=0.1)
    wide = max(sampled_p(d, 7, "less", 0.1), sampled_p(d, 7, "greater", -0.1))
    assert (t.n, t.p, t.p_equiv) == (20, sampled_p(d, 7), wide)
    assert (t.low, t.high) == decide.interval(d, seed=7)
    assert t.diff == pytest.approx(d.mean()) and t.sd == pytest.approx(np.std(d, ddof=1))


def test_two_tasks_are_tested_and_bad_arguments_say_what():
    two = decide.test([0.1, 0.3])
    assert (two.n, two.p, (two.low, two.high)) == (2, 0.5, decide.RANGE)  # 2 of the 4 patterns tie
    with pytest.raises(ValueError, match="side 'up': two, less or greater"):
        decide.p_value([0.1, 0.2], side="up")
    with pytest.raises(ValueError, match="effect 0: no difference to detect"):
        decide.tasks_for(0, 0.1)


def test_whole_range_needs_both_ends():
    assert decide.whole_range(-1.0, 1.0) and decide.whole_range(0.0, 1.0, (0.0, 1.0))
    assert not decide.whole_range(-1.0, 0.5) and not decide.whole_range(-0.5, 1.0)
    assert not decide.whole_range(0.5, 1.0, (0.0, 1.0))


def test_verdict_edges_and_the_counts_it_names():
    """A Holm p of exactly 0.05 decides nothing; the counts come at the family's strictest level."""
    big = decide.test([0.3, 0.25, 0.4, 0.35, 0.3, 0.28, 0.33, 0.31])
    assert decide.verdict("S", "H", big, decide.ALPHA, 1.0, 1).startswith("undecided")
    assert decide.verdict("S", "H", big, 1.0, decide.ALPHA, 1).startswith("undecided")
    few = decide.test([0.1, 0.2, -0.05, 0.3])
    need = decide.tasks_for(abs(few.diff), few.sd, alpha=decide.ALPHA / 6)
    assert need != decide.tasks_for(abs(few.diff), few.sd)
    said = f"undecided (about {need} tasks would decide a difference this size)"
    assert decide.verdict("S", "H", few, 0.5, 1.0, 6) == said
    level = decide.test([0.1, -0.1, 0.1, -0.1, 0.05, -0.05])  # no difference at all
    need = decide.tasks_for(decide.DELTA, level.sd, alpha=decide.ALPHA / 3, two_sided=False)
    assert need not in (
        decide.tasks_for(decide.DELTA, level.sd, alpha=decide.ALPHA / 3),
        decide.tasks_for(decide.DELTA, level.sd, two_sided=False),
    )
    said = f"undecided (about {need} tasks would show equivalence within ±0.05)"
    assert decide.verdict("S", "H", level, 1.0, 1.0, 3) == said
    wider = decide.tasks_for(0.1, level.sd, alpha=decide.ALPHA / 3, two_sided=False)
    assert (
        decide.verdict("S", "H", level, 1.0, 1.0, 3, 0.1)
        == f"undecided (about {wider} tasks would show equivalence within ±0.1)"
    )
    tiny = decide.test([0.001, -0.0005, 0.0015, -0.001, 0.0002, 0.0])
    assert decide.verdict("S", "H", tiny, 1.0, 1.0, 1).startswith("undecided (about ")
    assert decide.verdict("S", "H", decide.test([1e-6, -0.9, 0.9, 1e-6, 0.0, 0.0]), 1.0, 1.0, 1) == (
        "undecided (more than 10,000 tasks would decide a difference this size)"
    )
    assert decide._about(10_000) == "about 10000 tasks" and decide._about(10_001) == "more than 10,000 tasks"


def test_the_seed_reaches_the_lower_side_and_the_interval():
    """Where the lower side's p is the larger (a mean above 0), equivalence is that side's, drawn
    from the seed; the seeded interval inverts the seeded test."""
    d = np.random.default_rng(7).normal(0.02, 0.1, 20) + 0.03
    lower = sampled_p(d, 7, "less", decide.DELTA)
    assert lower > sampled_p(d, 7, "greater", -decide.DELTA)
    assert decide.equivalence_p(d, seed=7) == lower == decide.test(d, seed=7).p_equiv
    low, high = decide.interval(d, seed=7)
    eps = 1e-7
    assert sampled_p(d - low - eps, 7) > decide.ALPHA and sampled_p(d - high + eps, 7) > decide.ALPHA
    assert sampled_p(d - low + eps, 7) <= decide.ALPHA and sampled_p(d - high - eps, 7) <= decide.ALPHA


def test_the_interval_at_another_level_inverts_the_test_at_that_level():
    """At 0.25 four tasks can reject (their p is k/16): the interval is no longer the whole range,
    and p at its ends crosses 0.25 (a p of exactly 0.25 is rejected)."""
    d = np.random.default_rng(3).normal(0.2, 0.2, 4)
    low, high = decide.interval(d, alpha=0.25)
    assert not decide.whole_range(low, high)
    eps = 1e-7
    assert decide.p_value(d - low - eps) > 0.25 and decide.p_value(d - high + eps) > 0.25
    assert decide.p_value(d - low + eps) <= 0.25 and decide.p_value(d - high - eps) <= 0.25
