"""The record's tables by planted fact: retention (and fact accuracy with a reader) per arm, by
the fact's kind and whether it superseded an earlier value (``by_fact_type``), and by the third of
the trajectory its answer sits in (``by_depth``). Only conditions whose task planted typed facts
(a generated set: the ``planted`` tag and ``planted.json`` table) enter; each fact weighs once.
"""

from __future__ import annotations

import pandas as pd

from washexp.export.records import Column, Table
from washexp.tasks.facts import KINDS
from washexp.tasks.planted import TABLE, THIRDS
from washexp.tracking.reader import load_table


def planted_tables(conds: pd.DataFrame, uri: str, measured: bool) -> list[Table]:
    """``by_fact_type`` and ``by_depth``; none when no condition planted facts."""
    if "tags.planted" not in conds.columns:
        return []
    mine = conds[(conds["tags.planted"] == "facts") & (conds["status"] == "FINISHED")]
    if mine.empty:
        return []
    runs = list(mine["run_id"])
    facts = load_table(uri, TABLE, runs)[["run_id", "field", "kind", "superseded", "third"]]
    kept = load_table(uri, "retention.json", runs).assign(retained=lambda t: t["retained"].astype(float))
    facts = facts.merge(kept.groupby(["run_id", "field"])["retained"].mean().reset_index(), on=["run_id", "field"])
    if measured:
        grades = load_table(uri, "grades.json", runs).assign(correct=lambda t: t["correct"].astype(float))
        facts = facts.merge(grades.groupby(["run_id", "field"])["correct"].mean().reset_index(), on=["run_id", "field"])
    order = dict(zip(mine["run_id"], zip(mine["order"], mine["label"], strict=True), strict=True))
    facts = facts.assign(
        arm=facts["run_id"].map(lambda r: order[r][1]), order=facts["run_id"].map(lambda r: order[r][0])
    )
    failed = int(((conds["tags.planted"] == "facts") & (conds["status"] != "FINISHED")).sum())
    note = f" {failed} failed conditions are not in it." if failed else ""
    by_type = _rows(facts, ["kind", "superseded"], lambda k: (KINDS.index(k[0]), bool(k[1])), measured)
    by_depth = _rows(facts, ["third"], lambda k: THIRDS.index(k[0]), measured)
    return [
        Table(
            "by_fact_type",
            "By planted fact type: retention" + (" and fact accuracy" if measured else "") + ", per arm",
            (
                Column("arm", "arm"),
                Column("kind", "fact type"),
                Column("superseded", "superseded"),
                *_columns(measured),
            ),
            by_type,
            note="Each planted fact of each task once (its generations' mean); superseded: the answer is the last "
            "of two values." + note,
        ),
        Table(
            "by_depth",
            "By depth of the planted answer (third of the tool results' text)",
            (Column("arm", "arm"), Column("third", "depth"), *_columns(measured)),
            by_depth,
            note="first, middle, last: the third of the trajectory's tool results in which the answer's line"
            " starts." + note,
        ),
    ]


def _columns(measured: bool) -> tuple[Column, ...]:
    return (
        Column("facts", "facts"),
        Column("retention", "retention"),
        *((Column("fact_accuracy", "fact accuracy"),) if measured else ()),
    )


def _rows(facts: pd.DataFrame, keys: list[str], rank, measured: bool) -> tuple[dict, ...]:
    rows = []
    for (_, arm), arm_facts in sorted(facts.groupby(["order", "arm"]), key=lambda kv: kv[0]):
        for key, group in sorted(arm_facts.groupby(keys), key=lambda kv: rank(kv[0])):
            row = {"arm": arm, **dict(zip(keys, key, strict=True)), "facts": len(group)}
            row["retention"] = float(group["retained"].mean())
            if measured:
                row["fact_accuracy"] = float(group["correct"].mean())
            rows.append(row)
    return tuple(rows)
