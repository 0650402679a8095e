"""The study's arithmetic and selection rules, on hand-checked cases."""

from __future__ import annotations

import pytest

from washexp.compaction.inputs import budget
from washexp.compaction.methods.jev import rank, top_n
from washexp.compaction.scoring.aggregate import cohort_means, mean, task_score


@pytest.mark.parametrize(
    ("evidence", "allowance"),
    [(0, 64), (320, 64), (324, 64), (325, 65), (1000, 200), (1284, 256), (1285, 256), (50_000, 256)],
)
def test_allowance_is_20_percent_clamped_and_rounded_down(evidence, allowance):
    # 0.2 * 324 = 64.8 -> 64 (floor); 0.2 * 325 = 65; 0.2 * 1284 = 256.8 -> 256
    assert budget.allowance(evidence) == allowance


def test_ceiling_adds_protected_allowance_five_largest_units_reserve_framing():
    units = [10, 500, 40, 300, 7, 200, 100]
    # five largest: 500 + 300 + 200 + 100 + 40 = 1140
    c = budget.ceiling(protected_tokens=150, allowance_tokens=64, unit_tokens=units)
    assert c.base == 150 + 64 + 1140 + 64 + 32 == 1450
    assert c.value == 1450 and not c.enlarged


def test_ceiling_with_fewer_than_five_units_takes_them_all():
    assert budget.ceiling(100, 80, [30, 20]).base == 100 + 80 + 50 + 96


def test_ceiling_is_enlarged_to_fit_serialized_s_never_shrunk():
    c = budget.ceiling(150, 64, [500, 300], s_context_tokens=2000)
    assert c.base == 1110 and c.value == 2000 and c.enlarged
    assert budget.ceiling(150, 64, [500, 300], s_context_tokens=900).value == 1110


def test_top_n_is_the_strict_score_prefix_rendered_in_source_order():
    scores = [0.2, 0.9, 0.5, 0.9, 0.1]
    assert rank(scores) == [1, 3, 2, 0, 4]  # ties (0.9, 0.9) keep source order
    assert top_n(scores, 1) == [1]
    assert top_n(scores, 2) == [1, 3]
    assert top_n(scores, 3) == [1, 2, 3]  # unit 2 joins; rendered in source order
    assert top_n(scores, 0) == []


def test_top_n_with_fewer_units_keeps_them_all():
    assert top_n([0.3, 0.1], 5) == [0, 1]


def test_top_n_tie_at_the_cut_goes_to_the_earlier_unit():
    # Trap: a "stable sort by score" that sorts ascending then reverses would pick unit 2.
    assert top_n([0.5, 0.7, 0.5], 2) == [0, 1]


def test_negative_n_is_refused():
    with pytest.raises(ValueError):
        top_n([1.0], -1)


def test_hierarchical_averaging_weights_levels_not_answers():
    # Task A: generation 1 has answers 1.0, 0.0 -> 0.5; generation 2 has one answer 1.0 -> 1.0.
    # Task mean = 0.75 (generations equal), not 2/3 (answers pooled).
    assert task_score([[1.0, 0.0], [1.0]]) == 0.75
    scores = {"a": 0.75, "b": 0.25, "c": 1.0}
    means = cohort_means(scores, {"a": "primary", "b": "primary", "c": "control"})
    assert means == {"primary": 0.5, "control": 1.0, "all": (0.75 + 0.25 + 1.0) / 3}


def test_empty_denominator_is_none_not_zero():
    assert mean([]) is None
    assert cohort_means({"a": 1.0}, {"a": "control"})["primary"] is None
