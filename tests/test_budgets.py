"""Methods at matched budgets: the nearest S/H arm by tokens, and the frontier."""

from __future__ import annotations

from washexp.compaction.records.budgets import budget_tables
from washexp.export.records import Table

ARMS = {  # arm -> (method, mean input tokens, retention)
    "S top0": ("S", 600.0, 0.2),
    "H top0": ("H", 620.0, 0.1),
    "S top3": ("S", 4000.0, 0.7),
    "mask M=2 top0": ("mask", 3600.0, 0.5),
    "recency K=2 top0": ("recency", 3700.0, 0.4),
    "Full": ("full", 7000.0, 1.0),
}


def _tables():
    rows = tuple({"arm": a, "input_tokens": t, "retention": r} for a, (_, t, r) in ARMS.items())
    methods = {a: m for a, (m, _, _) in ARMS.items()}
    return {t.key: t for t in budget_tables([Table("arms_primary", "", (), rows)], methods, measured=False)}


def test_each_baseline_meets_the_nearest_s_and_h_arm():
    rows = _tables()["matched_budget_primary"].rows
    got = {(r["arm"], r["against"]) for r in rows}
    assert got == {("mask M=2 top0", "S top3"), ("mask M=2 top0", "H top0"), ("recency K=2 top0", "S top3"),
                   ("recency K=2 top0", "H top0")}  # fmt: skip
    mask_s = next(r for r in rows if r["arm"] == "mask M=2 top0" and r["against"] == "S top3")
    assert round(mask_s["difference"], 6) == -0.2 and mask_s["token_ratio"] == 0.9


def test_the_frontier_is_the_arms_no_cheaper_arm_beats():
    rows = {r["arm"]: r for r in _tables()["frontier_primary"].rows}
    assert {a for a, r in rows.items() if r["frontier"]} == {"S top0", "mask M=2 top0", "S top3", "Full"}
    assert rows["H top0"]["beaten_by"] == "S top0" and rows["recency K=2 top0"]["beaten_by"] == "mask M=2 top0"
    assert [r["arm"] for r in _tables()["frontier_primary"].rows][0] == "S top0"  # cheapest first
