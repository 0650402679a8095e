"""The compaction record's decisions and headline, read from its own per-task values.

Everything here reads ``data.compaction_tasks`` (one row per arm and task: the study's
hierarchical mean, 0 for a failed condition, and whether every context of it was valid), so a
reader can recompute each p from the record alone (:mod:`washexp.export.decide`).

Families are declared per analysis, cohort and metric, and Holm-adjusted within themselves:
``S vs H`` (at each N), ``vs Full`` (each arm), ``vs closed book`` (each arm) and ``baselines vs S
and H`` (each baseline against S and H at its N; the closed book is in its own family, not in
``vs Full``). A pair with no task in common in a cohort (an arm that did not run it) is left out
of that cohort's family; one task in common is listed, not tested. Two analyses: ``ITT`` (intention to treat,
the study's rule: a failed condition or context scores 0) and ``valid-only`` (the tasks where
both arms' conditions ran and every context was valid).
"""

from __future__ import annotations

from washexp.export import decide
from washexp.export.records import Column, Table

COHORTS = ("primary", "control")
METRICS = ("retention", "fact_accuracy")
ANALYSES = ("ITT", "valid-only")
STUDY = ("S", "H")
FULL, CLOSED = "full", "none"
SCORE = (0.0, 1.0)
"""Where one arm's per-task value lies (the headline interval's whole range)."""

Pair = tuple[str, str]


def families(rows: list[dict]) -> list[tuple[str, list[Pair]]]:
    """The record's declared families of (A, B) arm pairs, in arm order."""
    arms: dict[str, tuple[str, int | None]] = {}
    for r in rows:
        arms.setdefault(r["arm"], (r["method"], r["topn"]))
    at = {(m, n): a for a, (m, n) in arms.items()}
    full = [a for a, (m, _) in arms.items() if m == FULL]
    closed = [a for a, (m, _) in arms.items() if m == CLOSED]
    sh = [(at["S", n], at["H", n]) for (m, n) in at if m == "S" and ("H", n) in at]
    baselines = [
        (a, at[s, n]) for a, (m, n) in arms.items() if m not in (FULL, CLOSED, *STUDY) for s in STUDY if (s, n) in at
    ]
    out = [
        ("S vs H", sh),
        ("vs Full", [(a, full[0]) for a in arms if full and a != full[0] and a not in closed]),
        ("vs closed book", [(a, closed[0]) for a in arms if closed and a != closed[0]]),
        ("baselines vs S and H", baselines),
    ]
    return [(name, pairs) for name, pairs in out if pairs]


def per_task(rows: list[dict], metric: str, cohort: str, valid_only: bool) -> dict[str, dict[str, float]]:
    """arm -> task -> value (tasks with a value; valid-only keeps the valid conditions alone)."""
    out: dict[str, dict[str, float]] = {}
    for r in rows:
        if r["cohort"] == cohort and r[metric] is not None and (r["valid"] or not valid_only):
            out.setdefault(r["arm"], {})[r["task"]] = float(r[metric])
    return out


def metrics_of(rows: list[dict]) -> list[str]:
    return [m for m in METRICS if any(r.get(m) is not None for r in rows)]


def decisions(rows: list[dict], delta: float = decide.DELTA) -> list[dict]:
    """Every declared comparison, both analyses, each cohort and measured metric."""
    out = []
    for analysis in ANALYSES:
        for cohort in COHORTS:
            for metric in metrics_of(rows):
                values = per_task(rows, metric, cohort, analysis == "valid-only")
                if not values:
                    continue
                for family, pairs in families(rows):
                    out += family_rows(
                        values, pairs, delta, analysis=analysis, family=family, cohort=cohort, metric=metric
                    )
    return out


