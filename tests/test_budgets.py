"""Methods at matched budgets: the nearest S/H arm by tokens, and the frontier."""

from __future__ import annotations

from washexp.compaction.records.budgets import budget_tables
from washexp.export.records import Table

ARMS = {  # arm -> (method, mean input tokens, retention, fact accuracy)
    "S top0": ("S", 600.0, 0.2, 0.1),
    "H top0": ("H", 620.0, 0.1, 0.3),
    "S top3": ("S", 4000.0, 0.7, 0.6),
    "mask M=2 top0": ("mask", 3600.0, 0.5, 0.5),
    "recency K=2 top0": ("recency", 3700.0, 0.4, 0.7),
    "Full": ("full", 7000.0, 1.0, 0.9),
    "H top3": ("H", 4000.0, 0.7, 0.4),  # as many tokens as S top3: beaten only on fact accuracy
    "hybrid top0": ("hybrid", 5000.0, 0.7, 0.6),  # S top3's scores at more tokens: beaten
}


def _tables(measured=False):
    rows = tuple({"arm": a, "input_tokens": t, "retention": r, "fact_accuracy": f if measured else None}
                 for a, (_, t, r, f) in ARMS.items())  # fmt: skip
    methods = {a: m for a, (m, *_) in ARMS.items()}
    return {t.key: t for t in budget_tables([Table("arms_primary", "", (), rows)], methods, measured=measured)}


def test_each_baseline_meets_the_nearest_s_and_h_arm():
    rows = _tables()["matched_budget_primary"].rows
    got = {(r["arm"], r["against"]) for r in rows}
    assert got == {("mask M=2 top0", "S top3"), ("mask M=2 top0", "H top3"), ("recency K=2 top0", "S top3"),
                   ("recency K=2 top0", "H top3"), ("hybrid top0", "S top3"), ("hybrid top0", "H top3")}  # fmt: skip
    mask_s = next(r for r in rows if r["arm"] == "mask M=2 top0" and r["against"] == "S top3")
    assert round(mask_s["retention_difference"], 6) == -0.2 and mask_s["token_ratio"] == 0.9
    assert "fact_accuracy_difference" not in mask_s  # no reader: retention alone


def test_the_frontier_is_the_arms_no_cheaper_arm_beats():
    rows = {r["arm"]: r for r in _tables()["frontier_primary"].rows}
    frontier = {a for a, r in rows.items() if r["retention_frontier"]}
    assert frontier == {"S top0", "mask M=2 top0", "S top3", "H top3", "Full"}  # a tie beats neither
    assert rows["hybrid top0"]["retention_beaten_by"] == "H top3"  # the same retention at fewer tokens
    assert rows["H top0"]["retention_beaten_by"] == "S top0"
    assert rows["recency K=2 top0"]["retention_beaten_by"] == "mask M=2 top0"
    assert [r["arm"] for r in _tables()["frontier_primary"].rows][0] == "S top0"  # cheapest first


def test_with_a_reader_fact_accuracy_has_its_own_difference_and_frontier():
    tables = _tables(measured=True)
    rec_s = next(r for r in tables["matched_budget_primary"].rows if r["arm"] == "recency K=2 top0"
                 and r["against"] == "S top3")  # fmt: skip
    assert round(rec_s["fact_accuracy_difference"], 6) == 0.1 and round(rec_s["retention_difference"], 6) == -0.3
    rows = {r["arm"]: r for r in tables["frontier_primary"].rows}
    assert {a for a, r in rows.items() if not r["fact_accuracy_frontier"]} == {"S top3", "H top3", "hybrid top0"}
    assert rows["S top3"]["fact_accuracy_beaten_by"] == "recency K=2 top0"  # cheaper, answers more
    assert rows["S top3"]["retention_frontier"]  # though it retains more than anything as cheap
