"""measurement=controlled and measurement=chain: structured-token recall by class on a hand-made
store whose answer is known, the size band (an out-of-band run reported and counted apart),
pairwise vs cumulative recall on a constructed three-pass chain, the model-free compressor, and
the identities of the older measurements left as they were."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli
from tests.wash_model_server import WashScript, serve
from washexp.config import MeasurementConfig
from washexp.tracking.views import view_state
from washexp.wash.coalwash.recall import census, occurrence_recall, recall_of
from washexp.wash.measure import chain, compressor, controlled
from washexp.wash.measure.cutters import Cut, Cutter
from washexp.wash.measure.fidelity import headline_metrics, measurement_spec

BEFORE = {
    "MEMORY.md": "---\nname: memory\ntype: index\n---\n# Index\n"
    "- [[alpha]] notes, see [docs](https://example.com/a)\n- [[alpha]] again\n- [[beta]]\n",
    "alpha.md": "Released v2.31.0 on 2026-05-14; ratio 4/5 at 43%.\n"
    'Run `make test` and say "ship it".\nReleased v2.31.0 on 2026-05-14; ratio 4/5 at 43%.\n',
}
AFTER = {  # the frontmatter's closing fence cut, one [[alpha]] line gone, 43% became 44%, line 2 gone
    "MEMORY.md": "---\nname: memory\ntype: index\n# Index\n- [[alpha]] notes, see [docs](https://example.com/a)\n"
    "- [[beta]]\n",
    "alpha.md": "Released v2.31.0 on 2026-05-14; ratio 4/5 at 44%.\n",
}


def test_recall_by_class_on_a_hand_made_store_whose_answer_is_known():
    """CoalWash's rule: the distinct values of each class, and how many survive anywhere."""
    r = recall_of(BEFORE, AFTER)
    got = {cls: (c.kept, c.total) for cls, c in r.by_class.items()}
    assert got == {
        "wikilinks": (2, 2),  # [[alpha]] lost one of its two lines but is still stated
        "dates": (1, 1),
        "versions": (1, 1),
        "links": (1, 1),
        "frontmatter": (0, 2),  # an unclosed block declares no key
        "codespans": (0, 1),
        "quotes": (0, 1),
        "numbers": (1, 2),  # 4/5 kept, 43% lost (44% is no substitute)
    }
    assert (r.kept, r.total) == (6, 11)
    assert r.by_class["numbers"].lost == {"43%": 1} and r.by_class["wikilinks"].lost == {}


def test_occurrence_recall_counts_a_value_stated_in_fewer_places():
    """The second figure: [[alpha]] on two distinct lines, cut to one, is a loss there only."""
    r = occurrence_recall(census(BEFORE), census(AFTER))
    assert (r.by_class["wikilinks"].kept, r.by_class["wikilinks"].total) == (2, 3)
    assert r.by_class["wikilinks"].lost == {"alpha": 1}
    assert (r.kept, r.total, r.pct) == (6, 12, 50.0)


def test_cutting_an_exact_duplicate_line_costs_no_recall_but_a_second_distinct_statement_does():
    once = dict(BEFORE, **{"alpha.md": BEFORE["alpha.md"].rsplit("Released", 1)[0]})
    assert recall_of(BEFORE, once).pct == 100.0
    assert recall_of(BEFORE, {**BEFORE, "empty.md": ""}).pct == 100.0
    assert recall_of({"a.md": ""}, {"a.md": ""}).pct is None  # nothing to recall: n/a, never 100 %


def test_truncate_lands_at_or_just_under_the_target_and_inside_the_band():
    files = {f"f{i}.md": ("word " * (40 + 30 * i)).strip() + "\n" for i in range(4)}
    total = compressor.size(files)
    for pct in (20, 50, 80):
        target = total * pct // 100
        out = compressor.truncate(files, target)
        assert compressor.size(out) <= target and controlled.in_band(compressor.size(out), target)
        assert all(t.endswith("\n") and not t.endswith(" \n") for t in out.values())
    assert compressor.truncate(files, total) == files


