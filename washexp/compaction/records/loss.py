"""The compaction record's loss cells: where each fact was lost, per arm and cohort.

Read from each finished condition's own ``fact_ledger.json`` (:mod:`washexp.compaction.scoring.loss`).
An arm's cell fraction is the mean over its tasks of each condition's fraction (tasks weigh
equally, as in every other score); its count sums the ledger rows. A failed condition has no
ledger: it is counted apart, never as cells. Each condition's cells must agree with what its run
logged (``facts_<cell>``, retention, fact accuracy): a mismatch is an error, never a table over
other numbers. Without a reader (the reference backend) only the kept half exists: the table
says so and shows no answer cells.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import pandas as pd

from washexp.compaction.records.runs import score
from washexp.compaction.scoring.loss import CELL_NAMES, LEDGER_TABLE, Cell, Cells
from washexp.errors import WashexpError
from washexp.export.records import Column, Table, show
from washexp.tracking.reader import load_table

COHORTS = ("primary", "control")
HAS_LEDGER = f"tags.washexp.sha256.{LEDGER_TABLE}"
"""The ledger's digest tag: a run made before the ledger existed has none."""
NO_READER = "n/a — no reader"
NO_LEDGER = "n/a — runs before the ledger"


class ArmCells(NamedTuple):
    """One arm's cells in one cohort."""

    arm: str
    method: str
    topn: int | None
    cohort: str
    conditions: int
    """Conditions with a ledger."""
    failed: int
    """Failed conditions (no ledger, no cells)."""
    no_ledger: int
    """Finished conditions made before the ledger existed."""
    kept: float | None
    counts: Cells | None
    fractions: dict[Cell, float] | None
    """Task-weighted means; None without a reader."""


def arm_cells(final: pd.DataFrame, fconds: pd.DataFrame, uri: str) -> list[ArmCells]:
    finished = fconds[fconds["status"] == "FINISHED"]
    has = finished[HAS_LEDGER].notna() if HAS_LEDGER in finished.columns else pd.Series(False, index=finished.index)
    with_ledger = finished[has]
    table = load_table(uri, LEDGER_TABLE, list(with_ledger["run_id"])) if len(with_ledger) else pd.DataFrame()
    per_run = {run: rows for run, rows in table.groupby("run_id")} if len(table) else {}
    out = []
    for _, arm in final.sort_values("order", kind="stable").iterrows():
        mine = fconds[fconds["arm_run_id"] == arm["run_id"]]
        for cohort in COHORTS:
            conds = mine[mine["cohort"] == cohort]
            if conds.empty:
                continue
            kept, cells, shares = [], [], []
            for _, c in conds.iterrows():
                rows = per_run.get(c["run_id"])
                if rows is None:
                    continue
                k, n, f = _condition(c, rows)
                kept.append(k)
                cells.append(n)
                shares.append(f)
            counted = [n for n in cells if n is not None]
            fractions = [f for f in shares if f is not None]  # None exactly where its cells are
            read = bool(cells) and len(counted) == len(cells)
            out.append(
                ArmCells(
                    arm["label"],
                    arm["method"],
                    None if pd.isna(arm["topn"]) else int(arm["topn"]),
                    cohort,
                    len(kept),
                    int((conds["status"] == "FAILED").sum()),
                    int(((conds["status"] == "FINISHED") & ~conds["run_id"].isin(per_run)).sum()),
                    sum(kept) / len(kept) if kept else None,
                    sum(counted, Cells()) if read else None,
                    {c: sum(s[c] for s in fractions) / len(fractions) for c in Cell} if read else None,
                )
            )
    return out