def summary(rows: list[dict], limit: int = 6) -> list[str]:
    """A sweep's closing lines: the first declared family's ITT verdicts on the first cohort it
    has, on the headline metric (fact accuracy when measured), at most ``limit`` of them."""
    metric = "fact_accuracy" if "fact_accuracy" in metrics_of(rows) else "retention"
    found = [r for r in decisions(rows) if r["analysis"] == "ITT" and r["metric"] == metric]
    if not found:
        return []
    first = next((r for r in found if r["p"] is not None), found[0])  # a family and cohort with a test
    shown = [r for r in found if (r["family"], r["cohort"]) == (first["family"], first["cohort"])]
    head = (
        f"  decisions ({first['family']}, {first['cohort']}, {metric.replace('_', ' ')}, ITT; "
        "every comparison is in the record's decisions table):"
    )
    lines = [head] + [
        f"    {r['a']} vs {r['b']} ({r['n_tasks']} task{'' if r['n_tasks'] == 1 else 's'}): {r['verdict']}"
        + ("" if r["p"] is None else f", p {r['p']:.3g}, Holm {r['p_holm']:.3g}")
        for r in shown[:limit]
    ]
    if len(shown) > limit:
        lines.append(f"    ... and {len(shown) - limit} more")
    return lines


def cycles_decisions(tasks: list[dict], delta: float = decide.DELTA) -> list[dict]:
    """A cycles record's comparisons (``data.cycles_tasks``): within each arm, each k against k=1
    on last-cycle survival, one family per analysis, cohort and arm (ITT: a failed condition 0)."""
    out = []
    for analysis in ANALYSES:
        for cohort in COHORTS:
            for arm in dict.fromkeys(t["arm"] for t in tasks):
                values: dict[str, dict[str, float]] = {}
                for t in tasks:
                    if t["arm"] != arm or t["cohort"] != cohort:
                        continue
                    v = 0.0 if t["failed"] and analysis == "ITT" else t["survival"]
                    if v is not None and not (t["failed"] and analysis == "valid-only"):
                        values.setdefault(f"{arm} k={t['k']}", {})[t["task"]] = float(v)
                ks = sorted({t["k"] for t in tasks if t["arm"] == arm and t["cohort"] == cohort})
                pairs = [(f"{arm} k={k}", f"{arm} k=1") for k in ks if k != 1 and 1 in ks]
                where = {"analysis": analysis, "family": f"k vs k=1, {arm}", "cohort": cohort, "metric": "survival"}
                out += family_rows(values, pairs, delta, **where)
    return out


def family_rows(values: dict[str, dict[str, float]], pairs: list[Pair], delta: float, **where) -> list[dict]:
    """One family's rows: each pair tested on its tasks in common, Holm over the family; ``where``
    (analysis, family, cohort, metric) leads each row."""
    tests: list[decide.Test | list[float]] = []
    pairs = [(a, b) for a, b in pairs if values.get(a, {}).keys() & values.get(b, {}).keys()]
    for a, b in pairs:
        va, vb = values[a], values[b]
        tasks = sorted(va.keys() & vb.keys())
        d = [va[t] - vb[t] for t in tasks]
        tests.append(decide.test(d, delta=delta) if len(d) >= 2 else d)
    tested = [t for t in tests if isinstance(t, decide.Test)]
    p_holm = iter(decide.holm([t.p for t in tested]))
    e_holm = iter(decide.holm([t.p_equiv for t in tested]))
    rows = []
    for (a, b), t in zip(pairs, tests, strict=True):
        row = {**where, "a": a, "b": b}
        if isinstance(t, list):  # one task in common: its difference, no test
            rows.append(
                {**row, "n_tasks": len(t), "diff": t[0], **dict.fromkeys(("ci_low", "ci_high", "p", "p_holm"))}
                | {"whole_range": None, "p_equiv": None, "p_equiv_holm": None}
                | {"verdict": f"not tested: {len(t)} task in common"}
            )
            continue
        ph, eh = next(p_holm), next(e_holm)
        rows.append(
            {
                **row,
                "n_tasks": t.n,
                "diff": t.diff,
                "ci_low": t.low,
                "ci_high": t.high,
                "whole_range": decide.whole_range(t.low, t.high),
                "p": t.p,
                "p_holm": ph,
                "p_equiv": t.p_equiv,
                "p_equiv_holm": eh,
                "verdict": decide.verdict(a, b, t, ph, eh, len(tested), delta),
            }
        )
    return rows


def _interval(r: dict) -> str:
    if r["ci_low"] is None:
        return "n/a"
    if r["whole_range"]:
        return "whole range"
    return f"[{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]"


