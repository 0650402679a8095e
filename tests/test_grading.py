"""Strict, type-exact grading of {"facts": {...}} replies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from washexp.compaction.inputs.fixtures import load_task
from washexp.compaction.scoring.grading import grade, parse_facts, strict_equal, unordered_equal

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "compaction"


@pytest.fixture(scope="module")
def payment():
    return load_task(FIXTURES / "payment")


def reply(facts) -> str:
    return json.dumps({"facts": facts})


@pytest.mark.parametrize(("a", "b"), [(1, 1.0), (1, True), (0, False), ("1", 1), (None, 0), ([1], (1,))])
def test_types_must_match(a, b):
    # Trap: Python's == says 1 == 1.0 == True; the study's grader does not.
    assert not strict_equal(a, b)


def test_nested_equality_is_recursive_and_ordered():
    assert strict_equal({"a": [1, {"b": True}]}, {"a": [1, {"b": True}]})
    assert not strict_equal({"a": [1, {"b": True}]}, {"a": [1, {"b": 1}]})
    assert not strict_equal([1, 2], [2, 1])


def test_unordered_compares_as_multiset_but_keeps_types():
    assert unordered_equal([402, 422], [422, 402])
    assert not unordered_equal([402, 422], [422.0, 402])
    assert not unordered_equal([402, 402], [402, 422])


def test_perfect_answer(payment):
    g = grade(payment, reply(payment.expected))
    assert g.score == 1.0 and g.all_correct and not g.malformed


def test_unordered_field_ignores_order_only_there(payment):
    facts = dict(payment.expected, no_retry_http_statuses=[422, 402])
    assert grade(payment, reply(facts)).fields["no_retry_http_statuses"]
    facts = dict(payment.expected, attempt_keys=["pay-b", "pay-a"])  # ordered field
    g = grade(payment, reply(facts))
    assert not g.fields["attempt_keys"] and g.score == 0.9


def test_wrong_type_scores_zero_for_that_field(payment):
    facts = dict(payment.expected, amount_minor=12900.0, first_attempt_committed=1, max_attempts="3")
    g = grade(payment, reply(facts))
    assert [f for f, ok in g.fields.items() if not ok] == ["amount_minor", "first_attempt_committed", "max_attempts"]


def test_missing_field_scores_zero(payment):
    facts = {k: v for k, v in payment.expected.items() if k != "invoice_id"}
    g = grade(payment, reply(facts))
    assert g.fields["invoice_id"] is False and g.score == 0.9


@pytest.mark.parametrize(
    "text",
    [
        '{"facts": {"incident_id": "PAY-4827"',
        '```json\n{"facts": {}}\n```',
        '{"incident_id": "PAY-4827"}',
        '{"facts": ["PAY-4827"]}',
        "The incident was PAY-4827.",
        "",
    ],
)
def test_malformed_reply_scores_zero_everywhere(payment, text):
    g = grade(payment, text)
    assert g.malformed and g.score == 0.0 and not any(g.fields.values())


def test_surrounding_whitespace_is_not_malformed():
    assert parse_facts('\n  {"facts": {"a": 1}}\n') == {"a": 1}


def test_regression_counts_must_be_the_named_mapping(payment):
    # The study's format preflight: counts returned as arrays are wrong, and stay wrong.
    facts = dict(payment.expected, regression_attempt_counts=[2, 1, 3])
    assert not grade(payment, reply(facts)).fields["regression_attempt_counts"]


def test_unordered_compares_a_list_with_a_list_only():
    assert not unordered_equal([1, 2], {1: "x", 2: "y"})  # a mapping iterates its keys: not a list


def test_unordered_lists_of_objects_match_whatever_their_key_order():
    a = [{"x": 1, "y": 2}, {"x": 0, "y": 9}]
    b = [{"y": 9, "x": 0}, {"y": 2, "x": 1}]
    assert unordered_equal(a, b) and unordered_equal(b, a)


def test_an_extra_key_in_a_nested_object_is_a_miss():
    """Mutant killed (issue 36): grading that compared only the expected keys of a nested object
    would pass an answer carrying a key the task never stated."""
    from washexp.compaction.scoring.grading import strict_equal, unordered_equal

    expected = {"owner": {"name": "ana", "team": "ops"}}
    assert strict_equal(expected, {"owner": {"name": "ana", "team": "ops"}})
    assert not strict_equal(expected, {"owner": {"name": "ana", "team": "ops", "pager": True}})
    assert not strict_equal({"owner": {"name": "ana", "team": "ops", "pager": True}}, expected)
    assert not unordered_equal([{"a": 1}], [{"a": 1, "b": 2}])


def test_a_format_failure_is_a_reply_outside_the_asked_shape(payment):
    # counted apart from grading (format_failures): malformed, or facts whose keys are not the asked fields
    assert grade(payment, "not json").format_failure is True
    exact = grade(payment, json.dumps({"facts": payment.expected}))
    assert exact.format_failure is False and exact.malformed is False
    extra = grade(payment, json.dumps({"facts": dict(payment.expected, note="x")}))
    assert extra.format_failure is True and not extra.malformed
    short = dict(payment.expected)
    short.pop(next(iter(short)))
    assert grade(payment, json.dumps({"facts": short})).format_failure is True
