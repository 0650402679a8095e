"""``model.repeats``: the answering step rerun R times, each repeat its own recorded call; and the
closed-book arm with a reader. Against the scripted server on 127.0.0.1 through the real command
line; then the same sweep into a fresh store replays every call (zero HTTP requests).

At the default (1) nothing changes: the identities of existing conditions (pinned below, the code
digest aside: it changes with any code) and the recording key of a request are what they were."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

from tests.conftest import ROOT, scripted_sweep
from tests.openai_server import Script, serve
from tests.test_export import export
from washexp.app import JobInfo, expand_short_keys
from washexp.compaction.scoring.aggregate import arm_metrics
from washexp.compaction.scoring.answers import repeat_metrics
from washexp.compaction.study import plan_arm
from washexp.config import register
from washexp.engine.sweep import Sweep
from washexp.errors import ConfigError
from washexp.hashing import canonical_hash
from washexp.models.base import ChatRequest
from washexp.models.recorder import request_key

SERVED = ["model=openai", "model.name=q", "endpoint.base_url=http://127.0.0.1:9/v1"]
PINNED = {
    # sha256 of a condition's identity without its code digest, as it was before model.repeats
    ("method=S", "topn=2"): "47da9e6f72b5eda02256d689266b1017ffdf670654c9718d240264832dc3b500",
    ("method=full",): "bbe3bf891acfe0b43a9b1136a6388de94019d3ed7b7f231f74599f78d1f6807a",
    ("method=H", "topn=0", *SERVED): "c46cb202c50f0d0b89511592d937039f59ab95ea8853bcdd7345b728c42e638b",
}


def _plan(overrides: list[str]):
    register()
    with initialize_config_dir(str(ROOT / "conf"), version_base=None):
        cfg = OmegaConf.to_object(compose("config", overrides=expand_short_keys(overrides)))
    return plan_arm(cfg, JobInfo("", "s", ROOT), Sweep(ROOT))


def _identity(overrides: list[str]) -> str:
    child = _plan(overrides).children[0]
    return canonical_hash({k: v for k, v in child.identity.items() if k != "code"})


@pytest.mark.parametrize("overrides", sorted(PINNED))
def test_at_the_default_every_identity_is_unchanged(overrides):
    assert _identity(list(overrides)) == PINNED[overrides]
    assert _identity([*overrides, "model.repeats=1"]) == PINNED[overrides]


def test_repeats_enter_the_identity_of_a_reader_only():
    served = ["method=full", *SERVED]
    plan = _plan([*served, "model.repeats=3"])
    assert _identity([*served, "model.repeats=3"]) != _identity(served)
    assert plan.children[0].params["repeats"] == 3 and "repeats" not in _plan(served).children[0].params
    # the reference backend has no reader: repeating nothing is the same condition
    assert _identity(["method=full", "model.repeats=3"]) == PINNED[("method=full",)]
    with pytest.raises(ConfigError, match="model.repeats=0"):
        _plan(["method=full", "model.repeats=0"])


def test_a_request_keeps_its_recording_key_and_a_repeat_has_its_own():
    messages = ({"role": "user", "content": "x"},)
    first = ChatRequest(messages, 0.0, 1024, {}, 1, 1)
    assert request_key("q", first) == "8e02d46130df7b27ca884a42ac78f2a128621a5591ee315b8e552ea9d14e3c27"
    assert request_key("q", ChatRequest(messages, 0.0, 1024, {}, 1, 1, 0)) == request_key("q", first)
    assert request_key("q", ChatRequest(messages, 0.0, 1024, {}, 1, 1, 1)) != request_key("q", first)


def test_a_draw_series_has_its_own_key_and_none_keeps_the_old_one():
    """A wash measurement's arm draws in a series of its own (issue 49): the same words asked in two
    series are two recordings; no series leaves every key recorded before as it was."""
    messages = ({"role": "user", "content": "x"},)
    first = ChatRequest(messages, 0.0, 1024, {}, 1, 1)
    assert request_key("q", replace(first, series="")) == request_key("q", first)
    ceiling = request_key("q", replace(first, series="ceiling · coalwash · gauge off"))
    infinity = request_key("q", replace(first, series="infinity · coalwash · gauge off"))
    assert len({ceiling, infinity, request_key("q", first)}) == 3


class ClosedBookScript(Script):
    """The scripted reader, except that a context with no evidence (system, task, follow-up) gets
    only the task's first field right: what a reader may know without the evidence."""

    def reply(self, kind, task, messages, temperature=0.0, model=""):
        if kind == "read" and task and len(messages) == 3:
            first = next(iter(task.expected))
            return json.dumps({"facts": {first: task.expected[first]}})
        return super().reply(kind, task, messages, temperature, model)


TASKS = ("backup", "payment")


def _sweep(url: str, store: Path, recordings: Path):
    return scripted_sweep(url, store, TASKS, "method=none,full", "model.repeats=2", recordings=recordings, answers=None)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("repeats")
    store, again = root / "store", root / "again"
    store.mkdir(), again.mkdir()
    script = ClosedBookScript()
    with serve(script) as url:
        _sweep(url, store, root / "recordings")
        first = [r for r in script.requests if r["kind"] == "read"]
        calls_first = script.count()
        _sweep(url, again, root / "recordings")
        calls_second = script.count() - calls_first
    export(store, store / "results")
    (path,) = (store / "results").glob("compaction-scripted-test-server-*.json")
    return root, first, calls_second, json.loads(path.read_text()), path


