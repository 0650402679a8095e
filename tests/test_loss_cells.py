"""Where each fact was lost (the fact ledger and the record's loss cells), end to end against a
real HTTP server on 127.0.0.1 with scripted replies (test equipment, never a model's result).

Traps guarded: a ledger whose kept half is not the retention check or whose answered half is not
the grade (cells crossed the wrong way round); a kept fact answered wrong counted as a compaction
loss, a dropped fact answered right as a reading success; the record's cells not the sum of the
ledgers; a reader-less run given invented answer cells. And ``washexp verify`` regrading the
bundle's raw replies: a bundle without them, a reply changed with its digest (a self-consistent
bundle only regrading can catch), a task edited since grading regraded anyway.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import copy_record, scripted_sweep
from tests.openai_server import Script, serve
from tests.test_export import export
from washexp.compaction.scoring.loss import LEDGER_TABLE, Cell
from washexp.hashing import sha256_bytes
from washexp.tracking.reader import load_table
from washexp.verify import main as verify

TASKS = ("backup", "payment")
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "compaction"


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """``backup``'s reader misreads every kept fact and guesses every dropped one (``inverted``),
    ``payment``'s answers every fact right; Full and S + Top 2, one generation, one answer."""
    root = tmp_path_factory.mktemp("loss-cells")
    script = Script()
    script.reader["backup"] = "inverted"
    with serve(script) as url:
        scripted_sweep(url, root, TASKS, "method=full,S", "topn=2")
    export(root, root / "results", "--bundle")
    (record,) = (root / "results").glob("compaction-scripted-test-server-*.json")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    client = MlflowClient(uri)
    (exp,) = [e for e in client.search_experiments() if e.name == "compaction"]
    runs = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("washexp.kind") == "condition"]
    return root, uri, runs, json.loads(record.read_text())


def _label(run) -> str:
    t = run.data.tags
    return "Full" if t["method"] == "full" else f"{t['method']} top{t['topn']}"


def test_each_fact_lands_in_the_cell_its_two_observations_give(swept):
    _root, uri, runs, _record = swept
    assert len(runs) == 4
    seen = {}
    for run in runs:
        rid = run.info.run_id
        ledger = load_table(uri, LEDGER_TABLE, [rid])
        kept = load_table(uri, "retention.json", [rid]).set_index(["generation", "field"])["retained"]
        right = load_table(uri, "grades.json", [rid]).set_index(["generation", "field"])["correct"]
        assert len(ledger) == len(kept) == len(right)
        for _, row in ledger.iterrows():
            k, a = bool(kept[row["generation"], row["field"]]), bool(right[row["generation"], row["field"]])
            assert (row["kept"], row["answered"]) == (k, a)
            assert row["cell"] == Cell.of(k, a).value
        seen[_label(run), run.data.tags["task"]] = ledger["cell"].value_counts().to_dict()
        assert f"washexp.sha256.{LEDGER_TABLE}" in run.data.tags  # in the run's sha256 manifest
        shares = ledger["cell"].value_counts(normalize=True)
        for c in Cell:
            assert run.data.metrics[f"facts_{c.value}"] == pytest.approx(shares.get(c.value, 0.0))
    # The inverted reader on a compacted context: a kept fact answered wrong is a reading loss, a
    # dropped fact answered right is recovered; never the other way round.
    mixed = seen["S top2", "backup"]
    assert mixed.get("kept_missed", 0) >= 1 and mixed.get("dropped_answered", 0) >= 1, mixed
    assert set(mixed) <= {"kept_missed", "dropped_answered"}
    assert set(seen["Full", "backup"]) == {"kept_missed"}
    assert set(seen["Full", "payment"]) == {"kept_answered"}
    assert set(seen["S top2", "payment"]) == {"dropped_answered"}  # a reader that knows every fact


