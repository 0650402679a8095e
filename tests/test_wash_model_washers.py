"""The model washers (coalwash, plain) through the real openai client and the recorder, against a
scripted OpenAI-wire server on 127.0.0.1 (real HTTP, no mocks); their sweeps through run.py; the
strict replay of a recorded sweep with no server; the refusals before any run."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import ROOT, run_cli
from tests.wash_model_server import WashScript, serve
from washexp.models.openai_client import OpenAIModel
from washexp.models.recorder import Recorder
from washexp.wash import pipeline
from washexp.wash.coalwash import gauge
from washexp.wash.coalwash.files import read_md
from washexp.wash.coalwash.operators import make_operator
from washexp.wash.plan import PlanItem
from washexp.wash.store.stores import load_stores
from washexp.wash.washer import target_of
from washexp.wash.washers import make_washer
from washexp.wash.washers.model import WasherModel

STORES = ROOT / "fixtures" / "wash"
SUPERSEDED_FAT = {
    "settled baseline": "superseded",
    "matter of record": "done-point-in-time",
    "archive space": "done-point-in-time",
    "Scratch pad kept open": "done-point-in-time",
}
SWEEP = ["-m", "benchmark=wash", "measurement=ceiling,infinity,sawtooth", "store=[superseded,lean]", "model=openai"]
MODEL = "scripted-wash-model"


def _model(base_url: str, recordings: Path) -> WasherModel:
    client = OpenAIModel(MODEL, base_url, max_retries=0)
    return WasherModel(Recorder(client, MODEL, recordings), 0.0, 1024, {})


def _recorded_tokens(recordings: Path) -> int:
    total = 0
    for path in recordings.rglob("*.json"):
        response = json.loads(path.read_text(encoding="utf-8"))["response"]
        total += response["prompt_tokens"] + response["completion_tokens"]
    return total


def _copy(store: str, tmp: Path) -> Path:
    dst = tmp / store
    shutil.copytree(STORES / store, dst, ignore=shutil.ignore_patterns("expected.json"))
    return dst


OUTSIDER = """versions.md · 6-8 · superseded · the old deployment target, replaced by v2.9.0
migration-log.md · 4 · done-point-in-time · a meeting that happened
migration-log.md · 6 · done-point-in-time · a chore that is done
- `scratch-2026-03.md` · all · done-point-in-time · a scratch pad whose lesson was copied
versions.md · 3 · duplicate · restates the history line
migration-log.md · 7 · contradiction-candidate · the rule may conflict with migration 40
this line is not a flag
versions.md · 40-42 · superseded · a range past the end of the file
migration-log.md · 3 · over-verbose · wordy
MEMORY.md · 5 · done-point-in-time · the scratch file's index line"""
INSIDER = "\n".join(
    [
        '{"flag": 1, "verdict": "accept", "reason": "v2.9.0 replaced it"}',
        '{"flag": 2, "verdict": "accept", "reason": "no forward value"}',
        '{"flag": 3, "verdict": "shrink", "text": "- 2026-03-05: wiki page for migration 40 archived.", "reason": "r"}',
        '{"flag": 4, "verdict": "accept", "reason": "copied already"}',
        '{"flag": 5, "verdict": "reject", "reason": "the live build line is load-bearing"}',
        '{"flag": 6, "verdict": "contradiction", "reason": "cannot verify which rule holds"}',
        '{"flag": 7, "verdict": "shrink", "text": "- 2026-01-22, migration 38: lock before backfilling `entries`."}',
        "flag 8: accept please",
    ]
)


