"""What the wash record publishes means what the seed means: the ceiling loop, the two no-op
columns, the CoalWash release of each ported part, every seat's model, one fact-loss.

Real sweeps into a temporary MLflow store, exported with ``washexp export``; the assertions read
the record's JSON rows. ``near-wall`` with the near-duplicate rule loosened and every delete
approved loses a muscle needle in round 1 (an exact ceiling of 0); ``lean`` never changes (a lower
bound): the two are kept apart in the minimum.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli
from tests.test_export import export
from washexp.wash.coalwash import caliper, gate, score
from washexp.wash.coalwash.gauge import load_gauge
from washexp.wash.measure.summary import ceiling_of

LOSSY = ["store=[near-wall,lean]", "operator=approve-all", "washer.near_dup_jaccard=0.5", "rounds=3"]


def _export(store: Path, out: Path) -> dict:
    export(store, out, "--experiment", "wash")
    (record,) = out.glob("wash-reference-*.json")
    return json.loads(record.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    store = tmp_path_factory.mktemp("meaning")
    run_cli(["-m", "benchmark=wash", "measurement=ceiling,infinity", *LOSSY], store, premade=True)
    return _export(store, tmp_path_factory.mktemp("out"))


def _rows(record: dict, table: str) -> list[dict]:
    return record["tables"][table]["rows"]


def test_an_exact_ceiling_and_a_lower_bound_are_kept_apart(record):
    rows = {r["store"]: r for r in _rows(record, "ceiling")}
    assert rows["near-wall"]["first_bad_round"] == 1 and not rows["near-wall"]["lower_bound"]
    assert rows["lean"]["lower_bound"] and rows["lean"]["store_ceiling"] == 3
    assert (rows["near-wall"]["rounds"], rows["lean"]["rounds"]) == (3, 3)  # no undisclosed stop
    low = rows["CEILING (min)"]
    assert (low["store_ceiling"], low["lower_bound"], low["exact_min"], low["bound_min"]) == (0, False, 0, 3)
    assert low["ceiling"] == "0 (exact 0; lower bounds ≥3)"


def test_a_lower_bound_tied_with_an_exact_value_is_exact():
    """The trap: a store measured exactly 2 beside one that is >= 2 printed as '≥2'."""
    exact = {"store_ceiling": 2.0, "store_ceiling_lower_bound": 0.0}
    bound = {"store_ceiling": 2.0, "store_ceiling_lower_bound": 1.0}
    for stores in ([exact, bound], [bound, exact]):
        assert ceiling_of(stores) == {
            "ceiling": 2.0,
            "ceiling_lower_bound": 0.0,
            "ceiling_exact_min": 2.0,
            "ceiling_bound_min": 2.0,
        }
    lower = ceiling_of([{"store_ceiling": 5.0, "store_ceiling_lower_bound": 0.0}, bound])
    assert (lower["ceiling"], lower["ceiling_lower_bound"]) == (2.0, 1.0)


@pytest.mark.slow
def test_an_early_stop_is_a_users_option_and_the_ceiling_table_says_so(tmp_path):
    run_cli(["benchmark=wash", "measurement=ceiling", "store=lean", "rounds=4", "dry_stop=1"], tmp_path)
    (row, _) = _rows(_export(tmp_path, tmp_path / "out"), "ceiling")
    assert (row["rounds"], row["rounds_planned"], row["dry_stop_after"]) == (1, 4, 1)
    md = next((tmp_path / "out").glob("wash-reference-*.md")).read_text(encoding="utf-8")
    assert "| lean | 1 of 4 | none | ≥1, stopped after 1 dry rounds |" in md


def test_stopped_at_lean_and_applied_nothing_are_two_columns(record):
    rows = {(r["store"], r["gauge"]): r for r in _rows(record, "infinity")}
    configured, off = rows[("lean", "coalwash-1.0 (configured)")], rows[("lean", "coalwash-1.0 (off)")]
    assert configured["post_exhaustion_stopped_at_lean"] and configured["post_exhaustion_applied_nothing"]
    # gauge off: no LEAN band, so the washer was asked every round, though it applied nothing
    assert off["post_exhaustion_stopped_at_lean"] is False and off["post_exhaustion_applied_nothing"]
    leaks = {(r["store"], r["gauge"]): r for r in _rows(record, "infinity_leaks")}
    assert leaks[("lean", "coalwash-1.0 (off)")]["rounds"] == [1, 2, 3]
    assert leaks[("lean", "coalwash-1.0 (off)")]["reached"] == ["OFF: quick + full"]
    assert ("lean", "coalwash-1.0 (configured)") not in leaks


def test_one_fact_loss_cumulative_and_missing_now_named_apart(record):
    summary = {(r["store"], r["gauge"]): r for r in _rows(record, "infinity")}
    per_round = [r for r in _rows(record, "infinity_rounds") if r["store"] == "near-wall"]
    for (store, gauge), row in summary.items():
        if store != "near-wall":
            continue
        last = [r for r in per_round if r["gauge"] == gauge][-1]
        assert last["fact_loss_cum"] == pytest.approx(row["fact_loss_pct"])  # one definition, both tables
        assert float(last["missing_now"]) == pytest.approx(row["missing_now_pct"], abs=0.05)  # toFixed(1)
        assert row["fact_loss_pct"] >= row["missing_now_pct"]
    assert any(r["fact_loss_cum"] > 0 for r in per_round)


def test_the_record_names_each_ported_parts_release_and_every_seats_model(record):
    releases = record["provenance"]["CoalWash release each ported part follows"]
    assert releases["scorer"] == score.FOLLOWS
    assert releases["fidelity gate"] == gate.FOLLOWS and "CoalWash v1.1.0" in gate.FOLLOWS
    assert releases["caliper"] == caliper.FOLLOWS and "CoalWash v1.1.0" in caliper.FOLLOWS
    pins = sorted({load_gauge("coalwash-1.0").config.pins, load_gauge("off").config.pins})
    assert releases["band gauge"] == "; ".join(pins) and "CoalWash v1.0.0" in pins[0]
    assert record["provenance"]["model per seat that made a call"] == {"reference": "no model call (rule-based)"}


def test_a_needle_restored_later_still_counts_in_cumulative_fact_loss(tmp_path):
    """The trap: the summary said 90.0 (lost ever) where the per-round table said 70.0 (missing now)."""
    from washexp.wash.measure import rounds, summary
    from washexp.wash.pipeline import Receipt
    from washexp.wash.store.stores import load_stores

    (store,) = load_stores(ROOT / "fixtures" / "wash", "lean")
    expected = json.loads((store.path / "expected.json").read_text(encoding="utf-8"))
    needle = expected["muscle"][0]["needle"]
    name = next(n for n, t in store.files.items() if needle in t)
    scratch = rounds.scratch_copy(store.path, tmp_path / "lean", store.files)

    def wash(d: Path, _round: int) -> Receipt:  # round 1 cuts the needle, round 2 puts it back
        text = store.files[name] if (d / name).read_text(encoding="utf-8") != store.files[name] else ""
        (d / name).write_text(text or store.files[name].replace(needle, ""), encoding="utf-8")
        return Receipt("lean", "OFF", "test")

    rds = rounds.loop(scratch, store.files, expected, "lean", wash, 2, 0)
    result = summary.store_rounds(rds, expected, "", {}, 2, 0)
    total = len(expected["muscle"])
    assert [r.lost_so_far for r in rds] == [1, 1] and rds[1].score["muscle"]["lost"] == []
    assert result.metrics["fact_loss_pct"] == pytest.approx(100 / total)  # lost at round 1: it counts
    assert result.metrics["missing_now_pct"] == 0.0
    assert result.series["round_fact_loss_cum_pct"] == [pytest.approx(100 / total)] * 2


def test_an_artifact_a_run_never_wrote_is_none_and_any_other_failure_raises(tmp_path):
    """The record reads each run's JSON through ``tracking.reader.json_artifact``: a file the run
    never wrote (a failed run's) is None, shown as n/a; a store that cannot be read, or a file that
    is not JSON, raises naming the run. It once caught every exception as "never written", so a
    broken store gave a record with its figures quietly missing."""
    import mlflow
    from mlflow.tracking import MlflowClient

    from washexp.errors import WashexpError
    from washexp.tracking.reader import json_artifact

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    exp = client.create_experiment("wash", artifact_location=(tmp_path / "mlruns").as_uri())
    run = client.create_run(exp).info.run_id
    client.log_text(run, json.dumps({"kept": 3}), "rounds.json")
    client.log_text(run, "{not json", "leaks.json")
    mlflow.set_tracking_uri(uri)
    assert json_artifact(uri, run, "rounds.json") == {"kept": 3}
    assert json_artifact(uri, run, "sessions.json") is None  # never written
    with pytest.raises(WashexpError, match=f"run {run}: artifact leaks.json is not JSON"):
        json_artifact(uri, run, "leaks.json")
    folder = tmp_path / "mlruns" / run / "artifacts" / "muscle.json"  # a folder where the file should be
    folder.mkdir()
    (folder / "x").write_text("{}")
    with pytest.raises(WashexpError, match=f"run {run}: artifact muscle.json cannot be read"):
        json_artifact(uri, run, "muscle.json")
    # (a damaged store raises too, after MLflow's own ~100 s of retries: not waited for here)


def test_a_searched_run_s_artifacts_are_read_from_its_root_once(tmp_path, monkeypatch):
    """An export of 2,200 conditions read 6,600 tables, each after a lookup of its run (six times
    the read) and again for the bundle. A run a search found is read from the artifact root the
    search gave, never looked up, and each artifact once per process."""
    from mlflow.tracking import MlflowClient

    from washexp.tracking import reader

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    exp = client.create_experiment("wash", artifact_location=(tmp_path / "mlruns").as_uri())
    run = client.create_run(exp).info.run_id
    client.log_text(run, json.dumps({"kept": 3}), "rounds.json")
    assert list(reader.search(uri, "wash")["run_id"]) == [run]

    def no_lookup(*args, **kwargs):
        raise AssertionError("the run was looked up")

    monkeypatch.setattr(MlflowClient, "download_artifacts", no_lookup)
    reader._downloaded.cache_clear()
    assert reader.json_artifact(uri, run, "rounds.json") == {"kept": 3}
    assert reader.json_artifact(uri, run, "sessions.json") is None  # never written
    assert reader.artifact_bytes(uri, run, "rounds.json") == b'{"kept": 3}'
    info = reader._downloaded.cache_info()
    assert (info.hits, info.currsize) == (1, 1)  # rounds.json read once; a missing file not remembered


def test_a_round_that_repeats_an_earlier_one_is_counted_as_a_copy_with_what_it_spent(tmp_path):
    """Issue 49: a deterministic washer on a store it left unchanged says the same thing every round;
    those rounds are one observation repeated, and their tokens were still spent. A washer whose
    words differ per round (a sampled draw) copies nothing, even on an unchanged store."""
    from washexp.wash.measure import rounds, summary
    from washexp.wash.pipeline import Receipt
    from washexp.wash.store.stores import load_stores

    (store,) = load_stores(ROOT / "fixtures" / "wash", ["lean"])
    expected = store.expected.to_json()

    def run(words):
        scratch = rounds.scratch_copy(store.path, tmp_path / words.__name__, store.files)

        def wash(d: Path, r: int) -> Receipt:  # changes nothing, spends 10 tokens
            return Receipt("lean", "OFF", "test", cost_tokens=10, artifacts={"reply.txt": words(r)})

        rds = rounds.loop(scratch, store.files, expected, "lean", wash, 3, 0)
        return rds, summary.store_rounds(rds, expected, "", {}, 3, 0).metrics

    def same(r: int) -> str:
        return "nothing to flag"

    def drawn(r: int) -> str:
        return f"nothing to flag (draw {r})"

    rds, metrics = run(same)
    assert [r.copy_of for r in rds] == [None, 1, 1]
    assert (metrics["rounds_copied"], metrics["cost_tokens_idle"], metrics["cost_tokens"]) == (2, 30, 30)
    rds, metrics = run(drawn)
    assert [r.copy_of for r in rds] == [None, None, None] and metrics["rounds_copied"] == 0