def test_the_record_has_the_cells_per_arm_and_the_plot(swept):
    root, uri, runs, record = swept
    table = record["tables"]["loss_cells"]
    ledgers = pd.concat(
        [
            load_table(uri, LEDGER_TABLE, [r.info.run_id]).assign(arm=_label(r), cohort=r.data.tags["cohort"])
            for r in runs
        ]
    )
    assert len(table["rows"]) == len(ledgers[["arm", "cohort"]].drop_duplicates())
    for row in table["rows"]:
        mine = ledgers[(ledgers["arm"] == row["arm"]) & (ledgers["cohort"] == row["cohort"])]
        for c in Cell:
            assert row[f"{c.value}_n"] == int((mine["cell"] == c.value).sum())
        assert sum(row[c.value] for c in Cell) == pytest.approx(1.0)
    (plot,) = [p for p in record["plots"] if "compaction-vs-reading-loss" in p["file"]]
    assert (root / "results" / plot["file"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (root / "results").glob("compaction-scripted-test-server-*.md")
    assert "Where each fact was lost" in next(md).read_text()


def test_the_ledger_crosses_kept_with_answered_and_a_missing_context_drops_every_fact():
    """Without a server: two answers on a context that kept ``a`` and dropped ``b``, and a
    generation with no context (its answer slots all dropped and missed)."""
    from types import SimpleNamespace

    from washexp.compaction.scoring.grading import AnswerGrade
    from washexp.compaction.scoring.loss import Cells, count, ledger

    where = {"task": "t", "method": "S", "topn": 1}
    gens = [
        SimpleNamespace(g=0, valid=True, missing={"a": [], "b": ["needle"]}),
        SimpleNamespace(g=1, valid=False, missing={"a": [], "b": ["needle"]}),
    ]
    grades = {
        0: [AnswerGrade({"a": False, "b": True}, False, False), AnswerGrade({"a": True, "b": False}, False, False)]
    }
    rows = ledger(where, gens, grades, slots=2, answers=2)
    assert [(r.generation, r.answer, r.field, r.cell) for r in rows] == [
        (0, 0, "a", "kept_missed"),
        (0, 0, "b", "dropped_answered"),
        (0, 1, "a", "kept_answered"),
        (0, 1, "b", "dropped_missed"),
        (1, 0, "a", "dropped_missed"),
        (1, 0, "b", "dropped_missed"),
        (1, 1, "a", "dropped_missed"),
        (1, 1, "b", "dropped_missed"),
    ]
    assert count(r.cell for r in rows) == Cells(1, 1, 5, 1)
    unread = ledger(where, gens, None, slots=2, answers=2)
    assert [(r.generation, r.field, r.kept, r.answered, r.cell) for r in unread] == [
        (0, "a", True, None, None),
        (0, "b", False, None, None),
        (1, "a", False, None, None),
        (1, "b", False, None, None),
    ]
    assert count(r.cell for r in unread) is None


def test_an_arm_whose_runs_predate_the_ledger_says_so_not_no_reader():
    """A model's runs made before the ledger existed have answers but no cells: the row says why."""
    from washexp.compaction.records.loss import NO_LEDGER, NO_READER, ArmCells, loss_table

    old = ArmCells("S top0", "S", 0, "primary", 0, 0, 4, None, None, None)
    unread = ArmCells("S top0", "S", 0, "control", 10, 0, 0, 0.5, None, None)
    rows = loss_table([old, unread]).rows
    facts = [c for c in loss_table([old]).columns if c.key == "facts"][0]
    assert facts.render(rows[0]) == NO_LEDGER and facts.render(rows[1]) == NO_READER


@pytest.fixture
def exported(swept) -> Path:
    root = swept[0]
    (record,) = (root / "results").glob("compaction-scripted-test-server-*.json")
    return record


@pytest.fixture
def copy(exported: Path, tmp_path: Path) -> Path:
    return copy_record(exported, tmp_path)


def test_the_bundled_replies_are_regraded_against_the_tasks(exported, capsys):
    replies = sorted(exported.with_suffix(".bundle").glob("runs/*/answers/g*.json"))
    assert len(replies) == 4, "the bundle keeps the reader's raw replies of every condition"
    assert verify([str(exported), "--tasks", str(FIXTURES)]) == 0
    n = sum(len(json.loads(p.read_text())) for p in replies)
    assert (
        f"{n} replies of 4 runs regraded against the tasks in {FIXTURES}: every grade agrees" in capsys.readouterr().out
    )


def test_a_reply_whose_regrade_differs_is_named(copy, capsys):
    bundle = copy.with_suffix(".bundle")
    reply = sorted(bundle.glob("runs/*/answers/g0.json"))[0]
    doc = json.loads(reply.read_text())
    doc[0]["text"] = '{"facts": {}}'  # every field now wrong; the digest follows, so only regrading sees it
    reply.write_text(json.dumps(doc))
    runs = json.loads((bundle / "runs.json").read_text())
    run_col, tag_col = (runs["columns"].index(c) for c in ("run_id", "tags.washexp.sha256.answers/g0.json"))
    for row in runs["rows"]:
        if row[run_col] == reply.parent.parent.name:
            row[tag_col] = sha256_bytes(reply.read_bytes())
    (bundle / "runs.json").write_text(json.dumps(runs))
    assert verify([str(copy), "--tasks", str(FIXTURES)]) == 1
    err = capsys.readouterr().err
    assert f"run {reply.parent.parent.name} (" in err and "), generation 0, answer 0, field " in err, err
    assert re.search(r"the record's grade \(correct, malformed, format failure\) \((True|False), False, False\), "
                     r"regraded \(False, False, True\)", err), err  # fmt: skip


def test_a_task_changed_since_grading_is_said_not_regraded(copy, tmp_path, capsys):
    tasks = tmp_path / "tasks"
    shutil.copytree(FIXTURES / "backup", tasks / "backup")
    yaml = tasks / "backup" / "task.yaml"
    yaml.write_text(yaml.read_text() + "\n# edited\n")
    assert verify([str(copy), "--tasks", str(tasks)]) == 0
    out = capsys.readouterr().out
    assert "not regraded: backup (changed since it was graded), payment (not in the folder)" in out, out
    assert verify([str(copy), "--tasks", str(tmp_path / "absent")]) == 2
