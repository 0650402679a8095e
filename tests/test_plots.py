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
