"""The compaction record's tables of arms and tasks, including the endpoint's token counts.

Two meters, never mixed: ``api_*`` is the endpoint's own count of each answered context (the
reader's ``prompt_tokens``), the study's "actual downstream API input tokens"; the plain names
(``input_tokens``, ``reduction_pct``...) are the local Qwen count (ChatML rendering), kept beside
it as a labelled secondary figure. Reduction and shortening by the API count compare each
context with the same task's Full context as the endpoint counted it, so they are computed here,
where the Full runs are at hand.
"""

from __future__ import annotations

import math
from functools import partial

import pandas as pd

from washexp.compaction.generation import INVALID_KINDS
from washexp.compaction.records.runs import metric, value
from washexp.export.records import Column, Table, show, through

COHORTS = ("primary", "control")


def api_by_arm(conds: pd.DataFrame) -> dict[tuple[str, str], dict[str, float | None]]:
    """(arm label, cohort) -> API reduction and shortening against Full (empty without a Full run)."""
    full = {r["task"]: value(r, "api_input_tokens") for _, r in conds[conds["label"] == "Full"].iterrows()}
    out: dict[tuple[str, str], dict] = {}
    for (label, cohort), group in conds.groupby(["label", "cohort"], sort=False):
        cuts, shortened, contexts, seen = [], 0, 0, False
        for _, c in group.iterrows():
            f = full.get(c["task"])
            sizes = [v for k, v in c.items() if str(k).startswith("metrics.api_input_tokens/g") and pd.notna(v)]
            contexts += int(value(c, "contexts") or 0)
            if f is None or not sizes:
                continue
            seen = True
            shortened += sum(s < f for s in sizes)
            cuts.append(math.fsum(100.0 * (f - s) / f for s in sizes) / len(sizes))
        if seen:  # fsum: exact sums, so the figure does not hang on the order the store lists the runs in
            reduction = math.fsum(cuts) / len(cuts) if cuts else None
            out[(str(label), str(cohort))] = {
                "api_reduction_pct": reduction,
                "api_contexts_shortened": float(shortened),
            }
    return out


ARM_KEYS = (
    "tasks",
    "fact_accuracy",
    "all_fields_correct",
    "retention",
    "retention_all_fields",
    "api_input_tokens",
    "api_input_tokens_total",
    "input_tokens",
    "input_tokens_total",
    "reduction_pct",
    "contexts",
    "contexts_shortened",
    "invalid",
    "contexts_failed",
    "failed",
    "answers_graded",
    "format_failures",
)


def _format_failures(r) -> str:
    """``3/52``: answers not in the asked shape, of the answers graded (n/a without a reader)."""
    if not r["answers_graded"]:
        return "n/a"
    return f"{r['format_failures'] or 0:.0f}/{r['answers_graded']:.0f}"


def cost_by_arm(conds: pd.DataFrame) -> dict[tuple[str, str], dict[str, float | None]]:
    """(arm label, cohort) -> ``cost_usd``, ``calls_live``, ``calls_replayed`` summed over its
    conditions that counted calls; the cost None unless each of them has one (priced, usage reported)."""
    out: dict[tuple[str, str], dict] = {}
    for (label, cohort), group in conds.groupby(["label", "cohort"], sort=False):
        counted = [c for _, c in group.iterrows() if value(c, "calls_live") is not None]
        if not counted:
            continue
        costs = [value(c, "cost_usd") for c in counted]
        priced = [x for x in costs if x is not None]
        out[(str(label), str(cohort))] = {
            "cost_usd": None if len(priced) < len(costs) else math.fsum(priced),
            "calls_live": sum(value(c, "calls_live") for c in counted),
            "calls_replayed": sum(value(c, "calls_replayed") or 0.0 for c in counted),
        }
    return out


