"""Compaction regressions between two records: per arm and cohort, retention and fact accuracy
A vs B with the paired bootstrap interval of the difference (tasks paired), and every field
retained in A and lost in B, named per task. A field counts as lost when B retained it in fewer
generations than A; each is one "needle lost" for ``--max-needles-lost``.
"""

from __future__ import annotations

from collections import defaultdict

from washexp.compare import Findings
from washexp.export import bootstrap


def _scores(record: dict, key: str) -> dict[tuple[str, str], dict[str, float]]:
    """(arm, cohort) -> task -> score (a failed condition is 0, as in the study)."""
    out: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for row in record["data"].get("compaction_tasks", []):
        if row.get(key) is not None:
            out[(row["arm"], row["cohort"])][row["task"]] = float(row[key])
    return out


def compare(a: dict, b: dict) -> Findings:
    found = Findings("compaction")
    means = []
    for key in ("retention", "fact_accuracy"):
        sa, sb = _scores(a, key), _scores(b, key)
        for arm_cohort in sorted(sa.keys() & sb.keys()):
            iv = bootstrap.paired(sa[arm_cohort], sb[arm_cohort])
            if iv is None:
                continue
            arm, cohort = arm_cohort
            means.append(
                {"metric": key, "arm": arm, "cohort": cohort, "n_tasks": iv.n, "mean_a": iv.mean_a}
                | {"mean_b": iv.mean_b, "diff": -iv.diff, "ci_low": -iv.high, "ci_high": -iv.low}
            )
    found.worst_drop = max((m["mean_a"] - m["mean_b"] for m in means), default=0.0)
    fa = {(r["arm"], r["task"], r["field"]): r["retained"] for r in a["data"].get("compaction_fields", [])}
    fb = {(r["arm"], r["task"], r["field"]): r["retained"] for r in b["data"].get("compaction_fields", [])}
    lost = [
        {"arm": arm, "task": task, "field": f, "retained_a": fa[k], "retained_b": fb[k]}
        for k in sorted(fa.keys() & fb.keys())
        if fb[k] < fa[k]
        for arm, task, f in [k]
    ]
    found.needles_lost = len(lost)
    found.lines += [
        f"LOST in B: {r['arm']} · {r['task']} · {r['field']} (retained {r['retained_a']:.2f} -> {r['retained_b']:.2f})"
        for r in lost
    ]
    found.lines += [
        f"{m['metric']} {m['arm']} ({m['cohort']}): {m['mean_a']:.3f} -> {m['mean_b']:.3f} "
        f"(B - A {m['diff']:+.3f}, 95% [{m['ci_low']:+.3f}, {m['ci_high']:+.3f}], n={m['n_tasks']})"
        for m in means
        if m["mean_b"] < m["mean_a"]
    ]
    found.data = {"means": means, "fields_lost_in_b": lost}
    return found