def test_two_repeats_are_two_calls_per_answer_slot_with_their_own_keys(served):
    root, reads, calls_second, *_ = served
    # 2 arms x 2 tasks x 1 generation x 2 answers, each answered twice
    assert len(reads) == 2 * len(TASKS) * 1 * 2 * 2
    recorded = [json.loads(p.read_text()) for p in (root / "recordings").rglob("*.json") if "tokenize" not in p.parts]
    slots = defaultdict(list)
    for r in recorded:
        if r["role"] == "read":
            q = r["request"]
            slots[json.dumps([q["messages"], q["generation"], q["answer"]])].append((q.get("repeat", 0), r["key"]))
    assert len(slots) == 2 * len(TASKS) * 2
    for found in slots.values():
        assert sorted(rep for rep, _ in found) == [0, 1] and len({key for _, key in found}) == 2
    assert calls_second == 0  # the replay: every repeat from its own recording


def test_conditions_log_each_repeat_and_the_spread(served):
    root, *_ = served
    client = MlflowClient(f"sqlite:///{root / 'store' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("compaction")
    conds = client.search_runs([exp.experiment_id], "tags.`washexp.kind` = 'condition'")
    assert len(conds) == 2 * len(TASKS)
    for run in conds:
        m = run.data.metrics
        assert m["fact_accuracy/r0"] == m["fact_accuracy/r1"] == m["fact_accuracy"]  # temperature 0, scripted
        assert m["fact_accuracy_repeat_spread"] == 0.0 and m["fact_accuracy_repeat_sd"] == 0.0
        grades = json.loads(
            Path(client.download_artifacts(run.info.run_id, "grades.json", str(root / run.info.run_id))).read_text()
        )
        assert sorted({row[grades["columns"].index("repeat")] for row in grades["data"]}) == [0, 1]


def test_the_record_puts_the_closed_book_beside_full_and_flags_what_it_knew(served):
    *_, record, path = served
    arms = {r["arm"]: r for r in record["tables"]["arms_control"]["rows"]}
    assert arms["Full"]["fact_accuracy"] == 1.0
    backup_fields = 3
    assert arms["none"]["fact_accuracy"] == pytest.approx(1 / backup_fields)
    note = next(n for n in record["notes"] if n.startswith("Closed book (method=none"))
    assert f"control: fact accuracy {1 / backup_fields:.3f} against Full's 1.000" in note
    rows = record["tables"]["closed_book_fields"]["rows"]
    flagged = sorted((r["task"], r["field"]) for r in rows if r["without_evidence"])
    assert flagged == sorted((t, next(iter(_expected(t)))) for t in TASKS)
    assert all(r["full_fact_accuracy"] == 1.0 for r in rows)
    assert "RIGHT WITHOUT EVIDENCE" in path.with_suffix(".md").read_text()


def test_the_record_reports_the_between_repeat_spread_and_its_intervals(served):
    *_, record, path = served
    rows = record["tables"]["repeats"]["rows"]
    assert {(r["arm"], r["cohort"]) for r in rows} == {(a, c) for a in ("Full", "none") for c in ("primary", "control")}
    for r in rows:
        assert r["repeats"] == 2 and r["r0"] == r["r1"] == r["mean"] and r["spread"] == 0.0
    md = path.with_suffix(".md").read_text()
    assert "Between-repeat spread of fact accuracy (model.repeats)" in md
    assert "exact paired sign-flip test over tasks" in md
    (row,) = [
        r
        for r in record["tables"]["decisions"]["rows"]
        if (r["cohort"], r["family"], r["analysis"], r["metric"])
        == ("control", "vs closed book", "ITT", "fact_accuracy")
    ]
    assert (row["a"], row["b"]) == ("Full", "none") and row["diff"] == pytest.approx(1.0 - 1 / 3)


def test_spread_between_repeats_by_hand():
    m = repeat_metrics([1.0, 0.5])
    assert m == {"fact_accuracy/r0": 1.0, "fact_accuracy/r1": 0.5} | {
        "fact_accuracy_repeat_spread": 0.5,
        "fact_accuracy_repeat_sd": 0.25,
    }
    per_task = {
        "a": {"fact_accuracy": 0.75, "contexts": 1.0, "contexts_valid": 1.0, **m},
        "b": {"fact_accuracy": 0.5, "contexts": 1.0, "contexts_valid": 1.0, **repeat_metrics([0.5, 0.5])},
        "c": {"failed": 1.0, "contexts": 1.0},  # a failed condition: 0 in every repeat
    }
    out = arm_metrics(per_task, {"a": "control", "b": "control", "c": "control"})
    assert out["control/fact_accuracy/r0"] == pytest.approx(1.5 / 3) and out["control/fact_accuracy/r1"] == 1 / 3
    assert out["control/fact_accuracy_repeat_spread"] == pytest.approx(0.5 / 3)
    assert out["control/fact_accuracy_repeat_sd"] == pytest.approx(0.25 / 3)
    assert out["control/fact_accuracy_task_repeat_spread"] == pytest.approx(0.5 / 3)
    assert "fact_accuracy_repeat_spread" not in repeat_metrics([1.0, None])


def _expected(task_id: str) -> dict:
    from washexp.compaction.inputs.fixtures import load_tasks

    return next(t for t in load_tasks(ROOT / "fixtures" / "compaction") if t.id == task_id).expected
