"""Cycles regressions between two records (``measurement=cycles``): per arm, cohort and k, the
survival after the last cycle A vs B with the paired bootstrap interval of the difference (tasks
paired), and every fact A's context kept after its last cycle and B's did not, named per task and k.
Each such fact is one "needle lost" for ``--max-needles-lost``.

A cell is (arm, k, cohort, task, field). A failed condition has no fact rows of its own: its cells
are its task's fields (as the other conditions of either record name them), each kept by none, as
the record counts a failed chain; so a condition that failed in B loses every fact A kept.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from washexp.compare import Findings, cover, drop_text, mean_row, rows
from washexp.errors import ConfigError
from washexp.export import bootstrap

TASK_KEYS = ("arm", "cohort", "task", "k", "failed", "survival")
FACT_KEYS = ("arm", "task", "k", "field", "kept")
UNNAMED = "(every field: none recorded)"
"""The one cell of a failed condition whose task's fields neither record names."""

Cell = tuple[str, int, str, str, str]


def cells(record: dict, side: str, names: dict[str, set[str]]) -> dict[Cell, float]:
    """(arm, k, cohort, task, field) -> 1.0 when the last cycle's context kept the fact, else 0.0;
    a failed condition's fields (``names``: task -> the fields either record names) 0.0."""
    tasks = rows(record, side, "cycles_tasks", TASK_KEYS)
    cohort = {(t["arm"], t["task"], t["k"]): t["cohort"] for t in tasks}
    out: dict[Cell, float] = {}
    for f in rows(record, side, "cycles_facts", FACT_KEYS, empty_ok=True):
        where = (f["arm"], f["task"], f["k"])
        if where not in cohort:
            named = f"{f['arm']} · {f['task']} · k={f['k']}"
            raise ConfigError(f"{side}: cycles_facts names {named}, which has no task row")
        out[(f["arm"], f["k"], cohort[where], f["task"], f["field"])] = 1.0 if f["kept"] else 0.0
    for t in tasks:
        if t["failed"]:
            for name in sorted(names.get(t["task"], ())) or [UNNAMED]:
                out[(t["arm"], t["k"], t["cohort"], t["task"], name)] = 0.0
    return out


def _survival(record: dict, tasks_of: set[tuple[str, int, str, str]]) -> dict[tuple[str, str, int], dict[str, float]]:
    """(arm, cohort, k) -> task -> survival after the last cycle over the compared tasks (a failed
    chain keeps nothing: 0; a condition with no fact seen has no survival and is left out)."""
    out: dict[tuple[str, str, int], dict[str, float]] = defaultdict(dict)
    for t in record["data"]["cycles_tasks"]:
        if (t["arm"], t["k"], t["cohort"], t["task"]) not in tasks_of:
            continue
        value = 0.0 if t["failed"] else t["survival"]
        if value is not None:
            out[(t["arm"], t["cohort"], t["k"])][t["task"]] = float(value)
    return out


def compare(a: dict, b: dict, allow_subset: bool = False) -> Findings:
    found = Findings("compaction cycles")
    names: dict[str, set[str]] = defaultdict(set)
    for record, side in ((a, "A"), (b, "B")):
        for f in rows(record, side, "cycles_facts", FACT_KEYS, empty_ok=True):
            names[f["task"]].add(f["field"])
    ca, cb = cells(a, "A", names), cells(b, "B", names)
    common = cover(found, set(ca), set(cb), allow_subset, "arm x k x cohort x task x field")
    tasks = {c[:4] for c in common}
    sa, sb = _survival(a, tasks), _survival(b, tasks)
    means: list[dict[str, Any]] = []
    for arm, cohort, k in sorted(sa.keys() & sb.keys()):
        iv = bootstrap.paired(sa[(arm, cohort, k)], sb[(arm, cohort, k)])
        if iv is None:
            continue
        means.append(mean_row(iv, arm=arm, cohort=cohort, k=k))
    found.worst_drop = max((m["mean_a"] - m["mean_b"] for m in means), default=0.0)
    lost = [
        {"arm": arm, "k": k, "cohort": cohort, "task": task, "field": f}
        for arm, k, cohort, task, f in sorted(common)
        if cb[(arm, k, cohort, task, f)] < ca[(arm, k, cohort, task, f)]
    ]
    found.needles_lost = len(lost)
    found.lines += [f"LOST in B: {r['arm']} · k={r['k']} · {r['task']} · {r['field']}" for r in lost]
    found.lines += [
        f"survival {m['arm']} k={m['k']} ({m['cohort']}): {drop_text(m)}" for m in means if m["mean_b"] < m["mean_a"]
    ]
    found.data = {"means": means, "facts_lost_in_b": lost}
    return found