def _cutter(name: str, sizes, stochastic: bool = True) -> Cutter:
    """Cuts to ``sizes[repeat]`` % of the store with truncate (a stand-in arm of known size)."""

    def cut(files, target, repeat):
        return Cut(compressor.truncate(files, compressor.size(files) * sizes[repeat] // 100))

    return Cutter(name, False, stochastic, f"{name}: test arm", cut)


def test_size_band_an_out_of_band_run_is_reported_and_counted_apart():
    files = {"a.md": " ".join(f"v1.{i}.0 2026-01-{i + 10:02d} [[n{i}]]" for i in range(60)) + "\n"}
    expected = {"fixture": "t", "muscle": [{"id": "m01", "needle": "[[n0]]"}], "fat": []}
    gated = _cutter("gated x", [98], stochastic=False)  # cuts < 5 %: the target is target_pct of the store
    sloppy = _cutter("sloppy", [50, 75, 49, 20])  # repeats 1 and 3 miss the ±5 % band
    raw = controlled.run_store(files, expected, "t", gated, [sloppy], 50, 4, lambda f: 0)
    total = compressor.size(files)
    assert raw["target_bytes"] == total // 2 and "50% of the store" in raw["target_rule"]
    runs = {(r["arm"], r["repeat"]): r for r in raw["runs"]}
    assert runs[("gated", 0)]["own_size"] and runs[("gated", 0)]["in_band"] is False
    assert [runs[("sloppy", k)]["in_band"] for k in range(4)] == [True, False, True, False]
    m = controlled.metrics(raw, 1)
    assert (m["sloppy/runs"], m["sloppy/in_band_runs"], m["sloppy/out_of_band_runs"]) == (4, 2, 2)
    in_band = [runs[("sloppy", k)] for k in (0, 2)]
    assert m["sloppy/bytes"] == sum(r["bytes"] for r in in_band) / 2  # the mean is over in-band runs only
    pcts = [r["recall"]["recall_pct"] for r in in_band]
    assert (m["sloppy/recall_min_pct"], m["sloppy/recall_max_pct"]) == (min(pcts), max(pcts))
    assert m["gated/own_size"] == 1.0 and m["gated/counted_runs"] == 1.0  # reported at its own size, marked
    assert m["unchecked/recall_pct"] == 100.0 and m["unchecked/saving_pct"] == 0.0
    none_in = controlled.metrics(
        controlled.run_store(files, expected, "t", gated, [_cutter("far", [10] * 4)], 50, 4, lambda f: 0), 1
    )
    assert none_in["far/out_of_band_runs"] == 4 and "far/recall_pct" not in none_in  # n/a, never a number


def test_target_is_the_gated_size_when_it_cut_at_least_five_percent():
    assert controlled.target_of(1000, 950, 50) == (950, False)
    assert controlled.target_of(1000, 951, 50) == (500, True)
    assert controlled.target_of(1000, None, 40) == (400, True)
    assert controlled.in_band(105, 100) and controlled.in_band(95, 100) and not controlled.in_band(106, 100)


def test_chain_pairwise_vs_cumulative_on_a_three_pass_chain():
    store = {"a.md": "[[a]]\n[[b]]\n[[c]]\n[[d]]\n"}

    def drop_last(files, target, repeat):
        kept = files["a.md"].splitlines()[:-1]
        return Cut({"a.md": "".join(line + "\n" for line in kept)})

    cutter = Cutter("drop-last", False, False, "drop the last line", drop_last)
    expected = {"fixture": "t", "muscle": [{"id": "m01", "needle": "[[a]]"}], "fat": []}
    raw = chain.run_chain(store, expected, "t", cutter, 3, None, False, lambda f: 0)
    got = [(p["cumulative"]["recall_pct"], round(p["pairwise"]["recall_pct"], 4)) for p in raw["passes"]]
    assert got == [(75.0, 75.0), (50.0, round(200 / 3, 4)), (25.0, 50.0)]  # each pass looks better than the chain
    m, series = chain.metrics([raw], 3)
    assert series["drop-last/cumulative_pct"] == [75.0, 50.0, 25.0]
    assert m["drop-last/pass3/pairwise_pct"] == 50.0 and m["drop-last/last/wikilinks_pct"] == 25.0
    assert m["drop-last/pass3/needles_kept"] == 1.0


def test_the_older_measurements_keep_their_identity_keys():
    old = {"name": "ceiling", "rounds": 8, "dry_stop": 0, "arms": ["off"], "sessions": 24}
    assert measurement_spec(MeasurementConfig(name="ceiling", rounds=8, dry_stop=0, arms=["off"])) == old
    spec = measurement_spec(MeasurementConfig(name="controlled"))
    assert spec["target_pct"] == 50 and spec["repeats"] == 4 and "passes" not in spec
    assert {"passes", "pass_keep_pct"} <= set(measurement_spec(MeasurementConfig(name="chain")))


# --- through run.py: offline on a committed store and a store by path; a rerun; the record -------


def test_the_headline_has_fixed_names_whatever_the_washer():
    """The UI's runs table showed "-" for controlled and chain: their figures are named after the
    washer (``mean/gated reference/recall_pct``), and a view's columns are fixed names."""
    controlled = {"mean/gated coalwash/recall_pct": 91.0, "mean/truncate/recall_pct": 40.0, "mean/x/recall_pct": 1.0}
    assert headline_metrics(controlled) == {"headline/gated_recall_pct": 91.0, "headline/truncate_recall_pct": 40.0}
    chain = {f"mean/gated reference/pass{n}/cumulative_pct": 100.0 - n for n in (1, 2, 10)}
    assert headline_metrics(chain) == {"headline/gated_recall_pct": 90.0}  # the last pass (10, not 2)
    shown = view_state("wash")["selectedColumns"]
    assert {"metrics.`headline/gated_recall_pct`", "metrics.`headline/truncate_recall_pct`"} <= set(shown)
    assert shown[:2] == ["tags.`mlflow.runName`", "tags.`sweep`"]  # two sweeps' arms share a name


SWEEP = ["-m", "benchmark=wash", "measurement=controlled,chain"]


def _finished(tracking: Path) -> int:
    db = sqlite3.connect(tracking / "mlflow.db")
    return db.execute(
        "select count(*) from runs r join tags t on t.run_uuid = r.run_uuid "
        "where t.key = 'washexp.kind' and t.value != 'link'"
    ).fetchone()[0]


def _export(tracking: Path, out: Path) -> dict:
    args = [
        sys.executable,
        "-m",
        "washexp.cli",
        "export",
        "--experiment",
        "wash",
        "--tracking-uri",
        f"sqlite:///{tracking / 'mlflow.db'}",
        "--out",
        str(out),
    ]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert len(list(out.glob("wash-*-controlled.png"))) == 1 and len(list(out.glob("wash-*-chain.png"))) == 1
    return json.loads(next(out.glob("wash-*.json")).read_text(encoding="utf-8"))


@pytest.mark.slow
def test_offline_on_a_committed_store_and_one_by_path_a_rerun_creates_no_runs(tmp_path):
    mine = tmp_path / "my-store"
    shutil.copytree(ROOT / "fixtures" / "wash" / "superseded", mine)
    before = {p.name: (p.read_bytes(), p.stat().st_mode) for p in mine.iterdir()}
    (tmp_path / "t").mkdir()
    run_cli([*SWEEP, f"store=[lean,{mine}]"], tmp_path / "t")
    made = _finished(tmp_path / "t")
    assert made == 2 + 2 * 2  # two measurements, each a run per store
    assert {p.name: (p.read_bytes(), p.stat().st_mode) for p in mine.iterdir()} == before  # scratch copies only
    run_cli([*SWEEP, f"store=[lean,{mine}]"], tmp_path / "t")
    assert _finished(tmp_path / "t") == made  # the rerun creates no runs
    db = sqlite3.connect(tmp_path / "t" / "mlflow.db")  # the runs table's headline columns are on each measurement
    headline = db.execute(
        "select t.value, m.key from metrics m join tags t on t.run_uuid = m.run_uuid "
        "where t.key = 'washexp.kind' and t.value = 'measurement' and m.key like 'headline/%'"
    ).fetchall()
    assert sorted(k for _, k in headline) == sorted(2 * ["headline/gated_recall_pct", "headline/truncate_recall_pct"])
    record = _export(tmp_path / "t", tmp_path / "out")
    rows = {r["arm"]: r for r in record["tables"]["controlled"]["rows"]}
    assert set(rows) == {"unchecked", "gated reference", "truncate"}
    assert rows["unchecked"]["recall_pct"] == 100.0 and rows["truncate"]["recall_pct"] < 100.0
    assert "lean" in rows["gated reference"]["own_size_stores"]  # lean has no fat: cut < 5 %, target 50 %
    assert {r["class"] for r in record["tables"]["controlled_by_class"]["rows"]} == set(
        ("wikilinks", "dates", "versions", "links", "frontmatter", "codespans", "quotes", "numbers")
    )
    stages = [(r["chain"], r["stage"]) for r in record["tables"]["chain"]["rows"]]
    assert ("truncate", "pass 4") in stages and ("truncate", "one-shot to the final size") in stages
    assert ("gated reference", "pass 4") in stages
    told = {r["arm"]: r["instruction"] for r in record["tables"]["instructions"]["rows"]}
    assert told["truncate"].startswith("truncate (deterministic, no model)")


def test_gates_false_is_refused_before_any_run(tmp_path):
    proc = run_cli([*SWEEP, "store=lean", "gates=false"], tmp_path, check=False)
    assert proc.returncode == 2 and "sets each arm's gates itself" in proc.stderr.strip().splitlines()[-1]


@pytest.mark.slow
def test_plain_arm_against_the_scripted_server_then_a_strict_replay_makes_no_call(tmp_path):
    script = WashScript(fat={"settled baseline": "superseded"}, lossy=("double-posted",))
    rec = f"endpoint.recordings={tmp_path / 'rec'}"
    model = ["washer=plain", "model=openai", "model.name=scripted-wash-model", "store=superseded"]
    (tmp_path / "a").mkdir()
    with serve(script) as url:
        run_cli(
            [*SWEEP, *model, "controlled.repeats=2", "chain.passes=2", f"endpoint.base_url={url}", rec], tmp_path / "a"
        )
    calls = len(script.requests)
    plain = [r for r in script.requests if r["kind"] == "plain"]
    assert calls > 0 and len(plain) == calls  # the gated arm is the reference washer: no other call
    targeted = [r for r in plain if "Cut it to about" in r["body"]["messages"][0]["content"]]
    assert targeted and len(targeted) < len(plain)  # controlled + one-shot told a target; chain passes not
    (tmp_path / "b").mkdir()
    run_cli(
        [
            *SWEEP,
            *model,
            "controlled.repeats=2",
            "chain.passes=2",
            "endpoint.replay=strict",
            "endpoint.base_url=http://127.0.0.1:9/v1",
            rec,
        ],
        tmp_path / "b",
    )
    assert len(script.requests) == calls  # the replay made no call (and no server is there)
    record = _export(tmp_path / "a", tmp_path / "out")
    again = _export(tmp_path / "b", tmp_path / "out-b")
    assert record["tables"]["controlled"]["rows"] == again["tables"]["controlled"]["rows"]
    assert record["tables"]["chain"]["rows"] == again["tables"]["chain"]["rows"]
    plain_row = next(r for r in record["tables"]["controlled"]["rows"] if r["arm"] == "plain")
    raw = [r for r in record["tables"]["controlled_runs"]["rows"] if r["arm"] == "plain"]
    assert len(raw) == 2 and plain_row["in_band_runs"] + plain_row["out_of_band_runs"] == 2  # both repeats reported
    told = {r["arm"]: r["instruction"] for r in record["tables"]["instructions"]["rows"]}
    assert "Compress this memory file. Keep every fact." in told["plain"] and "{target_bytes}" in told["plain"]


def test_coalwash_as_the_gated_arm_and_plain_beside_it_against_the_scripted_server(tmp_path):
    script = WashScript(fat={"settled baseline": "superseded"})
    args = [*SWEEP, "washer=coalwash", "model=openai", "model.name=scripted-wash-model", "store=superseded"]
    args += ["controlled.repeats=1", "chain.passes=1", f"endpoint.recordings={tmp_path / 'rec'}"]
    (tmp_path / "a").mkdir()
    with serve(script) as url:
        run_cli([*args, f"endpoint.base_url={url}"], tmp_path / "a")
    kinds = {r["kind"] for r in script.requests}
    assert {"outsider", "plain"} <= kinds  # the gated arm asks the outsider, the plain arm compresses
    record = _export(tmp_path / "a", tmp_path / "out")
    arms = {r["arm"] for r in record["tables"]["controlled"]["rows"]}
    assert arms == {"unchecked", "gated coalwash", "truncate", "plain"}
    assert {r["chain"] for r in record["tables"]["chain"]["rows"]} == {"truncate", "plain", "gated coalwash"}
    # every seat that asked the model is named, the plain arm's beside the gated washer's own
    seats = record["provenance"]["model per seat that made a call"]
    assert seats == {f"coalwash: {kind}": "scripted-wash-model" for kind in kinds}
