"""The compaction record's machine tables, read by ``washexp compare``: per condition its task scores
(with the arm's method and N, and whether the condition ran with every context valid: what
:mod:`washexp.compaction.records.decisions` tests), and per field whether it was retained (the
fraction of generations whose context kept every needle of the field). A finished condition without
its ``retention.json`` table is an error, never a record without fields."""

from __future__ import annotations

import pandas as pd

from washexp.compaction.generation import INVALID_KINDS
from washexp.compaction.records.runs import score, value
from washexp.tracking.kinds import ArmRun
from washexp.tracking.reader import load_table


def compare_data(final: pd.DataFrame, conds: pd.DataFrame, uri: str) -> dict[str, list]:
    conds = conds[conds["arm_run_id"].isin(final["run_id"])]
    tasks = task_rows(final, conds)
    fields = []
    finished = conds[conds["status"] == "FINISHED"]  # a failed condition wrote no table: its task row says so
    if len(finished):
        table = load_table(uri, "retention.json", list(finished["run_id"]))
        label = dict(zip(finished["run_id"], finished["label"], strict=True))
        table = table.assign(arm=table["run_id"].map(label), retained=table["retained"].astype(float))
        grouped = table.groupby(["arm", "task", "field"], sort=True)["retained"].mean()
        fields = [{"arm": a, "task": t, "field": f, "retained": r} for (a, t, f), r in grouped.items()]
    return {"compaction_tasks": tasks, "compaction_fields": fields}


def task_rows(final: pd.DataFrame, conds: pd.DataFrame) -> list[dict]:
    """``compaction_tasks``: one row per condition of the final arms, from its logged metrics alone."""
    conds = conds[conds["arm_run_id"].isin(final["run_id"])]
    method = dict(zip(final["label"], final["method"], strict=True))
    topn = dict(zip(final["label"], final.get("topn", pd.Series(None, index=final.index)), strict=True))
    return [
        {
            "arm": c["label"],
            "method": method[c["label"]],
            "topn": ArmRun.parse("topn", topn[c["label"]]),
            "cohort": c["cohort"],
            "task": c["task"],
            "failed": c["status"] == "FAILED",
            "valid": _valid(c),
            "retention": score(c, "retention"),
            "fact_accuracy": score(c, "fact_accuracy"),
        }
        for _, c in conds.sort_values(["order", "task"], kind="stable").iterrows()
    ]


def _valid(c: pd.Series) -> bool:
    """The condition ran and no context of it failed a role or broke a rule (valid-only's tasks)."""
    if c["status"] == "FAILED" or value(c, "contexts_failed"):
        return False
    return not any(value(c, f"invalid_{k}") for k in INVALID_KINDS)
