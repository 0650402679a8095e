"""A record's plots say how many tasks each point averages (issue 50: a mean over 4 tasks is read
as one over 4, not as a law): the count is drawn in each cohort's panel title."""

from __future__ import annotations

from washexp.export import plots

SERIES = {"primary": {"S": [(0, 0.2), (1, 0.5)], "H": [(0, 0.3), (1, 0.6)]}}
POINTS = {"primary": [("S", 0, 700.0, 0.2), ("H", 0, 900.0, 0.3), ("full", None, 5000.0, 1.0)]}


def test_the_task_count_is_drawn_and_nothing_else_moves():
    one = plots.score_vs_n(SERIES, {"primary": 1.0}, "retention", "t", {"primary": 4})
    assert one == plots.score_vs_n(SERIES, {"primary": 1.0}, "retention", "t", {"primary": 4})  # same data, same bytes
    assert one != plots.score_vs_n(SERIES, {"primary": 1.0}, "retention", "t", {"primary": 14})
    two = plots.tokens_vs_score(POINTS, "retention", "t", {"primary": 4})
    assert two != plots.tokens_vs_score(POINTS, "retention", "t", {"primary": 14})


def test_each_arm_s_interval_is_drawn_as_a_bar_and_full_s_as_a_band():
    """The bars (issue 50): drawn where given, from the interval given (another interval or task
    count, other bytes), Full's as a band."""
    bar = plots.Bar(0.1, 0.4, 4)
    bars = {"primary": {("S", 0): bar, ("S", 1): bar, ("H", 0): bar, ("H", 1): bar, ("full", None): bar}}
    moved = {"primary": {**bars["primary"], ("S", 1): plots.Bar(0.0, 0.9, 3), ("full", None): plots.Bar(0, 1, 4)}}
    plain = plots.score_vs_n(SERIES, {"primary": 1.0}, "retention", "t", {"primary": 4})
    barred = plots.score_vs_n(SERIES, {"primary": 1.0}, "retention", "t", {"primary": 4}, bars)
    assert (
        len({plain, barred, plots.score_vs_n(SERIES, {"primary": 1.0}, "retention", "t", {"primary": 4}, moved)}) == 3
    )
    moved = {"primary": {**bars["primary"], ("S", 0): plots.Bar(0.0, 0.9, 4), ("full", None): plots.Bar(0, 1, 4)}}
    tokens = plots.tokens_vs_score(POINTS, "retention", "t", {"primary": 4}, bars)
    assert tokens != plots.tokens_vs_score(POINTS, "retention", "t", {"primary": 4}, moved)


def test_the_survival_curves_draw_their_bands_and_task_counts():
    curves = {"S top1": {1: [(1, 0.8)], 2: [(1, 0.9), (2, 0.6)]}}
    banded = plots.survival_curves(curves, "t", {"S top1": {2: [(1, 0.7, 1.0), (2, 0.3, 0.8)]}})
    assert banded != plots.survival_curves(curves, "t", {"S top1": {2: [(1, 0.7, 1.0), (2, 0.1, 0.8)]}})
    counted = plots.survival_curves(curves, "t", {"S top1": {2: [(1, 0.7, 1.0), (2, 0.3, 0.8)]}}, {"S top1": {2: 4}})
    assert counted != banded