def arm_table(
    final: pd.DataFrame,
    cohort: str,
    api: dict,
    not_measured: str,
    over_by: dict | None = None,
    cost: dict | None = None,
) -> Table:
    """``over_by``: (arm label, cohort) -> conditions refused as over the model's window; the column
    shows only when some were. ``cost``: :func:`cost_by_arm`; the cost columns show only when some
    arm has a cost (a price was configured)."""
    rows = []
    for _, arm in final.iterrows():
        if value(arm, f"{cohort}/tasks") is None:
            continue
        m = {k: value(arm, f"{cohort}/{k}") for k in ARM_KEYS}
        extra = api.get((arm["label"], cohort), {"api_reduction_pct": None, "api_contexts_shortened": None})
        over = (over_by or {}).get((arm["label"], cohort), 0)
        paid = (cost or {}).get((arm["label"], cohort), {"cost_usd": None, "calls_live": None, "calls_replayed": None})
        rows.append({"arm": arm["label"], **m, **extra, **paid, "over_window": over, "run_id": arm["run_id"]})
    priced = any(r["cost_usd"] is not None for r in rows)

    def na(key):
        return lambda r: not_measured if r[key] is None else show(r[key])

    def shortened(key):
        return lambda r: "n/a" if r[key] is None else f"{r[key]:.0f}/{r['contexts'] or 0:.0f}"

    columns = (
        Column("arm", "arm"),
        Column("tasks", "tasks", lambda r: f"{r['tasks']:.0f}"),
        Column("fact_accuracy", "fact accuracy", na("fact_accuracy")),
        Column("all_fields_correct", "all fields correct", na("all_fields_correct")),
        Column("retention", "retention"),
        Column("retention_all_fields", "all fields retained"),
        Column("api_input_tokens", "mean API input tokens", lambda r: _num(r["api_input_tokens"], 1)),
        Column("api_input_tokens_total", "total API input tokens", lambda r: _num(r["api_input_tokens_total"], 0)),
        *(
            (
                Column("cost_usd", "cost (USD)", lambda r: "n/a" if r["cost_usd"] is None else f"{r['cost_usd']:.6f}"),
                Column("calls", "calls live / replayed", _calls),
            )
            if priced
            else ()
        ),
        Column("api_reduction_pct", "reduction vs Full (API)", lambda r: _pct(r["api_reduction_pct"])),
        Column("api_contexts_shortened", "shortened vs Full (API)", shortened("api_contexts_shortened")),
        Column("input_tokens", "mean input tokens (local Qwen)", lambda r: _num(r["input_tokens"], 1)),
        Column("input_tokens_total", "total input tokens (local Qwen)", lambda r: _num(r["input_tokens_total"], 0)),
        Column("reduction_pct", "reduction vs Full (local Qwen)", lambda r: _pct(r["reduction_pct"])),
        Column(
            "contexts_shortened",
            "shortened vs Full (local Qwen)",
            lambda r: f"{r['contexts_shortened'] or 0:.0f}/{r['contexts'] or 0:.0f}",
        ),
        Column("format_failures", "format failures", _format_failures),
        Column("invalid", "invalid", lambda r: _num(r["invalid"], 0)),
        Column("contexts_failed", "failed contexts", lambda r: _num(r["contexts_failed"] or 0.0, 0)),
        Column("failed", "failed conditions", lambda r: _num(r["failed"], 0)),
        *((Column("over_window", "of which over the window", lambda r: str(r["over_window"])),) if over_by else ()),
        Column("run_id", "arm run"),
    )
    return Table(
        f"arms_{cohort}",
        f"Arms, {cohort} cohort",
        columns,
        tuple(rows),
        note="Means over tasks (equal weights). API: the endpoint's own input count of each answered "
        "context, the study's figure; local Qwen: washexp's count (ChatML rendering), secondary. "
        "Reduction: mean per-task cut in input tokens against the task's Full context. Shortened: "
        "contexts smaller than Full. Format failures: answers not in the asked shape, one JSON object "
        '{"facts": {...}} with exactly the task\'s fields (graded as they are, counted apart: could not '
        "format, not evidence lost). Invalid: H broke a validity rule; failed contexts: a role's reply "
        "(S, Jev, H) could not be used; failed conditions: the whole run failed. All score 0."
        + (
            " Cost: the money of the live calls at the configured endpoint.price, each call counted once, in "
            "the first condition that used it; a replayed call is free and counted apart."
            if priced
            else ""
        ),
    )


def _calls(row: dict) -> str:
    if row["calls_live"] is None:
        return "n/a"
    return f"{row['calls_live']:.0f} / {row['calls_replayed'] or 0:.0f}"


