"""The closed-book control in a compaction record (``method=none``, arm ``none``).

The control's reader sees the system prompt, the task and the follow-up, no evidence and no
summary. The record puts its fact accuracy beside Full's (a note per cohort) and lists every field
of the tasks it ran: how many needles the field has, whether the control retained it (a field with
no needles is stated by the query and counts as retained, as for any arm), the share of the
control's answers that got it right and the same share for Full. A field a reader gets right with
no evidence is flagged: the compaction arms' score on it says nothing about what survived.

Offline (the reference backend) there is no reader: the control shows retention only.
"""

from __future__ import annotations

import pandas as pd

from washexp.compaction.records.runs import value
from washexp.export.records import Column, Table
from washexp.tracking.reader import load_table

ARM = "none"
COHORTS = ("primary", "control")


def closed_book(final: pd.DataFrame, conds: pd.DataFrame, uri: str, measured: bool) -> tuple[list[str], Table | None]:
    """Notes and the per-field table for the closed-book arm; nothing when the record has none."""
    arms = final[final["method"] == ARM]
    if arms.empty:
        return [], None
    full = final[final["method"] == "full"]
    notes = [_note(arms.iloc[0], full.iloc[0] if len(full) else None, measured)]
    mine = conds[(conds["arm_run_id"].isin(arms["run_id"])) & (conds["status"] == "FINISHED")]
    if mine.empty:
        return notes, None
    fulls = conds[(conds["arm_run_id"].isin(full["run_id"])) & (conds["status"] == "FINISHED")]
    kept = load_table(uri, "retention.json", list(mine["run_id"]))
    retained = kept.assign(retained=kept["retained"].astype(float)).groupby(["task", "field"])["retained"].mean()
    needles = kept.groupby(["task", "field"])["missing"].first().map(len)  # no evidence: every needle is missing
    right_none = _accuracy(uri, mine) if measured else {}
    right_full = _accuracy(uri, fulls) if measured and len(fulls) else {}
    cohort = dict(zip(mine["task"], mine["cohort"], strict=True))
    rows = []
    for (task, name), share in sorted(retained.items(), key=lambda kv: (COHORTS.index(cohort[kv[0][0]]), kv[0])):
        acc = right_none.get((task, name))
        rows.append(
            {
                "cohort": cohort[task],
                "task": task,
                "field": name,
                "needles": int(needles[(task, name)]),
                "retained": share,
                "fact_accuracy": acc,
                "full_fact_accuracy": right_full.get((task, name)),
                "without_evidence": None if acc is None else acc > 0,
            }
        )
    na = "n/a — no reader" if not measured else "n/a"
    columns = (
        Column("cohort", "cohort"),
        Column("task", "task"),
        Column("field", "field"),
        Column("needles", "needles"),
        Column("retained", "retained (closed book)"),
        Column("fact_accuracy", "fact accuracy (closed book)", lambda r: _cell(r["fact_accuracy"], na)),
        Column("full_fact_accuracy", "fact accuracy (Full)", lambda r: _cell(r["full_fact_accuracy"], na)),
        Column("without_evidence", "right without evidence", _flag),
    )
    note = (
        "One row per field of each task the closed-book arm finished. Retained: the share of its contexts "
        "that hold every needle of the field; with no evidence only a field with no needles (stated by the "
        "query) is retained. Fact accuracy: the share of answers that got the field right (a generation's "
        "answers averaged, then its generations). RIGHT WITHOUT EVIDENCE: the reader answered the field "
        "correctly with no evidence at all, so an arm's score on it does not show that the evidence survived."
    )
    if not measured:
        note += " Offline there is no reader: the arm shows retention only."
    title = "Fields: the closed book (method=none) beside Full"
    return notes, Table("closed_book_fields", title, columns, tuple(rows), note)


def _note(arm: pd.Series, full: pd.Series | None, measured: bool) -> str:
    parts = []
    for c in COHORTS:
        if value(arm, f"{c}/tasks") is None:
            continue
        ret = _fmt(value(arm, f"{c}/retention"))
        if measured:
            acc = _fmt(value(arm, f"{c}/fact_accuracy"))
            beside = "n/a (no Full arm)" if full is None else _fmt(value(full, f"{c}/fact_accuracy"))
            parts.append(f"{c}: fact accuracy {acc} against Full's {beside}, retention {ret}")
        else:
            parts.append(f"{c}: retention {ret}")
    head = (
        "Closed book (method=none, arm none): the same system prompt, task and follow-up with no evidence "
        "and no summary. "
    )
    tail = (
        ". Its retention counts a field with no needles as retained, as for any arm."
        if measured
        else ". Offline there is no reader, so it shows retention only: the share of fields with no needles, "
        "which the query itself states."
    )
    return head + "; ".join(parts) + tail


def _accuracy(uri: str, conds: pd.DataFrame) -> dict[tuple[str, str], float]:
    """(task, field) -> the share of answers right: answers averaged per generation, then generations."""
    grades = load_table(uri, "grades.json", list(conds["run_id"]))
    if grades.empty:
        return {}
    per_gen = grades.assign(correct=grades["correct"].astype(float)).groupby(["task", "field", "generation"])
    return per_gen["correct"].mean().groupby(["task", "field"]).mean().to_dict()


def _cell(v: float | None, na: str) -> str:
    return na if v is None else f"{v:.3f}"


def _flag(row: dict) -> str:
    if row["without_evidence"] is None:
        return "n/a" if row["needles"] else "(no needles)"
    return "RIGHT WITHOUT EVIDENCE" if row["without_evidence"] else "no"


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"
