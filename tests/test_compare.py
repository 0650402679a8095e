"""``washexp compare``: a planted regression is found and named (exit 1); two identical sweeps pass."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import ROOT, run_cli, washexp_cli
from washexp.wash.records.compare import needle_class

WASH = ["benchmark=wash", "measurement=ceiling", "store=[near-wall,lean]", "operator=approve-all"]


def _compare(store: Path, *args: str, experiment: str = "wash") -> subprocess.CompletedProcess:
    uri = f"sqlite:///{store / 'mlflow.db'}"
    return washexp_cli("compare", *args, "--experiment", experiment, "--tracking-uri", uri)


def _run_export(store: Path, out: Path, experiment: str, *args: str) -> subprocess.CompletedProcess:
    uri = f"sqlite:///{store / 'mlflow.db'}"
    return washexp_cli("export", "--experiment", experiment, *args, "--tracking-uri", uri, "--out", str(out))


def _export(store: Path, out: Path, experiment: str, *args: str) -> Path:
    proc = _run_export(store, out, experiment, *args)
    assert proc.returncode == 0, proc.stderr
    assert "Not all runs" not in proc.stderr  # MLflow's noise about tables it did not find
    return next(out.glob(f"{experiment}-*.json"))


def _measurement_runs(store: Path) -> list[str]:
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    exp = client.get_experiment_by_name("wash")
    runs = client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])
    return [r.info.run_id for r in runs if r.data.tags["washexp.kind"] == "measurement"]


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    store = tmp_path_factory.mktemp("compare")
    # A: the reference washer's near-duplicate rule at a strict threshold; B: one rule loosened
    run_cli([*WASH, "washer.near_dup_jaccard=0.95", f"hydra.run.dir={store / 'a'}"], store, premade=True)
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
    record = _export(store, tmp_path, "wash")
    assert json.loads(record.read_text())["schema"] == 1
    assert _compare(store, str(record), str(record)).returncode == 0


def test_a_b_without_a_store_of_a_is_incomplete(sweeps, tmp_path):
    store, a, _ = sweeps
    whole = _export(store, tmp_path / "whole", "wash")
    record = json.loads(whole.read_text())
    record["data"]["wash_rounds"] = [r for r in record["data"]["wash_rounds"] if r["store"] != "near-wall"]
    lean = tmp_path / "lean-only.json"
    lean.write_text(json.dumps(record))
    proc = _compare(store, str(whole), str(lean))
    assert proc.returncode == 1 and proc.stdout.startswith("REGRESSION: 0 needle(s) lost"), proc.stdout
    assert "MISSING in B: ceiling · reference · coalwash-1.0 (off) · near-wall" in proc.stdout.splitlines()[1]
    subset = _compare(store, str(whole), str(lean), "--allow-subset")
    assert subset.returncode == 0 and subset.stdout.startswith("SUBSET: only the "), subset.stdout
    # the sweep itself against the lean-only record: the same verdict
    assert _compare(store, a, str(lean)).returncode == 1


def test_usage_errors_are_one_line_exit_2(sweeps, tmp_path):
    store, a, _ = sweeps
    bad = tmp_path / "bad.json"
    bad.write_text('{"topic": "wash"}')
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"schema": 1, "topic": "wash", "data": {"wash_rounds": [], "wash_muscle": []}}))
    for args in ([a], [a, "no-such-sweep"], [str(bad), a], [a, str(empty)]):
        proc = _compare(store, *args)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_export_of_a_wash_sweep_as_compaction_names_the_experiment(sweeps, tmp_path):
    """The trap: ``export --sweep <a wash sweep>`` (compaction, the default) said the store had no
    compaction experiment, not that the sweep is a wash one."""
    store, a, _ = sweeps
    sweep = MlflowClient(f"sqlite:///{store / 'mlflow.db'}").get_run(a).data.tags["sweep"]
    proc = _run_export(store, tmp_path, "compaction", "--sweep", sweep)
    assert (proc.returncode, proc.stdout, list(tmp_path.iterdir())) == (2, "", [])
    assert proc.stderr.splitlines() == [
        f"washexp: --sweep {sweep}: no run of experiment 'compaction' carries this sweep id; "
        "it is a sweep of 'wash': add --experiment wash"
    ]
    assert _run_export(store, tmp_path, "wash", "--sweep", sweep).returncode == 0


@pytest.mark.parametrize("sides", [["a-sweep", "b-sweep"], ["model:x", "model:y"]])
def test_sweep_ids_outside_a_project_say_how_to_name_it(tmp_path, monkeypatch, capsys, sides):
    """The trap: from a folder outside any project there is no store, and ``compare A B`` was a
    26-line AttributeError from the store's path check."""
    from washexp.compare import main

    monkeypatch.chdir(tmp_path)
    assert main(sides) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"washexp compare: {sides[0]}: not a record .json file, and {tmp_path} is not inside")
    assert "washexp -C <project> compare" in line and "--tracking-uri" in line


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
        {"arm": "S top3", "task": "checkout_504", "field": "setting", "retained": 0.5},
    ]
    return {"schema": 1, "topic": "compaction", "data": {"compaction_tasks": tasks, "compaction_fields": fields}}