def test_coalwash_outsider_insider_flow_on_a_real_store_copy(tmp_path):
    store = _copy("superseded", tmp_path)
    files = read_md(store)
    script = WashScript()
    script.queued["outsider"] += [OUTSIDER]
    script.queued["insider"] += [INSIDER]
    script.queued["check"] += ["PASS", "FAIL · 'always' was dropped: the claim is weaker"]
    with serve(script) as url:
        washer = make_washer({"name": "coalwash", "keep_date": "2026-02-01"}, _model(url, tmp_path / "rec"))
        proposal = washer.propose(files, (), tmp_path / "scratch")
    assert [r["kind"] for r in script.requests] == ["outsider", "insider", "check", "check"]
    items = [(i.file, i.op, i.start, i.end, i.text) for i in proposal.plan.items]
    assert items == [
        ("versions.md", "delete", 6, 8, None),  # accept
        ("migration-log.md", "delete", 4, 4, None),  # accept
        ("migration-log.md", "replace", 6, 6, "- 2026-03-05: wiki page for migration 40 archived."),  # shrink, PASS
        ("scratch-2026-03.md", "delete-file", 1, 1, None),  # accept of `all`
    ]
    (keep,) = proposal.keeps  # reject -> keeps.json
    assert keep.target == target_of(PlanItem("versions.md", 3, 3, "duplicate", "x", "delete"), files)
    assert (keep.reason, keep.date) == ("the live build line is load-bearing", "2026-02-01")
    notes = "\n".join(proposal.notes)
    assert "contradiction for the human gate, nothing changed: migration-log.md · 7" in notes
    assert "a line dropped (not `file · line-range · class · reason`): this line is not a flag" in notes
    assert "line-range 40-42 is outside versions.md (lines 1-8)" in notes
    assert "flag 7 dropped (second check failed: 'always' was dropped" in notes  # a failed check drops a shrink
    assert "flag 8 dropped (the insider gave no verdict)" in notes
    assert "insider: not a JSON verdict" in notes
    assert proposal.cost_tokens == _recorded_tokens(tmp_path / "rec") > 0  # the endpoint's usage, 4 calls
    assert set(proposal.artifacts) == {
        "coalwash.outsider.txt",
        "coalwash.insider.txt",
        "coalwash.checks.txt",
        "coalwash.items.json",
    }
    assert files == read_md(store)  # proposing writes nothing


def test_coalwash_through_the_pipeline_writes_keeps_and_honours_them(tmp_path):
    store = _copy("superseded", tmp_path)
    (expected,) = load_stores(STORES, "superseded")
    operator = make_operator("benchmark", tuple((n.id, n.needle) for n in expected.expected.muscle))
    script = WashScript()
    script.queued["outsider"] += [OUTSIDER, "versions.md · 3 · duplicate · restates the history line"]
    script.queued["insider"] += [INSIDER]
    script.queued["check"] += ["PASS", "FAIL · weaker"]
    with serve(script) as url:
        washer = make_washer({"name": "coalwash"}, _model(url, tmp_path / "rec"))
        first = pipeline.wash(store, washer, gauge.load_gauge("off"), operator)
        second = pipeline.wash(store, washer, gauge.load_gauge("off"), operator)
    written = json.loads((store / "keeps.json").read_text(encoding="utf-8"))
    assert written["v"] == 1  # CoalWash's file: {v, keeps}
    keeps = written["keeps"]
    assert [k["reason"] for k in keeps] == ["the live build line is load-bearing"]
    assert keeps[0]["date"] == "2026-01-01"
    assert first.cost_tokens > 0 and first.applied >= 1
    assert "scratch-2026-03.md" not in read_md(store)
    assert "settled baseline" not in read_md(store)["versions.md"]
    assert second.steps[-1].proposed == []  # the kept line flagged again is dropped, no insider call
    assert "kept by an earlier wash (keeps.json)" in "\n".join(second.steps[-1].notes)
    assert [r["kind"] for r in script.requests] == ["outsider", "insider", "check", "check", "outsider"]


def test_plain_compresses_one_file_and_writes_the_reply_back(tmp_path):
    text = (STORES / "lean" / "conventions.md").read_text(encoding="utf-8")
    reply = "# Conventions\n- Page the secondary after 15 min (policy `dispatch-p1`)."
    script = WashScript()
    script.queued["plain"] += [f"```markdown\n{reply}\n```\n"]
    files = {"conventions.md": text, "empty.md": "", "pinned.md": "---\npinned: true\n---\nkeep me\n"}
    with serve(script) as url:
        proposal = make_washer({"name": "plain"}, _model(url, tmp_path / "rec")).propose(files, (), tmp_path)
    (item,) = proposal.plan.items
    assert (item.file, item.op, item.start, item.end, item.text) == ("conventions.md", "replace", 1, 6, reply)
    assert len(script.requests) == 1 and "Keep every fact" in script.requests[0]["body"]["messages"][0]["content"]
    assert proposal.cost_tokens == _recorded_tokens(tmp_path / "rec") > 0
    assert any("empty.md is empty" in n for n in proposal.notes)
    assert any("pinned.md is pinned" in n for n in proposal.notes)


