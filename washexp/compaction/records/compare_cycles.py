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

from washexp.compare import Findings, Shape, cover, drop_text, mean_row, rows
from washexp.errors import ConfigError
from washexp.export import bootstrap

TASK_KEYS = {
    "arm": Shape.TEXT,
    "cohort": Shape.TEXT,
    "task": Shape.TEXT,
    "k": Shape.WHOLE,
    "failed": Shape.FLAG,
    "survival": Shape.NUMBER_OR_NULL,
}
FACT_KEYS = {"arm": Shape.TEXT, "task": Shape.TEXT, "k": Shape.WHOLE, "field": Shape.TEXT, "kept": Shape.FLAG}
UNNAMED = "(every field: none recorded)"
"""The one cell of a failed condition whose task's fields neither record names."""

Cell = tuple[str, int, str, str, str]


def _tables(record: dict, side: str) -> tuple[list[dict], list[dict]]:
    """The record's task and fact rows, each of the shape compare reads (else an input error)."""
    tasks = rows(record, side, "cycles_tasks", TASK_KEYS, key=("arm", "task", "k"))
    facts = rows(record, side, "cycles_facts", FACT_KEYS, key=("arm", "task", "k", "field"), empty_ok=True)
    return tasks, facts


def cells(tasks: list[dict], facts: list[dict], side: str, names: dict[str, set[str]]) -> dict[Cell, bool]:
    """(arm, k, cohort, task, field) -> whether the last cycle's context kept the fact; a failed
    condition's fields (``names``: task -> the fields either record names) kept by none."""
    cohort = {(t["arm"], t["task"], t["k"]): t["cohort"] for t in tasks}
    out: dict[Cell, bool] = {}
    for f in facts:
        where = (f["arm"], f["task"], f["k"])
        if where not in cohort:
            named = f"{f['arm']} · {f['task']} · k={f['k']}"
            raise ConfigError(f"{side}: cycles_facts names {named}, which has no task row")
        out[(f["arm"], f["k"], cohort[where], f["task"], f["field"])] = bool(f["kept"])
    for t in tasks:
        if t["failed"]:
            for name in sorted(names.get(t["task"], ())) or [UNNAMED]:
                out[(t["arm"], t["k"], t["cohort"], t["task"], name)] = False
    return out


def _survival(
    tasks: list[dict], compared: set[tuple[str, int, str, str]]
) -> dict[tuple[str, str, int], dict[str, float]]:
    """(arm, cohort, k) -> task -> survival after the last cycle over the compared tasks (a failed
    chain keeps nothing: 0; a condition with no fact seen has no survival and is left out)."""
    out: dict[tuple[str, str, int], dict[str, float]] = {}
    for t in tasks:
        value = 0.0 if t["failed"] else t["survival"]
        if (t["arm"], t["k"], t["cohort"], t["task"]) in compared and value is not None:
            out.setdefault((t["arm"], t["cohort"], t["k"]), {})[t["task"]] = float(value)
    return out


def compare(a: dict, b: dict, allow_subset: bool = False) -> Findings:
    found = Findings("compaction cycles")
    (ta, fa), (tb, fb) = _tables(a, "A"), _tables(b, "B")
    names: dict[str, set[str]] = defaultdict(set)
    for f in (*fa, *fb):
        names[f["task"]].add(f["field"])
    ca, cb = cells(ta, fa, "A", names), cells(tb, fb, "B", names)
    common = cover(found, set(ca), set(cb), allow_subset, "arm x k x cohort x task x field")
    compared = {c[:4] for c in common}
    sa, sb = _survival(ta, compared), _survival(tb, compared)
    means: list[dict[str, Any]] = []
    for arm, cohort, k in sorted(sa.keys() & sb.keys()):
        iv = bootstrap.paired(sa[(arm, cohort, k)], sb[(arm, cohort, k)])
        if iv is not None:  # None: no task of it has a survival on both sides
            means.append(mean_row(iv, arm=arm, cohort=cohort, k=k))
    found.worst_drop = max((m["mean_a"] - m["mean_b"] for m in means), default=0.0)
    lost = [
        {"arm": arm, "k": k, "cohort": cohort, "task": task, "field": f}
        for arm, k, cohort, task, f in sorted(common)
        if ca[(arm, k, cohort, task, f)] and not cb[(arm, k, cohort, task, f)]
    ]
    found.needles_lost = len(lost)
    found.lines = [f"LOST in B: {r['arm']} · k={r['k']} · {r['task']} · {r['field']}" for r in lost] + [
        f"survival {m['arm']} k={m['k']} ({m['cohort']}): {drop_text(m)}" for m in means if m["mean_b"] < m["mean_a"]
    ]
    found.data = {"means": means, "facts_lost_in_b": lost}
    return found
