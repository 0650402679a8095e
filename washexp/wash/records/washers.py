"""The wash record's washers side by side: one row per measurement x washer x gates x gauge arm.

Sums over the row's store runs (ceiling, infinity) or its sawtooth arm A:

- muscle kept: kept / total muscle needles after the last round (arm A's final score);
- fat removed: removed / total planted fat needles after the last round;
- tokens cut: the stores' ~est tokens before the first round minus after the last, and that as a %
  of before (sawtooth: B's always-loaded total minus A's, the saving before A's costs);
- fact-loss per round: muscle needles lost over (muscle total x rounds scored), in % (the mean
  loss a round costs; n/a for the sawtooth, whose sessions are not rounds);
- token cost: the washers' own token usage over every round or wash (prompt + completion tokens
  the endpoint reported; 0 for a rule-based washer).

``gates`` says ``off`` for a control arm (no fidelity gate, no keeps, no LEAN stop). A figure a
run did not log (a run made before it was logged) is ``n/a``, never 0.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from washexp.export.records import Column, Table
from washexp.tracking.kinds import MeasurementRun


def gates_label(value) -> str:
    """``on``/``off`` from a run's ``gates`` tag."""
    return "on" if MeasurementRun.parse("gates", value) else "off"


def _sum(rows: pd.DataFrame, name: str) -> float | None:
    col = f"metrics.{name}"
    if col not in rows.columns or rows[col].isna().all():
        return None
    return float(rows[col].fillna(0).sum())


def _ratio(n: float | None, d: float | None) -> float | None:
    return None if n is None or not d else 100.0 * n / d


def _col(rows: pd.DataFrame, name: str) -> pd.Series:
    col = f"metrics.{name}"
    return rows[col].fillna(0) if col in rows.columns else pd.Series(0.0, index=rows.index)


def _store_row(kids: pd.DataFrame) -> dict:
    total, lost = _sum(kids, "muscle_total"), _sum(kids, "muscle_lost")
    fat_total = _sum(kids, "fat_total")
    removed = (
        None
        if _sum(kids, "fat_removed_pct") is None
        else float((_col(kids, "fat_removed_pct") * _col(kids, "fat_total") / 100).sum())
    )
    scored = _col(kids, "rounds") - _col(kids, "failed_rounds")
    rounds = float(scored.sum())
    exposure = None if total is None else float((_col(kids, "muscle_total") * scored).sum())
    start, cut = _sum(kids, "tokens_start"), _sum(kids, "tokens_cut")
    return {
        "stores": len(kids),
        "rounds": rounds,
        "muscle_kept": None if total is None else total - (lost or 0),
        "muscle_total": total,
        "fat_removed": removed,
        "fat_total": fat_total,
        "tokens_cut": cut,
        "tokens_cut_pct": _ratio(cut, start),
        "fact_loss_per_round_pct": _ratio(lost, exposure),
        "cost_tokens": _sum(kids, "cost_tokens"),
    }


def _sawtooth_row(parent, arm_a, final_score: Callable[[str], dict | None]) -> dict:
    def value(name: str) -> float | None:
        v = parent.get(f"metrics.{name}")
        return None if v is None or pd.isna(v) else float(v)

    fat = ((final_score(arm_a["run_id"]) or {}) if arm_a is not None else {}).get("fat") or {}
    b, a = value("B/total"), value("A/total")
    return {
        "stores": 1,
        "rounds": value("A/washes"),
        "muscle_kept": value("A/muscle_kept"),
        "muscle_total": value("A/muscle_total"),
        "fat_removed": fat.get("removed"),
        "fat_total": fat.get("total"),
        "tokens_cut": None if a is None or b is None else b - a,
        "tokens_cut_pct": None if a is None or not b else 100.0 * (b - a) / b,
        "fact_loss_per_round_pct": None,
        "cost_tokens": value("A/run_costs"),
    }


def washers_table(parents: pd.DataFrame, kids: pd.DataFrame, final_score: Callable[[str], dict | None]) -> Table:
    """The side-by-side table; ``final_score(run_id)`` reads a sawtooth arm's ``final-score.json``."""
    rows = []
    for _, p in parents.iterrows():
        mine = kids[kids["parent"] == p["run_id"]]
        base = {"measurement": p["measurement"], "washer": p["washer"], "gates": gates_label(p["gates"])}
        if p["measurement"] == "sawtooth":
            arm_a = next((k for _, k in mine.iterrows() if k.get("tags.arm") == "A"), None)
            rows.append({**base, "arm": "A (gauge fires)", **_sawtooth_row(p, arm_a, final_score)})
            continue
        for arm, group in mine.drop_duplicates(["tags.store", "tags.arm"]).groupby("tags.arm", sort=True):
            rows.append({**base, "arm": f"{p['gauge']} ({arm})", **_store_row(group)})
    rows.sort(key=lambda r: (r["measurement"], r["washer"], r["gates"], r["arm"]))
    return Table(
        "washers",
        "Washers side by side",
        (
            Column("measurement", "measurement"),
            Column("washer", "washer"),
            Column("gates", "gates"),
            Column("arm", "gauge (arm)"),
            Column("stores", "stores"),
            Column("muscle_kept", "muscle kept", lambda r: _of(r["muscle_kept"], r["muscle_total"])),
            Column("fat_removed", "fat removed", lambda r: _of(r["fat_removed"], r["fat_total"])),
            Column("tokens_cut", "tokens cut (~est)", _cut),
            Column("fact_loss_per_round_pct", "fact-loss % per round", lambda r: _pct(r["fact_loss_per_round_pct"])),
            Column("cost_tokens", "washer token cost", lambda r: _int(r["cost_tokens"])),
        ),
        tuple(rows),
        note="Sums over the stores of each row (sawtooth: arm A). Tokens cut: ~est tokens before the first round "
        "minus after the last (sawtooth: B's always-loaded total minus A's). Fact-loss per round: muscle lost over "
        "muscle total x rounds scored. Token cost: the prompt + completion tokens the endpoint reported for the "
        "washer's own calls (0 for a rule-based washer). gates off: a control arm with no fidelity gate, no keeps "
        "and no LEAN stop.",
    )


def _int(v) -> str:
    return "n/a" if v is None else f"{v:.0f}"


def _pct(v) -> str:
    return "n/a" if v is None else f"{v:.1f}%"


def _of(n, d) -> str:
    if n is None or d is None:
        return "n/a"
    return f"{n:.0f}/{d:.0f}" + (f" ({100.0 * n / d:.1f}%)" if d else "")


def _cut(r: dict) -> str:
    if r["tokens_cut"] is None:
        return "n/a"
    pct = r["tokens_cut_pct"]
    return f"{r['tokens_cut']:.0f}" + ("" if pct is None else f" ({pct:.1f}%)")