def test_plain_told_a_target_asks_again_a_file_that_missed_its_band_and_keeps_the_closest(tmp_path):
    """Issue 49: a 1.5B model told a byte target missed the ±5 % band on every store. A file whose
    version misses its share is asked again from its original text, told its last size; only sizes
    guide the choice, and every attempt is kept as an artifact."""
    from washexp.wash.washers.plain import REFITS, PlainWasher

    text = "x" * 1000 + "\n"
    files = {"notes.md": text}
    fits, long, short = "a" * 500, "b" * 900, "c" * 100
    script = WashScript()
    script.queued["plain"] += [long, fits]  # the second attempt lands in band: no third
    with serve(script) as url:
        washer = PlainWasher(model=_model(url, tmp_path / "rec"), target_bytes=500, band_pct=5.0)
        proposal = washer.propose(files, (), tmp_path)
    (item,) = proposal.plan.items
    assert item.text == fits and len(script.requests) == 2
    asked = script.requests[1]["body"]["messages"][0]["content"]
    assert "came to 900 bytes, too long: cut more" in asked and text.strip() in asked  # from the original
    assert set(proposal.artifacts) == {"plain.notes.md.txt", "plain.notes.md.refit1.txt"}
    script = WashScript()
    script.queued["plain"] += [long, "d" * 460, short]  # never in band: the closest of all attempts is kept
    with serve(script) as url:
        washer = PlainWasher(model=_model(url, tmp_path / "rec2"), target_bytes=500, band_pct=5.0)
        (item,) = washer.propose(files, (), tmp_path).plan.items
    assert item.text == "d" * 460 and len(script.requests) == 1 + REFITS
    assert "came to 460 bytes, too short: keep more" in script.requests[2]["body"]["messages"][0]["content"]
    script = WashScript()
    script.queued["plain"] += [long]  # no band (a chain pass, a plain wash): one attempt, as before
    with serve(script) as url:
        washer = PlainWasher(model=_model(url, tmp_path / "rec3"), target_bytes=500)
        (item,) = washer.propose(files, (), tmp_path).plan.items
    assert item.text == long and len(script.requests) == 1


def _runs(tracking: Path) -> list:
    client = MlflowClient(f"sqlite:///{tracking / 'mlflow.db'}")
    exp = client.get_experiment_by_name("wash")
    return client.search_runs([exp.experiment_id], max_results=5000)


def test_model_washers_refuse_model_reference_and_plain_refuses_the_gates(tmp_path):
    proc = run_cli(["benchmark=wash", "washer=coalwash", "store=lean"], tmp_path, check=False)
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines[-1].endswith(
        "washer coalwash needs a served model: model=reference has none "
        "(use model=openai model.name=... endpoint.base_url=...)"
    ), proc.stderr
    proc = run_cli(
        ["benchmark=wash", "washer=plain", "store=lean", "model=openai", "model.name=x"], tmp_path, check=False
    )
    assert proc.returncode == 2 and "runs only with gates=false" in proc.stderr
    db = tmp_path / "mlflow.db"
    if db.exists():  # an experiment may exist; no run does
        assert sqlite3.connect(db).execute("select count(*) from runs").fetchone()[0] == 0


def _record(tracking: Path, out: Path) -> tuple[dict, str]:
    """``washexp export --experiment wash`` of ``tracking``: the record's JSON and markdown."""
    uri = f"sqlite:///{tracking / 'mlflow.db'}"
    args = [
        sys.executable,
        "-m",
        "washexp.cli",
        "export",
        "--experiment",
        "wash",
        "--tracking-uri",
        uri,
        "--out",
        str(out),
    ]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return (
        json.loads(next(out.glob("wash-openai-compatible-*.json")).read_text(encoding="utf-8")),
        next(out.glob("wash-openai-compatible-*.md")).read_text(encoding="utf-8"),
    )


def _scores(runs) -> dict[str, dict]:
    """Every metric but the call counts (a replay's calls are replayed, not live: counted apart)."""
    calls = ("calls_live", "calls_replayed")
    return {r.data.tags["mlflow.runName"]: {k: v for k, v in r.data.metrics.items() if k not in calls} for r in runs}