def per_task_table(
    conds: pd.DataFrame, final: pd.DataFrame, key: str, title: str, digits: int = 3, over: pd.Series | None = None
) -> Table:
    """``over``: which failed conditions were over the model's window (``OVER WINDOW`` cells)."""
    labels = list(final.sort_values("order", kind="stable")["label"].drop_duplicates())
    rows = []
    for (cohort, task), group in _tasks(conds):
        row = {"task": task, "cohort": cohort, "units": _first(group, "units_total")}
        failed: list[str] = []
        too_long: list[str] = []
        narrow = group[[c for c in ("label", "status", f"metrics.{key}") if c in group.columns]]
        for i, c in narrow.iterrows():  # the columns read only: a row of the wide table is slow to build
            row[c["label"]] = value(c, key)
            if c["status"] == "FAILED":
                (too_long if over is not None and over[i] else failed).append(c["label"])
        rows.append({**row, "failed": failed, "over_window": too_long})
    units = (Column("units", "units", lambda r: _num(r["units"], 0)),) if key == "units_kept" else ()
    columns = (
        Column("task", "task"),
        Column("cohort", "cohort"),
        *units,
        *(Column(label, label, partial(_cell, label=label, digits=digits)) for label in labels),
    )
    return Table(f"per_task_{key}", title, columns, tuple(rows))


def _cell(row: dict, label: str, digits: int) -> str:
    if label in row["over_window"]:
        return "OVER WINDOW"
    return "FAILED" if label in row["failed"] else _num(row.get(label), digits)


def generations_table(conds: pd.DataFrame, planned: int, note: str) -> Table:
    """Per task: generations planned, and how many distinct S bodies, rankings and H bodies they gave."""
    rows = []
    for (cohort, task), group in _tasks(conds):
        row = {"task": task, "cohort": cohort, "planned": planned}
        for key in ("distinct_s", "distinct_rankings", "distinct_h"):
            row[key] = _max(group, key)
        rows.append(row)
    columns = (
        Column("task", "task"),
        Column("cohort", "cohort"),
        Column("planned", "generations planned"),
        Column("distinct_s", "distinct S bodies", lambda r: _num(r["distinct_s"], 0)),
        Column("distinct_rankings", "distinct rankings", lambda r: _num(r["distinct_rankings"], 0)),
        Column("distinct_h", "distinct H bodies", lambda r: _num(r["distinct_h"], 0)),
    )
    return Table("generations", "Generations per task: planned and distinct", columns, tuple(rows), note=note)


def invalid_table(conds: pd.DataFrame) -> Table:
    """Every condition with an invalid context, by the rule it broke: the model breaking H's
    protocol is a result, and a zero with no reason would hide it."""
    rows = []
    for _, c in conds.sort_values(["order", "task"], kind="stable").iterrows():
        counts = {k: value(c, f"invalid_{k}") or 0.0 for k in INVALID_KINDS}
        if any(counts.values()):
            rows.append({"arm": c["label"], "task": c["task"], **counts, "run_id": c["run_id"]})
    columns = (
        Column("arm", "arm"),
        Column("task", "task"),
        *(Column(k, label, through(k, partial(_num, digits=0))) for k, label in INVALID_KINDS.items()),
        Column("run_id", "condition run"),
    )
    return Table(
        "invalid_contexts",
        "Invalid contexts by the rule they broke",
        columns,
        tuple(rows),
        note="Zero credit, still in the denominator; each message is in its condition run's failures.json.",
    )


def failed_contexts_table(conds: pd.DataFrame) -> Table:
    """Every condition with a context whose role reply failed, by role."""
    rows = []
    for _, c in conds.sort_values(["order", "task"], kind="stable").iterrows():
        if value(c, "contexts_failed"):
            counts = {r: value(c, f"contexts_failed_{r}") or 0.0 for r in ("s", "jev", "h")}
            rows.append({"arm": c["label"], "task": c["task"], **counts, "run_id": c["run_id"]})
    columns = (
        Column("arm", "arm"),
        Column("task", "task"),
        *(
            Column(r, f"failed by {r.upper() if r != 'jev' else 'Jev'}", through(r, partial(_num, digits=0)))
            for r in ("s", "jev", "h")
        ),
        Column("run_id", "condition run"),
    )
    return Table(
        "failed_contexts",
        "Contexts failed by a role's reply",
        columns,
        tuple(rows),
        note="Zero credit, still in the denominator; the reasons are in each condition run's failures.json.",
    )


def _tasks(conds: pd.DataFrame):
    return sorted(conds.groupby(["cohort", "task"]), key=lambda kv: (COHORTS.index(kv[0][0]), kv[0][1]))


def _first(group: pd.DataFrame, key: str) -> float | None:
    found = metric(group, key).dropna()
    return float(found.iloc[0]) if len(found) else None


def _max(group: pd.DataFrame, key: str) -> float | None:
    found = metric(group, key).dropna()
    return float(found.max()) if len(found) else None


def _num(v: float | None, digits: int) -> str:
    return "n/a" if v is None else f"{v:,.{digits}f}"


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f}%"
