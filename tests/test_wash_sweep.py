"""The wash benchmark end to end: the three measurements as a real Hydra multirun into a real
SQLite MLflow store, offline with the reference washer, then its record; no fixture touched."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import ROOT, run_cli

SWEEP = ["-m", "benchmark=wash", "measurement=ceiling,infinity,sawtooth"]


def _fixtures_digest() -> str:
    h = hashlib.sha256()
    for p in sorted((ROOT / "fixtures").rglob("*")):
        if p.is_file():
            h.update(p.relative_to(ROOT).as_posix().encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    store = tmp_path_factory.mktemp("wash")
    before = _fixtures_digest()
    run_cli(SWEEP, store, premade=True)
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    exp = client.get_experiment_by_name("wash")
    return store, client, client.search_runs([exp.experiment_id], max_results=5000), before


def test_no_fixture_file_is_modified(sweep):
    _, _, _, before = sweep
    assert _fixtures_digest() == before


def test_three_measurements_each_store_a_nested_run(sweep):
    _, _, runs, _ = sweep
    assert all(r.info.status == "FINISHED" for r in runs), [r.data.tags["mlflow.runName"] for r in runs]
    kinds = {}
    for r in runs:
        kinds.setdefault(r.data.tags["washexp.kind"], []).append(r)
    assert sorted(r.data.tags["measurement"] for r in kinds["measurement"]) == ["ceiling", "infinity", "sawtooth"]
    stores = len(list((ROOT / "fixtures" / "wash").glob("*/expected.json")))
    per = {}
    for r in kinds["wash-store"]:
        per.setdefault(r.data.tags["measurement"], []).append(r.data.tags["arm"])
    assert sorted(per["ceiling"]) == ["off"] * stores
    assert sorted(per["infinity"]) == ["configured"] * stores + ["off"] * stores
    assert sorted(r.data.tags["arm"] for r in kinds["wash-arm"]) == ["A", "B"]


def test_rounds_are_step_metrics_and_the_store_sha256_is_recorded(sweep):
    _, client, runs, _ = sweep
    run = next(
        r for r in runs if r.data.tags.get("store") == "dup-heavy" and r.data.tags.get("measurement") == "infinity"
    )
    history = client.get_metric_history(run.info.run_id, "round_muscle_kept")
    assert [m.step for m in history] == list(range(1, len(history) + 1)) and len(history) == 10
    rounds = Path(client.download_artifacts(run.info.run_id, "rounds.json"))
    assert '"sha256"' in rounds.read_text()


def test_the_lean_store_stays_a_no_op_and_the_sawtooth_saves(sweep):
    _, _, runs, _ = sweep
    lean = [r for r in runs if r.data.tags.get("store") == "lean"]
    assert lean and all(r.data.metrics["first_bad_round"] == 0 for r in lean)  # never changed
    saw = next(
        r for r in runs if r.data.tags.get("washexp.kind") == "measurement" and r.data.tags["measurement"] == "sawtooth"
    )
    assert saw.data.metrics["A/washes"] >= 2 and saw.data.metrics["delta_pct"] > 0


def test_the_wash_record(sweep, tmp_path):
    store = sweep[0]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "washexp.cli",
            "export",
            "--experiment",
            "wash",
            "--tracking-uri",
            f"sqlite:///{store / 'mlflow.db'}",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    md = next(tmp_path.glob("wash-reference-*.md")).read_text(encoding="utf-8")
    for title in ("Measurement 1", "Measurement 2", "Measurement 3", "Muscle losses, named"):
        assert title in md
    assert next(tmp_path.glob("wash-reference-*-sawtooth.png")).stat().st_size > 1000


def test_a_failing_washer_command_is_a_recorded_failed_round(tmp_path):
    """...with the program's output kept in the run, and the confinement that was in force."""
    fail = f"washer.command=[{sys.executable},-c,'import sys; print(\\'half way\\'); sys.exit(3)']"
    run_cli(["benchmark=wash", "measurement=ceiling", "store=superseded", "washer=command", fail], tmp_path)
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = client.get_experiment_by_name("wash")
    (run,) = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("store") == "superseded"]
    assert run.info.status == "FINISHED" and run.data.metrics["failed_rounds"] == 1
    rounds = json.loads(Path(client.download_artifacts(run.info.run_id, "rounds.json")).read_text())
    assert rounds[-1]["failed"] and "exit" in rounds[-1]["failed"], rounds[-1]
    out = Path(client.download_artifacts(run.info.run_id, f"rounds/r{rounds[-1]['round']:02d}/command.stdout.txt"))
    assert out.read_text() == "half way\n"
    assert run.data.params["confinement"].startswith("subreaper")