@pytest.mark.slow
def test_coalwash_sweep_then_a_strict_replay_with_no_server(tmp_path):
    script = WashScript(fat=SUPERSEDED_FAT)
    recordings = f"endpoint.recordings={tmp_path / 'rec'}"
    (tmp_path / "a").mkdir()
    with serve(script) as url:
        run_cli(
            [*SWEEP, "washer=coalwash", f"model.name={MODEL}", f"endpoint.base_url={url}", recordings], tmp_path / "a"
        )
    calls = len(script.requests)
    assert calls > 0 and {r["kind"] for r in script.requests} >= {"outsider", "insider"}
    first = _runs(tmp_path / "a")
    assert first and all(r.info.status == "FINISHED" for r in first)
    assert {r.data.tags["gates"] for r in first} == {"true"}
    superseded = next(
        r for r in first if r.data.tags.get("store") == "superseded" and r.data.tags["measurement"] == "ceiling"
    )
    assert superseded.data.metrics["cost_tokens"] > 0 and superseded.data.metrics["fat_removed_pct"] > 0
    # issue 49: the washer samples (model.generation_temperature) and each round is its own draw, so
    # a store left unchanged is asked again, never answered by replaying round 1
    assert {r["body"]["temperature"] for r in script.requests if r["kind"] != "tokenize"} == {0.7}
    asked = [json.loads(f.read_text())["request"] for f in (tmp_path / "rec").rglob("*.json")]
    outsider = [a for a in asked if a["messages"][0]["content"].startswith("You are an outsider")]
    draws = {a["generation"] for a in outsider}
    assert draws >= set(range(1, int(superseded.data.metrics["rounds"]) + 1)), draws
    # and each measurement's arm draws in its own series: the ceiling's round 1 and the infinity
    # loop's on the same store are two calls, never one replayed into the other
    series = {a.get("series") for a in outsider}
    assert series >= {"ceiling · coalwash · gauge off", "infinity · coalwash · gauge off"}, series
    same_words = Counter(a["messages"][0]["content"] for a in outsider if a["generation"] == 1)
    assert max(same_words.values()) >= 2  # the same words (a store's first round) asked in two series
    # the scripted washer is deterministic: once the fat is gone its rounds copy one another, and
    # what it spent on them is counted
    assert superseded.data.metrics["rounds_copied"] >= 1
    assert 0 < superseded.data.metrics["cost_tokens_idle"] < superseded.data.metrics["cost_tokens"]
    (tmp_path / "b").mkdir()
    run_cli([*SWEEP, "washer=coalwash", f"model.name={MODEL}", "endpoint.replay=strict", recordings], tmp_path / "b")
    assert len(script.requests) == calls  # the server is gone anyway: strict made no call
    replay = _runs(tmp_path / "b")
    assert all(r.info.status == "FINISHED" for r in replay)
    assert _scores(replay) == _scores(first)
    assert {r.data.metrics.get("calls_live") for r in replay} == {0.0}  # nothing sent
    record, md = _record(tmp_path / "a", tmp_path / "record")
    rows = record["tables"]["washers"]["rows"]
    assert {r["measurement"] for r in rows} == {"ceiling", "infinity", "sawtooth"}
    assert all(r["washer"] == "coalwash" and r["gates"] == "on" for r in rows)
    assert all(r["cost_tokens"] > 0 for r in rows if r["arm"].endswith("(off)"))  # every round asks the outsider
    configured = next(r for r in rows if r["arm"].endswith("(configured)"))
    assert configured["cost_tokens"] == 0  # the gauge says LEAN: a hard stop before the washer, no call
    ceiling = next(r for r in rows if r["measurement"] == "ceiling")
    assert ceiling["fat_removed"] > 0 and ceiling["tokens_cut"] > 0 and ceiling["muscle_total"] == 20
    assert "Washers side by side" in md and "coalwash: CoalWash's full tier" in md
    seats = record["provenance"]["model per seat that made a call"]
    assert seats == {f"coalwash: {kind}": MODEL for kind in sorted({r["kind"] for r in script.requests})}


@pytest.mark.slow
def test_plain_sweep_runs_with_the_gates_off(tmp_path):
    script = WashScript(fat=SUPERSEDED_FAT, lossy=("double-posted",))
    with serve(script) as url:
        run_cli(
            [
                *SWEEP,
                "washer=plain",
                "gates=false",
                f"model.name={MODEL}",
                f"endpoint.base_url={url}",
                f"endpoint.recordings={tmp_path / 'rec'}",
            ],
            tmp_path,
        )
    runs = _runs(tmp_path)
    assert runs and all(r.info.status == "FINISHED" for r in runs)
    assert {r.data.tags["gates"] for r in runs} == {"false"}
    assert all("gates off" in r.data.tags["mlflow.runName"].split(" · ") for r in runs)
    assert {r["kind"] for r in script.requests} == {"plain"}
    record, md = _record(tmp_path, tmp_path / "record")
    rows = record["tables"]["washers"]["rows"]
    assert rows and all(r["washer"] == "plain" and r["gates"] == "off" for r in rows)
    ceiling = next(r for r in rows if r["measurement"] == "ceiling")
    assert ceiling["cost_tokens"] > 0 and ceiling["muscle_kept"] < ceiling["muscle_total"]  # the lossy line went
    assert ceiling["fact_loss_per_round_pct"] > 0
    losses = record["tables"]["muscle_losses"]["rows"]
    assert losses and {r["washer"] for r in losses} == {"plain (gates off)"}
    assert "gates off (the plain-compress control" in md
    assert record["provenance"]["model per seat that made a call"] == {"plain: plain": MODEL}
