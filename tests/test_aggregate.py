"""An arm's cohort aggregates, by exact expected values: tasks weigh equally within a cohort, a
failed condition is 0 in the denominator, an unmeasured score is absent (never 0), counts are sums,
token figures are means over the tasks that have them."""

from __future__ import annotations

import pytest

from washexp.compaction.scoring.aggregate import arm_metrics

COHORTS = {"pay": "primary", "err": "primary", "bak": "control"}


def _arm() -> dict[str, dict[str, float]]:
    return {
        "pay": {"retention": 1.0, "retention_all_fields": 1.0, "contexts": 3.0, "contexts_valid": 2.0}
        | {"contexts_shortened": 1.0, "input_tokens_total": 300.0, "input_tokens": 100.0, "reduction_pct": 40.0}
        | {"contexts_failed": 1.0, "contexts_failed_jev": 1.0, "api_input_tokens": 90.0},
        "err": {"failed": 1.0, "contexts": 3.0},
        "bak": {"retention": 0.5, "retention_all_fields": 0.0, "contexts": 3.0, "contexts_valid": 3.0}
        | {"contexts_shortened": 2.0, "input_tokens_total": 150.0, "input_tokens": 50.0, "reduction_pct": 10.0},
    }


def test_scores_are_task_means_per_cohort_with_a_failed_condition_as_zero():
    m = arm_metrics(_arm(), COHORTS)
    assert (m["primary/retention"], m["control/retention"], m["all/retention"]) == (0.5, 0.5, 0.5)
    assert (m["primary/retention_all_fields"], m["control/retention_all_fields"]) == (0.5, 0.0)
    assert m["all/retention_all_fields"] == pytest.approx(1 / 3)
    assert not any(k.endswith(("/fact_accuracy", "/all_fields_correct")) for k in m)  # never measured


def test_counts_are_sums_and_token_figures_means_over_the_tasks_that_have_them():
    m = arm_metrics(_arm(), COHORTS)
    assert (m["primary/contexts"], m["control/contexts"], m["all/contexts"]) == (6.0, 3.0, 9.0)
    assert (m["primary/contexts_valid"], m["all/contexts_shortened"], m["all/input_tokens_total"]) == (2.0, 3.0, 450.0)
    assert (m["primary/tasks"], m["control/tasks"], m["all/tasks"]) == (2.0, 1.0, 3.0)
    assert (m["primary/failed"], m["control/failed"], m["all/failed"]) == (1.0, 0.0, 1.0)
    # invalid: contexts neither valid nor failed by a role's reply, over conditions that ran
    assert (m["primary/invalid"], m["control/invalid"]) == (0.0, 0.0)
    assert (m["primary/contexts_failed"], m["primary/contexts_failed_jev"], m["control/contexts_failed"]) == (1, 1, 0)
    assert "all/contexts_failed_h" not in m and "all/api_input_tokens_total" not in m  # measured by no task
    assert (m["primary/input_tokens"], m["all/input_tokens"], m["control/reduction_pct"]) == (100.0, 75.0, 10.0)
    assert m["all/api_input_tokens"] == 90.0 and "control/api_input_tokens" not in m


def test_an_invalid_context_is_counted_and_an_empty_cohort_is_absent():
    per_task = {"bak": {"retention": 0.0, "contexts": 2.0, "contexts_valid": 0.0, "contexts_failed": 1.0}}
    m = arm_metrics(per_task, COHORTS)
    assert m["control/invalid"] == 1.0 and m["all/invalid"] == 1.0
    assert not any(k.startswith("primary/") for k in m)  # no primary task: nothing, not 0
    assert m["control/retention"] == 0.0 and m["all/tasks"] == 1.0


def test_a_score_measured_after_an_unmeasured_one_is_still_aggregated():
    m = arm_metrics({"pay": {"retention": 1.0, "fact_accuracy": 0.5, "contexts": 1.0, "contexts_valid": 1.0}}, COHORTS)
    assert m["primary/fact_accuracy"] == 0.5 and "primary/retention_all_fields" not in m