def _condition(c: pd.Series, rows: pd.DataFrame) -> tuple[float, Cells | None, dict[Cell, float] | None]:
    """One condition's kept fraction, cell counts and fractions, checked against its metrics."""
    kept = float(rows["kept"].astype(bool).mean())
    _agree(c, "retention", kept)
    if rows["cell"].isna().all():
        return kept, None, None
    values = rows["cell"].tolist()
    cells = Cells(*(sum(v == cell.value for v in values) for cell in Cell))
    if cells.total != len(values):
        raise WashexpError(f"run {c['run_id']}: {LEDGER_TABLE} has rows outside the four cells")
    shares = cells.fractions()
    assert shares is not None  # cells.total == len(values) > 0: an all-empty cell column returned above
    for cell, v in shares.items():
        _agree(c, f"facts_{cell.value}", v)
    _agree(c, "fact_accuracy", shares[Cell.KEPT_ANSWERED] + shares[Cell.DROPPED_ANSWERED])
    return kept, cells, shares


def _agree(c: pd.Series, key: str, got: float) -> None:
    logged = score(c, key)
    if logged is not None and not math.isclose(logged, got, abs_tol=1e-9):
        raise WashexpError(
            f"run {c['run_id']} ({c['label']} · {c['task']}): its {LEDGER_TABLE} gives {key} {got:.6f}, "
            f"its metric {logged:.6f}"
        )


def loss_table(cells: list[ArmCells]) -> Table:
    def cell(c: Cell):
        def render(r: dict) -> str:
            if r[c.value] is None:
                return _missing(r)
            return f"{r[c.value]:.3f} ({r[c.value + '_n']})"

        return render

    rows = tuple(
        {
            "arm": a.arm,
            "cohort": a.cohort,
            "conditions": a.conditions,
            "failed": a.failed,
            "no_ledger": a.no_ledger,
            "kept": a.kept,
            "facts": a.counts.total if a.counts else None,
            **{c.value: a.fractions[c] if a.fractions else None for c in Cell},
            **{f"{c.value}_n": getattr(a.counts, c.value) if a.counts else None for c in Cell},
        }
        for a in cells
    )
    columns = (
        Column("arm", "arm"),
        Column("cohort", "cohort"),
        Column("conditions", "conditions"),
        Column("failed", "failed (no cells)"),
        Column("kept", "kept"),
        Column("facts", "graded facts", lambda r: _missing(r) if r["facts"] is None else show(r["facts"])),
        *(Column(c.value, CELL_NAMES[c], cell(c)) for c in Cell),
    )
    old = sum(a.no_ledger for a in cells)
    return Table(
        "loss_cells",
        "Where each fact was lost (kept in the context x answered by the reader)",
        columns,
        rows,
        note="Each graded fact of each answer, crossed: kept (every needle in the compacted context, the model-free "
        "check) and answered (graded correct). Fractions: each condition's share of its facts, tasks weighted "
        "equally; in parentheses the facts counted. kept and answered + kept but missed = retention; kept and "
        "answered + dropped but answered = fact accuracy. A context that is not there (invalid, failed part) "
        "counts its facts as dropped and missed; a failed condition has no cells."
        + (f" {NO_READER}: no answer was given, so only the kept half is measured." if _unread(cells) else "")
        + (f" {old} finished condition(s) predate the ledger and are left out." if old else ""),
    )


def _missing(row: dict) -> str:
    """Why a row has no cells: none of its conditions has a ledger (made before it existed), or
    they have one but no reader answered."""
    return NO_LEDGER if row["conditions"] == 0 and row["no_ledger"] else NO_READER


def _unread(cells: list[ArmCells]) -> bool:
    return any(a.conditions and a.counts is None for a in cells)


def loss_points(cells: list[ArmCells]) -> dict[str, list[tuple[str, int | None, float, float]]]:
    """Per cohort: (method, top N, compaction loss, reading loss) of each arm with a reader."""
    out: dict[str, list] = {}
    for a in cells:
        if a.fractions is not None:
            f = a.fractions
            out.setdefault(a.cohort, []).append((a.method, a.topn, f[Cell.DROPPED_MISSED], f[Cell.KEPT_MISSED]))
    return out