def _num(key: str, fmt: str):
    return lambda r: "n/a" if r[key] is None else format(r[key], fmt)


NOTE = (
    "Each row compares two arms task by task: the {test}. The interval inverts the same test (unadjusted, so "
    "it agrees with p, not always with the Holm verdict; 'whole range' when the test cannot reject any "
    "difference, as with 5 tasks or fewer). Holm adjusts p within each family (analysis, cohort, metric, "
    "family). Verdict: a Holm p below {alpha} says which keeps more; else equivalence within ±{delta:g} by two "
    "one-sided sign-flip tests (Holm-adjusted the same way; it needs 5 tasks or more, as no one-sided p is "
    "below 1 / 2^n); else undecided, with about how many tasks would decide it (normal approximation at the "
    "family's strictest Holm level). ITT: intention to treat, the study's rule (a failed condition or context "
    "scores 0); valid-only: the tasks where both arms' conditions ran and every context was valid. n tasks is "
    "per row; a pair with no task in common in a cohort is left out of it, one task in common is listed and "
    "not tested."
)


def table(found: list[dict], delta: float = decide.DELTA, note: str = NOTE) -> Table:
    """The ``decisions`` table of a record (written as .csv and .tex beside it too)."""
    columns = (
        Column("analysis", "analysis"),
        Column("family", "family"),
        Column("cohort", "cohort"),
        Column("metric", "metric"),
        Column("a", "A"),
        Column("b", "B"),
        Column("n_tasks", "n tasks"),
        Column("diff", "A − B", _num("diff", "+.3f")),
        Column("ci_low", "95% interval", _interval),
        Column("p", "p", _num("p", ".4f")),
        Column("p_holm", "Holm p", _num("p_holm", ".4f")),
        Column("verdict", "verdict"),
    )
    text = note.format(test=decide.describe(), alpha=decide.ALPHA, delta=delta)
    return Table("decisions", "Decisions: paired tests over tasks", columns, tuple(found), note=text, sheet=True)


def decisions_table(rows: list[dict], delta: float = decide.DELTA) -> Table:
    return table(decisions(rows, delta), delta)


def mean_interval(values: list[float]) -> tuple[float, float] | None:
    """The interval of a mean over tasks wherever a record shows one (the headline table, the bars
    of the plots, the bands of the cycles curves): the sign-flip interval, within [0, 1]; none
    under 2 tasks."""
    return decide.interval(values, bounds=SCORE) if len(values) >= 2 else None


def arm_means(rows: list[dict], metric: str) -> list[dict]:
    """The headline's rows: per cohort and arm, its tasks, the mean of ``metric`` (ITT) and its
    interval (:func:`mean_interval`)."""
    out = []
    for cohort in COHORTS:
        for arm, values in per_task(rows, metric, cohort, False).items():
            v = list(values.values())
            low, high = mean_interval(v) or (None, None)
            out.append(
                {
                    "cohort": cohort,
                    "arm": arm,
                    "n_tasks": len(v),
                    "metric": metric,
                    "mean": sum(v) / len(v),
                    "ci_low": low,
                    "ci_high": high,
                    "whole_range": None if low is None or high is None else decide.whole_range(low, high, SCORE),
                }
            )
    return out


def headline_table(rows: list[dict], metric: str) -> Table:
    """Arm, tasks, the record's headline metric (ITT) and its sign-flip interval over tasks."""
    out = arm_means(rows, metric)
    columns = (
        Column("cohort", "cohort"),
        Column("arm", "arm"),
        Column("n_tasks", "tasks"),
        Column("metric", "metric"),
        Column("mean", "mean", _num("mean", ".3f")),
        Column("ci_low", "95% interval", lambda r: _interval(r).replace("+", "")),
    )
    return Table(
        "headline",
        f"Headline: {metric.replace('_', ' ')} by arm",
        columns,
        tuple(out),
        note="Tasks weigh equally (ITT: a failed condition scores 0). The interval is the sign-flip interval of "
        "the mean over tasks (every value it does not reject at 0.05; it assumes a task's value is as likely "
        "above as below it); 'whole range' with 5 tasks or fewer.",
        sheet=True,
    )
