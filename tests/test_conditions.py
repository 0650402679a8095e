"""One condition on real fixtures: H validity, zero credit for what is invalid, failed = 0."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from washexp.compaction.backends.roles import roles_for
from washexp.compaction.condition import Arm, outcome, run_condition, task_sizes
from washexp.compaction.frozen import FrozenCache
from washexp.compaction.inputs.fixtures import load_task
from washexp.compaction.inputs.meter import LOCAL, Count
from washexp.compaction.methods import h_native as hermes
from washexp.compaction.scoring.aggregate import arm_metrics
from washexp.config import ModelConfig

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "compaction"


@pytest.fixture(scope="module")
def reference():
    return FrozenCache(roles_for(ModelConfig(name="reference")))


def _with_writer(cache, write):
    # A cache of its own: the frozen S/H of the real reference roles stay out of reach.
    return FrozenCache(dataclasses.replace(cache.roles, checkpoint_writer=lambda task_id, g: write))


def run(task, arm, cache):
    out = run_condition(task, arm, cache, 1, 0)
    return out.metrics, out.artifacts, out.tables


def test_h_that_invents_a_user_is_invalid_and_scores_zero(reference):
    def attributes_to_user(request: hermes.CheckpointRequest) -> str:
        return "## Historical Task Snapshot\nUser asked: investigate PAY-4827\n\n## Critical Context\n- PAY-4827"

    task = load_task(FIXTURES / "payment")
    metrics, artifacts, tables = run(task, Arm("H", 3), _with_writer(reference, attributes_to_user))
    assert metrics["valid"] == 0 and metrics["retention"] == 0 and metrics["contexts_valid"] == 0
    assert "contexts/g0.json" not in artifacts  # no fallback to the original history
    record = artifacts["summary/g0.checkpoint.json"]
    assert '"outcome": "provenance"' in record and record.count('"outcome"') == 1  # no retry on provenance
    assert all(not row["retained"] for row in tables["retention.json"])


def test_h_over_the_allowance_three_times_is_invalid(reference):
    def rambles(request: hermes.CheckpointRequest) -> str:
        return f"{hermes.SNAPSHOT_HEADING}\n{hermes.NO_USER_SENTINEL}\n\n## Critical Context\n" + "- INV-731 " * 400

    task = load_task(FIXTURES / "backup")
    metrics, artifacts, _ = run(task, Arm("H", 0), _with_writer(reference, rambles))
    assert metrics["valid"] == 0 and metrics["retention"] == 0
    assert artifacts["summary/g0.checkpoint.json"].count('"over_allowance"') == 3


def test_h_no_shorter_than_full_is_invalid_by_the_count_that_decided(reference):
    # The check uses the meter's counts, not the local ChatML estimate: a meter that counts H's
    # context as large as Full's (equal is not fewer) makes H invalid, and says which count decided.
    task = load_task(FIXTURES / "package_versions")

    def same_size(messages) -> Count:
        return Count(500, "test meter: one size for every context")

    cache = FrozenCache(dataclasses.replace(reference.roles, meter=same_size))
    out = outcome(task, Arm("H", 0), cache, 0, task_sizes(task, cache, 1))
    assert out.context is None and out.failed is None
    assert out.invalid == "H input 500 >= Full 500 (test meter: one size for every context)"
    assert out.check["source"] == "test meter: one size for every context"
    # The same H with the real local meter (Qwen3's chat template) is shorter than Full: valid.
    ok = outcome(task, Arm("H", 0), reference, 0, task_sizes(task, reference, 1))
    assert ok.context is not None and ok.check["source"] == LOCAL and ok.check["h_alone"] < ok.check["full"]


def test_s_is_never_filtered_even_when_it_grows(reference):
    # A short control may use more input with fusion; it is reported, not dropped.
    task = load_task(FIXTURES / "meeting_notes")  # one unit: S + that unit outgrows Full
    metrics = run(task, Arm("S", 5), reference)[0]
    assert metrics["input_tokens"] > metrics["full_input_tokens"]  # the fused context grew...
    assert metrics["valid"] == 1 and metrics["retention"] == 1.0  # ...and was kept, not filtered
    assert metrics["contexts_shortened"] == 0


def test_fewer_units_than_n_keeps_all_and_reports_the_actual_count(reference):
    task = load_task(FIXTURES / "meeting_notes")  # a single unit
    metrics, artifacts, _ = run(task, Arm("S", 5), reference)
    assert metrics["units_kept"] == 1 and metrics["units_total"] == 1
    assert '"requested_n": 5' in artifacts["ranking/g0.json"]


def test_a_failed_condition_stays_in_the_denominator_as_zero():
    per_task = {
        "payment": {"retention": 1.0, "contexts": 1.0, "contexts_valid": 1.0, "input_tokens": 100.0},
        "server_error": {"failed": 1.0, "contexts": 1.0},
        "backup": {"retention": 0.5, "contexts": 1.0, "contexts_valid": 0.0, "input_tokens": 50.0},
    }
    cohorts = {"payment": "primary", "server_error": "primary", "backup": "control"}
    m = arm_metrics(per_task, cohorts)
    assert m["primary/retention"] == 0.5  # (1.0 + 0) / 2, not 1.0
    assert m["primary/failed"] == 1 and m["primary/invalid"] == 0
    assert m["control/invalid"] == 1 and m["all/retention"] == 0.5
    assert "primary/fact_accuracy" not in m  # never measured: absent, not 0


def test_arm_aggregates_do_not_depend_on_the_order_conditions_finished():
    # Trap: under concurrency conditions finish in any order; a float sum in that order gave a
    # replayed sweep different last digits (0.6222...221 against ...222).
    per_task = {
        t: {"retention": v, "contexts": 1.0, "contexts_valid": 1.0} for t, v in zip("abc", (0.1, 0.2, 0.3), strict=True)
    }
    cohorts = dict.fromkeys("abc", "control")
    reversed_order = dict(reversed(per_task.items()))
    assert arm_metrics(per_task, cohorts) == arm_metrics(reversed_order, cohorts)
