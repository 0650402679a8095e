"""The main job end to end: a real Hydra multirun into a real SQLite MLflow store."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import run_cli


def _runs(store: Path):
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    exp = client.get_experiment_by_name("compaction")
    runs = client.search_runs([exp.experiment_id], max_results=5000)
    return client, [r for r in runs if r.data.tags["washexp.kind"] != "decisions"]  # arms and units only


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    store = tmp_path_factory.mktemp("sweep")
    first = run_cli(["-m", "method=S,H", "topn=0..5"], store, premade=True)
    client, runs = _runs(store)
    return store, client, runs, first


def test_twelve_arms_and_168_conditions(sweep):
    _, _, runs, _ = sweep
    arms = [r for r in runs if r.data.tags["washexp.kind"] == "arm"]
    conditions = [r for r in runs if r.data.tags["washexp.kind"] == "condition"]
    assert len(arms) == 12 and len(conditions) == 168
    assert {r.data.tags["mlflow.runName"] for r in arms} == {f"{m} top{n} · arm" for m in "SH" for n in range(6)}
    assert all(r.info.status == "FINISHED" for r in runs)
    by_arm = {a.info.run_id: 0 for a in arms}
    for c in conditions:
        by_arm[c.data.tags["mlflow.parentRunId"]] += 1
    assert set(by_arm.values()) == {14}


def test_offline_runs_record_retention_and_no_accuracy(sweep):
    _, _, runs, _ = sweep
    for r in runs:
        metrics = r.data.metrics
        assert not any("accuracy" in k or "all_fields_correct" in k for k in metrics), r.data.tags["mlflow.runName"]
        if r.data.tags["washexp.kind"] == "arm":
            assert {"primary/retention", "control/retention", "all/retention"} <= metrics.keys()
            assert metrics["primary/tasks"] == 4 and metrics["control/tasks"] == 10
        assert r.data.params["model"] == "reference" and r.data.params["platform"] == "reference"


def test_second_identical_invocation_creates_nothing(sweep):
    store, _, runs, _ = sweep
    again = run_cli(["-m", "method=S,H", "topn=0..5"], store)
    _, after = _runs(store)
    fused = [r for r in after if r.data.tags["method"] in ("S", "H") and r.data.tags["washexp.kind"] != "link"]
    assert len(fused) == len(runs) == 180
    # both commands write to one sweep folder, so one sweep id: its own arms need no link
    assert not [r for r in after if r.data.tags["washexp.kind"] == "link"]
    assert (again.stdout + again.stderr).count("finished already") == 12


def _artifact(client, run, path) -> bytes:
    local = client.download_artifacts(run.info.run_id, path)
    return Path(local).read_bytes()


def test_summaries_and_rankings_are_byte_identical_across_n(sweep):
    _, client, runs, _ = sweep
    for method in "SH":
        for task in ("payment", "server_error", "backup"):
            seen = {}
            for r in runs:
                tags = r.data.tags
                if tags["washexp.kind"] == "condition" and tags["method"] == method and tags["task"] == task:
                    ranking = json.loads(_artifact(client, r, "ranking/g0.json"))
                    seen[int(tags["topn"])] = (
                        _artifact(client, r, "summary/g0.txt"),
                        ranking["scores"],
                        ranking["order"],
                    )
                    assert ranking["selected"] == sorted(ranking["order"][: int(tags["topn"])])
            assert sorted(seen) == list(range(6))
            assert len({(s, json.dumps(sc), json.dumps(o)) for s, sc, o in seen.values()}) == 1


def test_manifest_hashes_match_the_files(sweep):
    _, client, runs, _ = sweep
    run = next(r for r in runs if r.data.tags.get("mlflow.runName") == "H top2 · checkout_504")
    root = Path(client.download_artifacts(run.info.run_id, ""))
    manifest = json.loads((root / "manifest.json").read_text())
    assert {"artifacts", "fixture", "source"} <= manifest.keys()
    files = [p for p in root.rglob("*") if p.is_file() and p.name != "manifest.json"]
    assert sorted(p.relative_to(root).as_posix() for p in files) == sorted(manifest["artifacts"])
    for p in files:
        digest = hashlib.sha256(p.read_bytes()).hexdigest()
        rel = p.relative_to(root).as_posix()
        assert manifest["artifacts"][rel] == digest
        assert run.data.tags[f"washexp.sha256.{rel}"] == digest
    fixture = Path(__file__).resolve().parent.parent / "fixtures" / "compaction" / "checkout_504"
    for rel, digest in manifest["fixture"].items():
        assert hashlib.sha256((fixture / rel).read_bytes()).hexdigest() == digest
    manifest_digest = hashlib.sha256((root / "manifest.json").read_bytes()).hexdigest()
    assert run.data.tags["washexp.sha256.manifest"] == manifest_digest


def test_full_arm_runs_once_and_keeps_every_needle(sweep):
    store, client, before, _ = sweep
    run_cli(["-m", "method=full", "topn=0,3"], store)
    _, runs = _runs(store)
    full = [r for r in runs if r.data.tags["method"] == "full"]
    arms = [r for r in full if r.data.tags["washexp.kind"] == "arm"]
    assert len(arms) == 1  # topn does not split Full into two arms
    assert len(full) == 15
    assert arms[0].data.metrics["all/retention"] == 1.0
    assert arms[0].data.metrics["all/contexts_shortened"] == 0


def test_fusion_never_loses_what_a_smaller_n_kept(sweep):
    # Top N+1 is Top N plus one unit, with the same summary: retention cannot drop.
    _, _, runs, _ = sweep
    cond = {
        (r.data.tags["method"], int(r.data.tags["topn"]), r.data.tags["task"]): r.data.metrics["retention"]
        for r in runs
        if r.data.tags["washexp.kind"] == "condition"
    }
    for (method, n, task), value in cond.items():
        if n < 5:
            assert cond[(method, n + 1, task)] >= value


def test_a_sweep_shipped_outside_a_hydra_run_keeps_its_outbox_in_the_temp_dir(tmp_path):
    """Only "HydraConfig was not set" means "no Hydra run": the outbox goes to the temp dir. (It
    once caught every exception, so a bug in finding the sweep dir moved the outbox silently.)"""
    import pickle
    import tempfile

    from washexp.engine.sweep import Sweep

    sweep = Sweep(tmp_path)
    try:
        shipped = pickle.loads(pickle.dumps(sweep))
        assert shipped.outbox == sweep.outbox and sweep.outbox is not None
        assert sweep.outbox.parent == Path(tempfile.gettempdir()).resolve() or sweep.outbox.parent == Path(
            tempfile.gettempdir()
        )
    finally:
        sweep.close()
        if sweep.outbox is not None:
            sweep.outbox.rmdir()