def test_compaction_fields_lost_and_mean_drops_are_named():
    from washexp.compaction.records.compare import compare

    same = compare(_compaction_record(1.0, 0.9), _compaction_record(1.0, 0.9))
    assert same.needles_lost == 0 and same.worst_drop == 0 and not same.regressed(0, 0.05)
    assert same.cells == 3 and same.missing_cells == 0
    worse = compare(_compaction_record(1.0, 0.9), _compaction_record(0.0, 0.3))
    assert worse.needles_lost == 1 and worse.worst_drop == pytest.approx(0.2)
    assert worse.regressed(0, 0.05) and "LOST in B: S top3 · server_error · request_id" in worse.lines[0]
    (mean,) = [m for m in worse.data["means"] if m["metric"] == "retention"]
    assert mean["diff"] == pytest.approx(-0.2) and mean["ci_low"] <= mean["diff"] <= mean["ci_high"]


PLANTED = ["method=S", "topn=0", "task=[payment,checkout_504]"]


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """A: S top0 on two tasks; B: the same from a copy of the project whose summary allowance is cut
    to 5 % (at most 24 tokens), a rule change that loses evidence. One store, two sweeps."""
    work = tmp_path_factory.mktemp("planted")
    copy = work / "project"
    for part in ("washexp", "conf", "run.py"):
        (shutil.copytree if (ROOT / part).is_dir() else shutil.copy)(ROOT / part, copy / part)
    shutil.copytree(ROOT / "fixtures" / "compaction", copy / "fixtures" / "compaction")
    budget = copy / "washexp" / "compaction" / "inputs" / "budget.py"
    text = budget.read_text()
    for old, new in (("RATIO = 0.20", "RATIO = 0.05"), ("MIN = 64", "MIN = 8"), ("MAX = 256", "MAX = 24")):
        assert old in text
        text = text.replace(old, new)
    budget.write_text(text)
    store = work / "store"
    store.mkdir()
    run_cli([*PLANTED, f"hydra.run.dir={work / 'a'}"], store)
    tracking = [f"tracking.uri=sqlite:///{store / 'mlflow.db'}", f"tracking.artifacts={store / 'mlruns'}"]
    proc = subprocess.run(
        [sys.executable, "run.py", *PLANTED, *tracking, f"hydra.run.dir={work / 'b'}"],
        cwd=copy,  # the copy's washexp comes first on sys.path
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    return store, work


def test_a_planted_compaction_regression_is_named_down_to_task_and_field(planted):
    store, work = planted
    proc = _compare(store, "a", "b", experiment="compaction")
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("REGRESSION: 4 needle(s) lost in B"), proc.stdout
    assert lines[1:5] == [
        "LOST in B: S top0 · checkout_504 · rollback_fixed (retained 1.00 -> 0.00)",
        "LOST in B: S top0 · checkout_504 · rolled_back_version (retained 1.00 -> 0.00)",
        "LOST in B: S top0 · payment · amount_minor (retained 1.00 -> 0.00)",
        "LOST in B: S top0 · payment · invoice_id (retained 1.00 -> 0.00)",
    ]
    assert "Not all runs" not in proc.stderr
    same = _compare(store, "a", "a", experiment="compaction")
    assert same.returncode == 0 and same.stdout.startswith("no regression: 0 needle(s) lost"), same.stdout


def test_an_exported_compaction_record_carries_its_fields_and_fails_closed(planted, tmp_path):
    store, work = planted
    a = _export(store, tmp_path / "a", "compaction", "--sweep", "a")
    record = json.loads(a.read_text())
    fields = record["data"]["compaction_fields"]
    assert {(f["task"], f["field"]) for f in fields} >= {("payment", "invoice_id"), ("checkout_504", "setting")}
    assert len(fields) == 18 and all(f["arm"] == "S top0" and f["retained"] in (0.0, 1.0) for f in fields)
    partial = dict(record, data={k: [r for r in v if r["task"] != "payment"] for k, v in record["data"].items()})
    b = tmp_path / "partial.json"
    b.write_text(json.dumps(partial))
    proc = _compare(store, str(a), str(b), experiment="compaction")
    assert proc.returncode == 1 and proc.stdout.splitlines()[1] == "MISSING in B: S top0 · primary · payment"
    subset = _compare(store, str(a), str(b), "--allow-subset", experiment="compaction")
    assert subset.returncode == 0 and subset.stdout.startswith("SUBSET: only the 8 of A's 18 cells"), subset.stdout
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps(dict(record, data={"compaction_tasks": [], "compaction_fields": []})))
    proc = _compare(store, str(a), str(empty), experiment="compaction")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "has no rows" in proc.stderr, proc.stderr


def _artifact_file(store: Path, experiment: str, kind: str, name: str) -> Path:
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    exp = client.get_experiment_by_name(experiment)
    run = next(r for r in client.search_runs([exp.experiment_id]) if r.data.tags["washexp.kind"] == kind)
    return Path(run.info.artifact_uri.removeprefix("file://")) / name


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "experiment", "kind", "name"),
    [
        (["method=S", "topn=0", "task=payment"], "compaction", "condition", "retention.json"),
        (["benchmark=wash", "measurement=ceiling", "store=lean", "rounds=1"], "wash", "wash-store", "rounds.json"),
    ],
)
def test_a_finished_run_without_the_table_compare_reads_fails_the_export(tmp_path, args, experiment, kind, name):
    store = tmp_path / "store"
    store.mkdir()
    run_cli([*args, f"hydra.run.dir={tmp_path / 'a'}"], store)
    _artifact_file(store, experiment, kind, name).unlink()
    proc = _run_export(store, tmp_path / "out", experiment)
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert name in proc.stderr and not (tmp_path / "out").exists()
    compared = _compare(store, "a", "a", experiment=experiment)
    assert compared.returncode == 2 and name in compared.stderr, compared.stderr
