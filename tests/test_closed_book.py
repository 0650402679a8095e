"""The closed-book control (``method=none``) offline: an ordinary condition of a sweep, run by the
real command line beside Full, exported and compared. Offline there is no reader, so the arm
shows retention only: the share of a task's fields with no needles (stated by the query). The
arm with a reader (the scripted server) is tested in ``test_repeats.py``."""

from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import run_cli, washexp_cli
from tests.test_export import export
from washexp.compaction.inputs.context import closed_book_context, full_context
from washexp.compaction.inputs.fixtures import load_tasks
from washexp.compaction.scoring.retention import retained_fields, retention

TASKS = ["backup", "three_files", "payment"]  # payment is primary, the others control; three_files needs no needle


@pytest.fixture(scope="module")
def offline(tmp_path_factory):
    store = tmp_path_factory.mktemp("closed")
    out = run_cli(
        ["-m", "method=none,full", "topn=0,3", f"task=[{','.join(TASKS)}]"], store, env={"CI": "1"}, premade=True
    )
    export(store, store / "results")
    (path,) = (store / "results").glob("compaction-reference-*.json")
    return store, out, json.loads(path.read_text()), path


def _tasks():
    from tests.conftest import ROOT

    return {t.id: t for t in load_tasks(ROOT / "fixtures" / "compaction") if t.id in TASKS}


def test_the_context_is_the_frame_alone():
    for task in _tasks().values():
        bare, full = closed_book_context(task), full_context(task)
        assert bare.messages == (full.messages[0], full.messages[1], full.messages[-1])
        assert bare.evidence_text == "" and bare.units == ()


def test_one_arm_under_a_top_n_sweep_and_its_retention_counts_needleless_fields(offline):
    store, out, _, _ = offline
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    exp = client.get_experiment_by_name("compaction")
    arms = client.search_runs([exp.experiment_id], "tags.`washexp.kind` = 'arm' and tags.method = 'none'")
    assert len(arms) == 1 and "topn" not in arms[0].data.tags  # topn ignored, like Full
    conds = client.search_runs([exp.experiment_id], "tags.`washexp.kind` = 'condition' and tags.method = 'none'")
    tasks = _tasks()
    for run in conds:
        task = tasks[run.data.tags["task"]]
        expected = retention(retained_fields(task, ""))
        assert expected == sum(not n for n in task.needles.values()) / len(task.needles)
        assert run.data.metrics["retention"] == pytest.approx(expected)
        assert "fact_accuracy" not in run.data.metrics  # no reader: absent, never 0
    assert any(run.data.metrics["retention"] > 0 for run in conds)  # some control field needs no evidence
    assert "none: 3 conditions (3 run, 0 reused, 0 failed)" in out.stdout + out.stderr


def test_the_record_shows_retention_only_offline(offline):
    _, _, record, path = offline
    arms = {r["arm"]: r for r in record["tables"]["arms_control"]["rows"]}
    assert arms["none"]["fact_accuracy"] is None and arms["none"]["retention"] > 0
    note = next(n for n in record["notes"] if n.startswith("Closed book (method=none"))
    assert "shows retention only" in note and f"control: retention {arms['none']['retention']:.3f}" in note
    fields = record["tables"]["closed_book_fields"]["rows"]
    tasks = _tasks()
    assert len(fields) == sum(len(t.needles) for t in tasks.values())
    for row in fields:
        needles = tasks[row["task"]].needles[row["field"]]
        assert row["needles"] == len(needles)
        assert row["retained"] == (0.0 if needles else 1.0)
        assert row["fact_accuracy"] is None and row["without_evidence"] is None
    md = path.with_suffix(".md").read_text()
    assert "## Fields: the closed book (method=none) beside Full" in md and "n/a — no reader" in md
    closed = {
        (r["cohort"], r["a"], r["b"]) for r in record["tables"]["decisions"]["rows"] if r["family"] == "vs closed book"
    }
    assert ("control", "Full", "none") in closed  # Full against the closed book, in its own family
    assert "exact paired sign-flip test over tasks" in md


def test_compare_handles_the_closed_book(offline):
    _, _, _, path = offline
    proc = washexp_cli("compare", str(path), str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    means = found.get("data", found).get("means") if isinstance(found, dict) else None
    text = proc.stdout
    assert '"none"' in text, text[:2000]
    assert means is None or any(m["arm"] == "none" for m in means)
