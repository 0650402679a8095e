"""Model sweeps and the cross-model record, against two scripted models on the loopback server.

One server, two model names: ``ctx-model`` answers the facts written in its context, and
``empty-model`` answers ``{"facts": {}}``. One sweep (``model.name=ctx-model,empty-model``) and
one export give one record with the models side by side; ``washexp compare`` takes a model as
the A/B axis. The wash side: the plain washer through two scripted models, one of which drops a
line that held a fact, so its ceiling is the minimum across tiers.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import run_cli, washexp_cli
from tests.openai_server import Script, serve
from tests.wash_model_server import WashScript
from washexp.errors import WashexpError
from washexp.export import crossmodel

pytestmark = pytest.mark.slow  # sweeps of two models end to end: the marked suite that .ci/run runs

MODELS = ("ctx-model", "empty-model")
KEY = {"OPENAI_API_KEY": "sk-test-crossmodel", "CI": "1"}


def _cli(store: Path, *args: str) -> subprocess.CompletedProcess:
    return washexp_cli(*args, "--tracking-uri", f"sqlite:///{store / 'mlflow.db'}")


def _sweep_id(store: Path, experiment: str) -> str:
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    exp = client.get_experiment_by_name(experiment)
    (sweep,) = {r.data.tags["sweep"] for r in client.search_runs([exp.experiment_id], max_results=1000)}
    return sweep


@pytest.fixture(scope="module")
def compaction(tmp_path_factory):
    store = tmp_path_factory.mktemp("crossmodel")
    script = Script()
    script.models = {"ctx-model": "context", "empty-model": "empty"}
    with serve(script) as url:
        run_cli(
            [
                "-m",
                "method=full,S,none",  # none: the closed-book control beside Full
                "topn=1",
                "endpoint.price.input_per_mtok=2.0",
                "endpoint.price.output_per_mtok=8.0",
                "model=openai",
                f"model.name={','.join(MODELS)}",
                f"endpoint.base_url={url}",
                "model.platform=scripted-test-server",
                "model.generations=1",
                "model.answers_per_context=2",  # answers within a generation: the bootstrap's lowest level
                f"endpoint.recordings={store / 'recordings'}",
                "task=[backup,payment]",  # payment is primary, backup control
            ],
            store,
            env=KEY,
        )
    read = {m: sum(r["kind"] == "read" and r["body"]["model"] == m for r in script.requests) for m in MODELS}
    return store, _sweep_id(store, "compaction"), read


def _export(store: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    return _cli(store, "export", "--out", str(out), *args)


def test_one_sweep_runs_each_models_conditions(compaction):
    _, _, read = compaction
    assert read == {"ctx-model": 12, "empty-model": 12}  # 3 arms x 2 tasks, two answers each


def test_one_export_of_the_sweep_puts_the_models_side_by_side(compaction, tmp_path):
    store, sweep, _ = compaction
    proc = _export(store, tmp_path, "--sweep", sweep)
    assert proc.returncode == 0, proc.stderr
    # each model's record and the cross-model one; both models share a platform, so each of
    # their own records names its model (they would share a name)
    assert _records(tmp_path) == [
        "compaction-cross-model-ctx-model+empty-model",
        "compaction-scripted-test-server-ctx-model",
        "compaction-scripted-test-server-empty-model",
    ]
    record = json.loads(next(tmp_path.glob("compaction-cross-model-ctx-model+empty-model-*.json")).read_text())
    rows = record["tables"]["arms_by_model"]["rows"]
    cells = {(r["cohort"], r["arm"], r["model"]): r for r in rows}
    arms = ("Full", "none", "S top1")
    assert set(cells) == {(c, a, m) for c in ("primary", "control") for a in arms for m in MODELS}
    for cohort in ("primary", "control"):
        full = cells[cohort, "Full", "ctx-model"]
        assert full["fact_accuracy"] > 0 and full["retention"] == 1.0
        assert all(cells[cohort, a, "empty-model"]["fact_accuracy"] == 0.0 for a in arms)
        assert cells[cohort, "none", "ctx-model"]["fact_accuracy"] < full["fact_accuracy"]  # no evidence, fewer facts
        assert cells[cohort, "Full", "empty-model"]["retention"] == 1.0  # the same evidence, no answer
        assert all(cells[cohort, a, m]["api_input_tokens"] > 0 for a in arms for m in MODELS)
        assert all(cells[cohort, a, m]["cost_usd"] > 0 for a in arms for m in MODELS)  # priced: every arm paid
    order = [(r["cohort"], r["arm"], r["model"]) for r in rows]
    assert order[:2] == [("primary", "Full", "ctx-model"), ("primary", "Full", "empty-model")]  # side by side
    wide = record["tables"]["fact_accuracy_by_model"]["rows"]
    assert {(r["cohort"], r["arm"]): (r["ctx-model"] > 0, r["empty-model"]) for r in wide if r["arm"] == "Full"} == {
        ("primary", "Full"): (True, 0.0),
        ("control", "Full"): (True, 0.0),
    }
    assert next(iter(record["tables"])) == "decisions"  # the first table
    decided = [r for r in record["tables"]["decisions"]["rows"] if r["metric"] == "fact_accuracy"]
    families = {(r["cohort"], r["family"]) for r in decided}
    assert families == {(c, f"model vs model, {a}") for c in ("primary", "control") for a in arms}
    full = next(r for r in decided if r["cohort"] == "control" and r["family"] == "model vs model, Full")
    assert (full["a"], full["b"], full["n_tasks"]) == ("ctx-model", "empty-model", 1)
    wide_full = next(r for r in wide if r["arm"] == "Full" and r["cohort"] == "control")
    assert full["diff"] == pytest.approx(wide_full["ctx-model"] - wide_full["empty-model"])
    assert full["p"] is None and full["verdict"] == "not tested: 1 task in common"  # one control task here
    md = next(tmp_path.glob("compaction-cross-model-*.md")).read_text()
    assert "exact paired sign-flip test over tasks" in md
    assert "| primary | Full | ctx-model | 1 |" in md and "| primary | Full | empty-model | 1 | 0.000 |" in md


def test_the_cross_model_record_has_a_bundle_that_verify_recomputes(compaction, tmp_path):
    store, sweep, _ = compaction
    proc = _export(store, tmp_path, "--sweep", sweep, "--bundle")
    assert proc.returncode == 0, proc.stderr
    (path,) = tmp_path.glob("compaction-cross-model-*.json")
    info = json.loads((path.with_suffix(".bundle") / "bundle.json").read_text())
    assert info["options"]["models"] == list(MODELS) and info["options"]["model"] is None
    done = washexp_cli("verify", str(path))
    assert done.returncode == 0, done.stderr
    assert "every value recomputed" in done.stdout and "24 replies of 12 runs regraded" in done.stdout
    record = json.loads(path.read_text())
    row = record["tables"]["arms_by_model"]["rows"][0]
    row["fact_accuracy"] = 0.5 if row["fact_accuracy"] != 0.5 else 0.25  # an edit by hand after export
    path.write_text(json.dumps(record))
    changed = washexp_cli("verify", str(path))
    assert changed.returncode == 1 and "fact_accuracy: record" in changed.stdout


def _records(out: Path) -> list[str]:
    """The records in ``out``, by name without their date."""
    return sorted(p.name.rsplit("-", 3)[0] for p in out.glob("*.json"))


def test_export_with_no_flags_writes_what_the_store_holds(compaction, tmp_path):
    """A sweep of two models, then ``washexp export`` alone: it asked for ``--models a,b``."""
    store, _, _ = compaction
    proc = _export(store, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert _records(tmp_path) == [
        "compaction-cross-model-ctx-model+empty-model",
        "compaction-scripted-test-server-ctx-model",
        "compaction-scripted-test-server-empty-model",
    ]
    assert sorted(p.name for p in tmp_path.glob("*.json")) == sorted(
        Path(line).name for line in proc.stdout.splitlines() if line.endswith(".json")
    )


def test_models_flag_writes_the_same_record(compaction, tmp_path):
    store, sweep, _ = compaction
    a, b = tmp_path / "a", tmp_path / "b"
    assert _export(store, a, "--sweep", sweep).returncode == 0
    proc = _export(store, b, "--models", "ctx-model,empty-model")
    assert proc.returncode == 0, proc.stderr
    (ja,), (jb,) = list(a.glob("*-cross-model-*.json")), list(b.glob("*.json"))
    assert ja.name == jb.name and ja.read_bytes() == jb.read_bytes()
    swapped = _export(store, tmp_path / "c", "--models", "empty-model,ctx-model")
    record = json.loads(next((tmp_path / "c").glob("*.json")).read_text())
    assert swapped.returncode == 0 and record["provenance"]["models (in the order given)"] == [
        "empty-model",
        "ctx-model",
    ]
    assert {r["a"] for r in record["tables"]["decisions"]["rows"]} == {"empty-model"}


@pytest.mark.parametrize(
    "args, message",
    [
        (("--models", "ctx-model,qwen-absent"), "no compaction runs of model qwen-absent"),
        (
            ("--models", "ctx-model,empty-model", "--sweep", "1999-01-01/00-00-00"),
            "--sweep 1999-01-01/00-00-00: no run of",
        ),
        (("--models", "ctx-model"), "name two models or more"),
        (("--models", "ctx-model,ctx-model"), "a model is named twice"),
        (("--models", "ctx-model,empty-model", "--model", "ctx-model"), "--model and --models"),
    ],
)
def test_a_model_asked_for_and_absent_is_a_usage_error(compaction, tmp_path, args, message):
    store, _, _ = compaction
    out = tmp_path / "out"
    proc = _export(store, out, *args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not out.exists() or not any(out.iterdir())


def test_compare_takes_a_model_as_the_a_b_axis(compaction):
    store, sweep, _ = compaction
    worse = _cli(store, "compare", "model:ctx-model", "model:empty-model", "--sweep", sweep)
    assert worse.returncode == 1, worse.stderr
    assert worse.stdout.startswith("REGRESSION") and "fact_accuracy Full (control): 1.000 -> 0.000" in worse.stdout
    better = _cli(store, "compare", "model:empty-model", "model:ctx-model")
    assert better.returncode == 0 and better.stdout.startswith("no regression"), better.stdout + better.stderr
    for args, message in (
        (("model:ctx-model", "model:qwen-absent"), "model:qwen-absent: no compaction runs of that model"),
        (("model:ctx-model", "model:ctx-model"), "name two models"),
        (("model:", "model:ctx-model"), "name a model"),
        ((sweep, "model:ctx-model"), "covers several models"),  # never a cross-model record read as one model's
        (("model:ctx-model", sweep, "--sweep", sweep), "--sweep goes with model:NAME sides"),
    ):
        proc = _cli(store, "compare", *args)
        assert proc.returncode == 2 and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, args


def test_a_model_name_over_two_presets_fails_closed():
    runs = pd.DataFrame({"params.backend": ["reference", "openai"], "params.platform": ["reference", "x"]})
    with pytest.raises(WashexpError, match="several backends"):
        crossmodel.one_identity(runs, "x")
    crossmodel.one_identity(runs.iloc[:1], "x")


FAT = {
    "settled baseline": "superseded",
    "matter of record": "done-point-in-time",
    "archive space": "done-point-in-time",
    "Scratch pad kept open": "done-point-in-time",
}


def test_the_wash_record_across_tiers(tmp_path):
    script = WashScript(fat=FAT, lossy=("double-posted",))
    script.careful = {"careful-model"}
    with serve(script) as url:
        run_cli(
            [
                "-m",
                "benchmark=wash",
                "measurement=ceiling,infinity",
                "store=superseded",
                "model=openai",
                "washer=plain",
                "gates=false",
                "model.name=careful-model,lossy-model",
                f"endpoint.base_url={url}",
                f"endpoint.recordings={tmp_path / 'rec'}",
            ],
            tmp_path,
            env=KEY,
        )
    out = tmp_path / "out"
    models = ("--models", "careful-model,lossy-model", "--bundle")
    proc = _cli(tmp_path, "export", "--experiment", "wash", "--out", str(out), *models)
    assert proc.returncode == 0, proc.stderr
    (path,) = out.glob("wash-cross-model-careful-model+lossy-model-*.json")
    done = washexp_cli("verify", str(path))
    assert done.returncode == 0 and "every value recomputed" in done.stdout, done.stderr
    record = json.loads(path.read_text())
    washers = record["tables"]["washers_by_model"]["rows"]
    kept = {(r["measurement"], r["model"]): (r["muscle_kept"], r["muscle_total"]) for r in washers}
    assert kept["ceiling", "careful-model"][0] == kept["ceiling", "careful-model"][1]  # kept every fact
    assert kept["ceiling", "lossy-model"][0] < kept["ceiling", "lossy-model"][1]
    tiers = record["tables"]["tiers"]["rows"]
    off = {r["model"]: r for r in tiers if r["gauge"].endswith("(off)")}
    assert set(off) == {"careful-model", "lossy-model", "across tiers"}
    assert off["lossy-model"]["ceiling"] < off["careful-model"]["ceiling"]
    assert (
        off["across tiers"]["ceiling"] == off["lossy-model"]["ceiling"] and off["across tiers"]["lower_bound"] is False
    )
    for phase in ("fact_loss_has_fat_pct", "fact_loss_fat_exhausted_pct", "fact_loss_pct"):
        worst = max(v for v in (off["careful-model"][phase], off["lossy-model"][phase]) if v is not None)
        assert off["across tiers"][phase] == worst
    assert off["lossy-model"]["fact_loss_pct"] > 0 == off["careful-model"]["fact_loss_pct"]
    md = next(out.glob("*.md")).read_text()
    assert "| across tiers |" in md and "Per model tier: ceiling" in md
    absent = _cli(tmp_path, "export", "--experiment", "wash", "--out", str(out), "--models", "careful-model,x")
    assert absent.returncode == 2 and "no wash runs of model x" in absent.stderr
