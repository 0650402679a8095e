"""Compaction regressions between two records: per arm and cohort, retention and fact accuracy
A vs B with the paired bootstrap interval of the difference (tasks paired), and every field
retained in A and lost in B, named per task. A field counts as lost when B retained it in fewer
generations than A; each is one "needle lost" for ``--max-needles-lost``.

A cell is (arm, cohort, task, field). A failed condition has no field rows of its own: its cells
are its task's fields (as the other conditions of either record name them), each retained 0, as the study
counts a failed condition; so a condition that failed in B loses every field A retained.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from washexp.compare import Findings, Shape, cover, drop_text, mean_row, rows
from washexp.errors import ConfigError
from washexp.export import bootstrap

TASK_KEYS = {
    "arm": Shape.TEXT,
    "cohort": Shape.TEXT,
    "task": Shape.TEXT,
    "failed": Shape.FLAG,
    "retention": Shape.NUMBER_OR_NULL,
    "fact_accuracy": Shape.NUMBER_OR_NULL,
}
FIELD_KEYS = {"arm": Shape.TEXT, "task": Shape.TEXT, "field": Shape.TEXT, "retained": Shape.NUMBER}
UNNAMED = "(every field: none recorded)"
"""The one cell of a failed condition whose task's fields neither record names."""


def _fields(record: dict, side: str) -> list[dict]:
    tasks = rows(record, side, "compaction_tasks", TASK_KEYS, key=("arm", "task"))
    fields = rows(record, side, "compaction_fields", FIELD_KEYS, key=("arm", "task", "field"), empty_ok=True)
    with_fields = {(f["arm"], f["task"]) for f in fields}
    blind = [t for t in tasks if not t["failed"] and (t["arm"], t["task"]) not in with_fields]
    if blind:
        t = blind[0]
        raise ConfigError(
            f"{side}: {len(blind)} finished condition(s) without compaction_fields rows, first {t['arm']} · "
            f"{t['task']} (a record exported before its fields were read: export it again)"
        )
    return fields


def cells(record: dict, side: str, names: dict[str, set[str]]) -> dict[tuple[str, str, str, str], float]:
    """(arm, cohort, task, field) -> fraction of generations that retained it; a failed
    condition's fields (``names``: task -> the fields either record names) retained 0."""
    cohort = {(t["arm"], t["task"]): t["cohort"] for t in record["data"]["compaction_tasks"]}
    out: dict[tuple[str, str, str, str], float] = {}
    for f in record["data"]["compaction_fields"]:
        if (f["arm"], f["task"]) not in cohort:
            raise ConfigError(f"{side}: compaction_fields names {f['arm']} · {f['task']}, which has no task row")
        out[(f["arm"], cohort[(f["arm"], f["task"])], f["task"], f["field"])] = float(f["retained"])
    for t in record["data"]["compaction_tasks"]:
        if t["failed"]:
            for name in sorted(names.get(t["task"], ())) or [UNNAMED]:
                out[(t["arm"], t["cohort"], t["task"], name)] = 0.0
    return out


def _scores(record: dict, key: str, tasks_of: set[tuple[str, str, str]]) -> dict[tuple[str, str], dict[str, float]]:
    """(arm, cohort) -> task -> score over the compared tasks (a failed condition is 0, as in the study)."""
    out: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for row in record["data"]["compaction_tasks"]:
        if row[key] is not None and (row["arm"], row["cohort"], row["task"]) in tasks_of:
            out[(row["arm"], row["cohort"])][row["task"]] = float(row[key])
    return out


def compare(a: dict, b: dict, allow_subset: bool = False) -> Findings:
    found = Findings("compaction")
    names: dict[str, set[str]] = defaultdict(set)
    for f in (*_fields(a, "A"), *_fields(b, "B")):
        names[f["task"]].add(f["field"])
    ca, cb = cells(a, "A", names), cells(b, "B", names)
    common = cover(found, set(ca), set(cb), allow_subset, "arm x cohort x task x field")
    tasks = {k[:3] for k in common}
    means: list[dict[str, Any]] = []
    for key in ("retention", "fact_accuracy"):
        sa, sb = _scores(a, key, tasks), _scores(b, key, tasks)
        for arm_cohort in sorted(sa.keys() & sb.keys()):
            iv = bootstrap.paired(sa[arm_cohort], sb[arm_cohort])
            if iv is None:
                continue
            arm, cohort = arm_cohort
            means.append(mean_row(iv, metric=key, arm=arm, cohort=cohort))
    found.worst_drop = max((m["mean_a"] - m["mean_b"] for m in means), default=0.0)
    lost = [
        {"arm": arm, "cohort": cohort, "task": task, "field": f, "retained_a": ca[k], "retained_b": cb[k]}
        for k in sorted(common)
        if cb[k] < ca[k]
        for arm, cohort, task, f in [k]
    ]
    found.needles_lost = len(lost)
    found.lines += [
        f"LOST in B: {r['arm']} · {r['task']} · {r['field']} (retained {r['retained_a']:.2f} -> {r['retained_b']:.2f})"
        for r in lost
    ]
    found.lines += [
        f"{m['metric']} {m['arm']} ({m['cohort']}): {drop_text(m)}" for m in means if m["mean_b"] < m["mean_a"]
    ]
    found.data = {"means": means, "fields_lost_in_b": lost}
    return found
