"""The committed compaction records' decisions against their own per-task values: each p is the
exact sign-flip count of an independent brute force (tests/test_decide.py), and Holm by hand."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tests.test_decide import brute_p
from washexp.compaction.records.decisions import decisions, families

RESULTS = Path(__file__).resolve().parent.parent / "results"
BUNDLED = sorted(
    p
    for p in RESULTS.glob("compaction-*.json")
    if p.with_suffix(".bundle").is_dir()
    and json.loads(p.read_text())["topic"] == "compaction"
    # the cliff compares no two arms: its intervals are its crossings' (tests/test_cliff.py)
    and json.loads(p.read_text())["provenance"].get("measurement") != "cliff"
    # a cross-model record keeps no per-task values: its models' records rebuilt from its bundle do (below)
    and not p.name.startswith("compaction-cross-model-")
)


def _values(record: dict, row: dict) -> dict[str, dict[str, float]]:
    """label -> task -> value as the row's analysis reads the record's machine table."""
    out: dict[str, dict[str, float]] = {}
    if "cycles_tasks" in record["data"]:
        for t in record["data"]["cycles_tasks"]:
            if t["cohort"] != row["cohort"] or (t["failed"] and row["analysis"] == "valid-only"):
                continue
            v = 0.0 if t["failed"] else t["survival"]
            if v is not None:
                out.setdefault(f"{t['arm']} k={t['k']}", {})[t["task"]] = v
        return out
    for t in record["data"]["compaction_tasks"]:
        if t["cohort"] != row["cohort"] or t[row["metric"]] is None:
            continue
        if row["analysis"] == "valid-only" and not t["valid"]:
            continue
        out.setdefault(t["arm"], {})[t["task"]] = t[row["metric"]]
    return out


def test_every_bundled_compaction_record_is_covered():
    names = {p.name for p in BUNDLED}
    assert "compaction-reference-2026-12-04.json" in names and "compaction-reference-cycles-2026-12-04.json" in names
    assert len(BUNDLED) >= 6


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
def test_each_p_is_the_exact_sign_flip_of_the_records_own_values(path):
    record = json.loads(path.read_text())
    assert next(iter(record["tables"])) == "decisions"  # the first table
    rows = record["tables"]["decisions"]["rows"]
    if "compaction_tasks" in record["data"] and not families(record["data"]["compaction_tasks"]):
        assert rows == []  # the 0.5B record holds S top0 and S top5 alone: no declared family applies
        return
    assert rows and {r["analysis"] for r in rows} == {"ITT", "valid-only"}
    for row in rows:
        values = _values(record, row)
        tasks = sorted(values[row["a"]].keys() & values[row["b"]].keys())
        diffs = [values[row["a"]][t] - values[row["b"]][t] for t in tasks]
        assert row["n_tasks"] == len(tasks), row
        if len(tasks) < 2:
            assert row["p"] is None
            continue
        assert row["diff"] == pytest.approx(sum(diffs) / len(diffs))
        assert row["p"] == pytest.approx(brute_p(diffs), abs=1e-12), row
        if len(tasks) == 4:
            assert row["p"] >= 0.125 and row["verdict"].startswith("undecided")


def test_holm_by_hand_on_one_record():
    record = json.loads((RESULTS / "compaction-local-qwen2.5-coder-1.5b-2026-12-04.json").read_text())
    family = [
        r
        for r in record["tables"]["decisions"]["rows"]
        if (r["analysis"], r["family"], r["cohort"], r["metric"])
        == ("ITT", "vs closed book", "primary", "fact_accuracy")
    ]
    ps = sorted((r["p"], i) for i, r in enumerate(family))
    m = len(ps)
    assert m >= 5
    by_hand = {}
    running = 0.0
    for rank, (p, i) in enumerate(ps):  # step down: (m - rank) x p, never below the step before, capped at 1
        running = max(running, min(1.0, (m - rank) * p))
        by_hand[i] = running
    assert [r["p_holm"] for r in family] == [pytest.approx(by_hand[i]) for i in range(m)]
    assert any(r["p_holm"] > r["p"] for r in family)  # the adjustment did something here


@pytest.mark.parametrize("path", BUNDLED[:1], ids=lambda p: p.stem)
def test_the_csv_beside_the_record_is_its_decisions(path):
    record = json.loads(path.read_text())
    with path.with_name(f"{path.stem}-decisions.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    table = record["tables"]["decisions"]["rows"]
    assert [(r["a"], r["b"], r["verdict"]) for r in rows] == [(r["a"], r["b"], r["verdict"]) for r in table]
    assert [float(r["p"]) if r["p"] else None for r in rows] == [r["p"] for r in table]
    tex = path.with_name(f"{path.stem}-decisions.tex").read_text()
    assert tex.count("\\toprule") == 1 and tex.count(" \\\\\n") == len(table) + 1


def _row(arm: str, method: str, topn, task: str, value: float, valid: bool = True) -> dict:
    return {"arm": arm, "method": method, "topn": topn, "cohort": "primary", "task": task, "failed": False} | {
        "valid": valid,
        "retention": value,
        "fact_accuracy": None,
    }


def test_families_and_analyses_on_a_hand_made_panel():
    tasks = [f"t{i}" for i in range(6)]
    rows = [_row("Full", "full", None, t, 1.0) for t in tasks]
    rows += [_row("none", "none", None, t, 0.0) for t in tasks]
    rows += [_row("S top0", "S", 0, t, 0.5 + 0.01 * i) for i, t in enumerate(tasks)]
    rows += [_row("H top0", "H", 0, t, 0.2, valid=i > 1) for i, t in enumerate(tasks)]
    rows += [_row("mask top0", "mask", 0, t, 0.4) for t in tasks[:1]]  # one task: listed, not tested
    assert families(rows) == [
        ("S vs H", [("S top0", "H top0")]),
        ("vs Full", [("S top0", "Full"), ("H top0", "Full"), ("mask top0", "Full")]),  # not the closed book
        ("vs closed book", [("Full", "none"), ("S top0", "none"), ("H top0", "none"), ("mask top0", "none")]),
        ("baselines vs S and H", [("mask top0", "S top0"), ("mask top0", "H top0")]),
    ]
    found = decisions(rows)
    sh = {r["analysis"]: r for r in found if r["family"] == "S vs H"}
    assert sh["ITT"]["n_tasks"] == 6 and sh["valid-only"]["n_tasks"] == 4  # H invalid on t0, t1
    assert sh["ITT"]["p"] == brute_p([0.3 + 0.01 * i for i in range(6)]) == 2 / 64
    assert sh["ITT"]["p_holm"] == sh["ITT"]["p"] and sh["ITT"]["verdict"] == "S top0 keeps more than H top0"
    assert sh["valid-only"]["verdict"].startswith("undecided") and sh["valid-only"]["whole_range"]
    full = [r for r in found if r["family"] == "vs Full" and r["analysis"] == "ITT"]
    assert [r["p_holm"] for r in full[:2]] == [pytest.approx(2 * 2 / 64), pytest.approx(2 * 2 / 64)]  # Holm over 2
    (mask,) = [r for r in full if r["a"] == "mask top0"]
    assert mask["n_tasks"] == 1 and mask["p"] is None and mask["diff"] == pytest.approx(-0.6)
    assert mask["verdict"] == "not tested: 1 task in common"


CROSS = sorted(p for p in RESULTS.glob("compaction-cross-model-*.json") if p.with_suffix(".bundle").is_dir())


@pytest.mark.slow  # each model's record is rebuilt from the bundle: about a minute each
@pytest.mark.parametrize("path", CROSS, ids=lambda p: p.stem)
def test_a_cross_model_p_is_the_exact_sign_flip_of_its_models_own_values(path):
    """Each model's own record is rebuilt from the cross-model bundle (the builder export uses), and
    every model-vs-model row's p is the brute-force count over the tasks both models ran."""
    from washexp.export import ExportOptions, build
    from washexp.tracking import bundle

    record = json.loads(path.read_text())
    root = path.with_suffix(".bundle")
    options = bundle.info(root)["options"]
    tasks: dict[str, list[dict]] = {}
    for model in options["models"]:
        own = ExportOptions(uri=bundle.PREFIX + str(root), sweeps=tuple(options["sweeps"]), model=model)
        (built,) = build(own)
        tasks[model] = json.loads(built.to_json())["data"]["compaction_tasks"]
    rows = record["tables"]["decisions"]["rows"]
    assert rows
    for row in rows:
        arm = row["family"].removeprefix("model vs model, ")
        values = {
            m: {t["task"]: t[row["metric"]] for t in tasks[m] if t["arm"] == arm and t["cohort"] == row["cohort"]}
            for m in (row["a"], row["b"])
        }
        common = sorted(t for t in values[row["a"]].keys() & values[row["b"]].keys() if values[row["a"]][t] is not None)
        diffs = [values[row["a"]][t] - values[row["b"]][t] for t in common]
        assert row["n_tasks"] == len(common), row
        assert row["diff"] == pytest.approx(sum(diffs) / len(diffs))
        assert row["p"] == pytest.approx(brute_p(diffs), abs=1e-12), row
