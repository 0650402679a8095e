"""``washexp compare``: a planted regression is found and named (exit 1); two identical sweeps pass."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import ROOT, run_cli
from washexp.wash.compare import needle_class

WASH = ["benchmark=wash", "measurement=ceiling", "store=[near-wall,lean]", "operator=approve-all"]


def _compare(store: Path, *args: str, experiment: str = "wash") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "washexp.cli", "compare", *args, "--experiment", experiment]
        + ["--tracking-uri", f"sqlite:///{store / 'mlflow.db'}"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )


def _measurement_runs(store: Path) -> list[str]:
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    exp = client.get_experiment_by_name("wash")
    runs = client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])
    return [r.info.run_id for r in runs if r.data.tags["washexp.kind"] == "measurement"]


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    store = tmp_path_factory.mktemp("compare")
    # A: the reference washer's near-duplicate rule at a strict threshold; B: one rule loosened
    run_cli([*WASH, "washer.near_dup_jaccard=0.95", f"hydra.run.dir={store / 'a'}"], store)
    run_cli([*WASH, "washer.near_dup_jaccard=0.5", f"hydra.run.dir={store / 'b'}"], store)
    a, b = _measurement_runs(store)
    return store, a, b


def test_a_loosened_rule_is_a_regression_with_the_lost_needles_named(sweeps):
    store, a, b = sweeps
    proc = _compare(store, a, b)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("REGRESSION") and "LOST in B: near-wall m13 '`payout_sent_v4`" in proc.stdout
    data = json.loads(_compare(store, a, b, "--json").stdout)
    assert data["regression"] and data["needles_lost"] >= 1
    assert {"store": "near-wall", "id": "m13"}.items() <= data["lost_in_b"][0].items()


def test_the_same_sweep_compared_with_itself_passes(sweeps, tmp_path):
    store, a, _ = sweeps
    proc = _compare(store, a, a)
    assert proc.returncode == 0 and proc.stdout.startswith("no regression: 0 needle(s) lost"), proc.stdout
    # records exported to files compare alike
    out = subprocess.run(
        [sys.executable, "-m", "washexp.cli", "export", "--experiment", "wash"]
        + ["--tracking-uri", f"sqlite:///{store / 'mlflow.db'}", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    record = next(tmp_path.glob("wash-*.json"))
    assert json.loads(record.read_text())["schema"] == 1
    assert _compare(store, str(record), str(record)).returncode == 0


def test_usage_errors_are_one_line_exit_2(sweeps, tmp_path):
    store, a, _ = sweeps
    bad = tmp_path / "bad.json"
    bad.write_text('{"topic": "wash"}')
    for args in ([a], [a, "no-such-sweep"], [str(bad), a]):
        proc = _compare(store, *args)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


@pytest.mark.parametrize(
    ("needle", "shape"),
    [
        ("[[deploy-runbook]]", "wikilink"),
        ("v2.31.0 shipped 2026-05-12", "version"),
        ("14-May-2026", "date"),
        ("C:\\ops\\payouts.ini", "path"),
        ("`retry_limit`", "config key"),
        ("pool size 40", "number"),
        ("never page the on-call twice", "prose"),
    ],
)
def test_needle_classes_come_from_the_shape(needle, shape):
    assert needle_class(needle) == shape


def _compaction_record(retained_b: float, retention_b: float) -> dict:
    tasks = [
        {"arm": "S top3", "cohort": "primary", "task": t, "failed": False, "retention": r, "fact_accuracy": None}
        for t, r in (("payment", 0.8), ("server_error", retention_b), ("checkout_504", 0.6))
    ]
    fields = [
        {"arm": "S top3", "task": "server_error", "field": "request_id", "retained": retained_b},
        {"arm": "S top3", "task": "payment", "field": "incident_id", "retained": 1.0},
    ]
    return {"schema": 1, "topic": "compaction", "data": {"compaction_tasks": tasks, "compaction_fields": fields}}


def test_compaction_fields_lost_and_mean_drops_are_named():
    from washexp.compaction.compare import compare

    same = compare(_compaction_record(1.0, 0.9), _compaction_record(1.0, 0.9))
    assert same.needles_lost == 0 and same.worst_drop == 0 and not same.regressed(0, 0.05)
    worse = compare(_compaction_record(1.0, 0.9), _compaction_record(0.0, 0.3))
    assert worse.needles_lost == 1 and worse.worst_drop == pytest.approx(0.2)
    assert worse.regressed(0, 0.05) and "LOST in B: S top3 · server_error · request_id" in worse.lines[0]
    (mean,) = [m for m in worse.data["means"] if m["metric"] == "retention"]
    assert mean["diff"] == pytest.approx(-0.2) and mean["ci_low"] <= mean["diff"] <= mean["ci_high"]
