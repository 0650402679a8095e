"""The compaction record: arms by cohort, tasks by arm, paired intervals, plots, run ids.

Arm rows are the arm runs' own cohort metrics (``primary/retention``...); per-task cells and
the bootstrap read the condition runs. A failed condition counts 0 and stays in, as in the
study's aggregation; an unmeasured value is ``n/a``, never 0. A condition that failed because a
context was longer than the model's window (the endpoint's own refusal) is such a 0 too, but
counted apart and shown as ``OVER WINDOW``: a property of the model, not a broken run.
Preflight-phase runs are listed apart and enter no other table.
"""

from __future__ import annotations

import json

import pandas as pd

from washexp import __version__
from washexp.compaction.runs import metric, study_runs, value
from washexp.export import bootstrap, plots
from washexp.export.records import Column, Plot, Record, Table, show
from washexp.tokens import TOKENIZER

COHORTS = ("primary", "control")
OVER_WINDOW = "OverWindow:"
"""How the error tag of a condition refused for its length starts (``washexp.models.base.OverWindow``)."""
REFERENCE_HEADLINE = (
    "Offline reference backend: a labelled deterministic baseline (extractive S and H, BM25 Jev "
    "ranking, no reader), not a model result. Its retention says which facts survive compaction "
    "mechanically; no fact was answered or graded."
)


def build(runs: pd.DataFrame, options) -> list[Record]:
    study = study_runs(runs, model=options.model, sweeps=options.sweeps, until=options.date)
    records = []
    for _, arms in study.arms.groupby("model", sort=True):
        conds = study.conditions[study.conditions["arm_run_id"].isin(arms["run_id"])]
        records.append(_record(arms, conds, study.notes, options.experiment))
    return records


def _record(arms: pd.DataFrame, conds: pd.DataFrame, left_out: tuple[str, ...], experiment: str) -> Record:
    final = arms[arms["phase"] == "final"]
    pre = arms[arms["phase"] != "final"]
    fconds = conds[conds["arm_run_id"].isin(final["run_id"])]
    first = arms.iloc[0]
    model, platform = first["model"], first["params.platform"]
    reference = first["params.backend"] == "reference"
    measured = bool(metric(fconds, "fact_accuracy").notna().any())
    score = "fact_accuracy" if measured else "retention"
    score_name = "fact accuracy" if measured else "retention"
    not_measured = "n/a — reference model has no reader" if reference else "n/a — not measured"
    cohort_of = dict(zip(fconds["task"], fconds["cohort"], strict=True))
    n_tasks = {c: sum(v == c for v in cohort_of.values()) for c in COHORTS}

    times = pd.concat([arms["end_time"], conds["end_time"], arms["start_time"]]).dropna()
    date = times.max().tz_convert("UTC").strftime("%Y-%m-%d")
    per_task = _per_task_scores(fconds, score)
    has_full = "Full" in set(final["label"])

    notes = [
        REFERENCE_HEADLINE
        if reference
        else f"Model {model} (tier {first['params.tier']}, platform {platform}): fact accuracy from "
        f"its reader's answers, graded by strict type-exact JSON equality."
    ]
    notes.append(
        "Tasks weigh equally within a cohort; primary and control cohorts are reported "
        "separately; a failed condition counts as 0 and stays in the denominator."
    )
    notes.append(
        f"n is small: {n_tasks['primary']} primary and {n_tasks['control']} control tasks. "
        f"Intervals are 95% paired bootstrap intervals over tasks ({bootstrap.RESAMPLES:,} "
        f"resamples, seed {bootstrap.SEED}); with this few tasks they are coarse and likely "
        "too narrow. Read them as rough ranges, not as tests."
    )
    if not measured:
        notes.append(f"Fact accuracy and all-fields-correct: {not_measured} (never counted as 0).")
    if not has_full:
        notes.append("No Full arm among the covered runs: comparisons with Full are left out.")
    if len(pre):
        notes.append(f"{len(pre)} preflight-phase arm run(s) are listed apart and enter no other table.")
    over = _over_window(fconds)
    if over.any():
        notes.append(
            f"{int(over.sum())} of {len(fconds)} conditions are over the model's window: the endpoint refused "
            "a context longer than its window (its message is the run's error). They score 0 and stay in "
            "the denominator, counted apart from other failures (OVER WINDOW in the per-task tables)."
        )
    notes += _task_set_notes(fconds)
    notes += list(left_out)

    over_by = fconds[over].groupby(["label", "cohort"]).size().to_dict()
    tables = [_arm_table(final, c, "n/a", over_by) for c in COHORTS if n_tasks[c]]  # the notes say why
    tables.append(_per_task_table(fconds, final, "retention", "Retention per task", over))
    if measured:
        tables.append(_per_task_table(fconds, final, "fact_accuracy", "Fact accuracy per task", over))
    tables.append(_per_task_table(fconds, final, "input_tokens", "Mean input tokens per task", over))
    tables += _interval_tables(per_task, cohort_of, final, score_name)
    tables.append(_preflight_table(pre))

    stem = f"compaction-{platform}-{date}"
    record_plots = _plots(final, score, score_name, stem, n_tasks)
    provenance = {
        "date": f"{date} (UTC date of the newest covered run)",
        "experiment": experiment,
        "washexp version (exporter)": __version__,
        "git commit of the runs": _unique(arms, "tags.mlflow.source.git.commit"),
        "source sha256 of the runs": _unique(arms, "tags.washexp.source"),
        "model": model,
        "tier": first["params.tier"],
        "platform": platform,
        "backend": first["params.backend"],
        "roles": json.loads(first["params.roles"]),
        "generations per task": int(first["params.generations"]),
        "answers per context": int(first["params.answers_per_context"]),
        "tokenizer": TOKENIZER,
        "fixtures sha256 (task folder tree digest)": _fixtures(conds),
        "sweeps (overrides)": _sweeps(arms),
    }
    return Record(
        topic="compaction",
        platform=platform,
        date=date,
        title=f"Compaction study: {model} ({platform}), {date}",
        provenance=provenance,
        notes=tuple(notes),
        tables=tuple(tables),
        plots=record_plots,
        appendix=(_runs_table(arms, conds),),
        arm_runs=tuple(final["run_id"]),
    )


def _over_window(conds: pd.DataFrame) -> pd.Series:
    """Which failed conditions the endpoint refused as longer than the model's window."""
    error = conds.get("tags.washexp.error", pd.Series(None, index=conds.index, dtype=object))
    return (conds["status"] == "FAILED") & error.fillna("").astype(str).str.startswith(OVER_WINDOW)


def _per_task_scores(conds: pd.DataFrame, key: str) -> dict[str, dict[str, float]]:
    """arm label -> task -> score, a failed condition as 0."""
    out: dict[str, dict[str, float]] = {}
    for _, row in conds.iterrows():
        v = value(row, key)
        out.setdefault(row["label"], {})[row["task"]] = 0.0 if row["status"] == "FAILED" or v is None else v
    return out


def _arm_table(final: pd.DataFrame, cohort: str, not_measured: str, over_by: dict | None = None) -> Table:
    rows = []
    for _, arm in final.iterrows():
        if value(arm, f"{cohort}/tasks") is None:
            continue
        m = {
            k: value(arm, f"{cohort}/{k}")
            for k in (
                "tasks",
                "fact_accuracy",
                "all_fields_correct",
                "retention",
                "retention_all_fields",
                "input_tokens",
                "input_tokens_total",
                "reduction_pct",
                "contexts",
                "contexts_shortened",
                "invalid",
                "failed",
            )
        }
        over = (over_by or {}).get((arm["label"], cohort), 0)
        rows.append({"arm": arm["label"], **m, "over_window": over, "run_id": arm["run_id"]})

    def na(key):
        return lambda r: not_measured if r[key] is None else show(r[key])

    columns = (
        Column("arm", "arm"),
        Column("tasks", "tasks", lambda r: f"{r['tasks']:.0f}"),
        Column("fact_accuracy", "fact accuracy", na("fact_accuracy")),
        Column("all_fields_correct", "all fields correct", na("all_fields_correct")),
        Column("retention", "retention"),
        Column("retention_all_fields", "all fields retained"),
        Column("input_tokens", "mean input tokens", lambda r: _num(r["input_tokens"], 1)),
        Column("input_tokens_total", "total input tokens", lambda r: _num(r["input_tokens_total"], 0)),
        Column("reduction_pct", "reduction vs Full", lambda r: _pct(r["reduction_pct"])),
        Column(
            "contexts_shortened",
            "contexts shortened vs Full",
            lambda r: f"{r['contexts_shortened'] or 0:.0f}/{r['contexts'] or 0:.0f}",
        ),
        Column("invalid", "invalid", lambda r: _num(r["invalid"], 0)),
        Column("failed", "failed", lambda r: _num(r["failed"], 0)),
        *((Column("over_window", "of which over the window", lambda r: str(r["over_window"])),) if over_by else ()),
        Column("run_id", "arm run"),
    )
    return Table(
        f"arms_{cohort}",
        f"Arms, {cohort} cohort",
        columns,
        tuple(rows),
        note="Means over tasks (equal weights). Reduction: mean per-task cut in input tokens "
        "against the task's Full context. Shortened: contexts smaller than Full.",
    )


def _per_task_table(
    conds: pd.DataFrame, final: pd.DataFrame, key: str, title: str, over: pd.Series | None = None
) -> Table:
    labels = list(final.sort_values("order", kind="stable")["label"].drop_duplicates())
    rows = []
    order = sorted(conds.groupby(["cohort", "task"]), key=lambda kv: (COHORTS.index(kv[0][0]), kv[0][1]))
    for (cohort, task), group in order:
        row = {"task": task, "cohort": cohort}
        failed, too_long = [], []
        for i, c in group.iterrows():
            row[c["label"]] = value(c, key)
            if c["status"] == "FAILED":
                (too_long if over is not None and over[i] else failed).append(c["label"])
        rows.append({**row, "failed": failed, "over_window": too_long})
    digits = 1 if key == "input_tokens" else 3
    columns = (
        Column("task", "task"),
        Column("cohort", "cohort"),
        *(Column(label, label, lambda r, lb=label: _cell(r, lb, digits)) for label in labels),
    )
    return Table(f"per_task_{key}", title, columns, tuple(rows))


def _cell(row: dict, label: str, digits: int) -> str:
    if label in row["over_window"]:
        return "OVER WINDOW"
    return "FAILED" if label in row["failed"] else _num(row.get(label), digits)


def _interval_tables(
    per_task: dict[str, dict[str, float]], cohort_of: dict[str, str], final: pd.DataFrame, score_name: str
) -> list[Table]:
    arms = final.sort_values("order", kind="stable")
    full = arms[arms["method"] == "full"]["label"].tolist()
    pairs = [(lb, full[0]) for lb in arms[arms["method"] != "full"]["label"]] if full else []
    label = {
        (m, int(n)): lb for m, n, lb in zip(arms["method"], arms["topn"], arms["label"], strict=True) if m != "full"
    }
    pairs_sh = [(label["S", n], label["H", n]) for (m, n) in sorted(label) if m == "S" and ("H", n) in label]
    out = []
    for key, title, todo in (
        ("vs_full", f"Each arm against Full ({score_name})", pairs),
        ("s_vs_h", f"S against H at each N ({score_name})", pairs_sh),
    ):
        rows = []
        for cohort in COHORTS:
            for a, b in todo:
                ia = {t: v for t, v in per_task.get(a, {}).items() if cohort_of.get(t) == cohort}
                iv = bootstrap.paired(ia, per_task.get(b, {}))
                if iv:
                    rows.append(
                        {
                            "cohort": cohort,
                            "a": a,
                            "b": b,
                            "n_tasks": iv.n,
                            "mean_a": iv.mean_a,
                            "mean_b": iv.mean_b,
                            "diff": iv.diff,
                            "ci_low": iv.low,
                            "ci_high": iv.high,
                        }
                    )
        columns = (
            Column("cohort", "cohort"),
            Column("a", "A"),
            Column("b", "B"),
            Column("n_tasks", "n tasks"),
            Column("mean_a", "mean A"),
            Column("mean_b", "mean B"),
            Column("diff", "A − B", lambda r: f"{r['diff']:+.3f}"),
            Column("ci_low", "95% interval", lambda r: f"[{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]"),
        )
        out.append(
            Table(
                key,
                title,
                columns,
                tuple(rows),
                note="Paired over the tasks both arms ran; n is small, so the interval is rough.",
            )
        )
    return out


def _preflight_table(pre: pd.DataFrame) -> Table:
    rows = [
        {
            "arm": a["label"],
            "run_id": a["run_id"],
            "sweep": a["sweep"],
            **{
                f"{c}/{k}": value(a, f"{c}/{k}")
                for c in COHORTS
                for k in ("tasks", "retention", "fact_accuracy", "failed")
            },
        }
        for _, a in pre.iterrows()
    ]
    columns = (
        Column("arm", "arm"),
        Column("run_id", "arm run"),
        Column("sweep", "sweep"),
        *(
            Column(f"{c}/{k}", f"{c} {k.replace('_', ' ')}")
            for c in COHORTS
            for k in ("tasks", "retention", "fact_accuracy", "failed")
        ),
    )
    return Table(
        "preflight",
        "Preflight runs (phase=preflight, not in the tables above)",
        columns,
        tuple(rows),
        note="Format preflights: kept for the record, never counted in final metrics. "
        "Their answers are in each condition run's answers/ and grades.json.",
    )


def _runs_table(arms: pd.DataFrame, conds: pd.DataFrame) -> Table:
    rows = [
        {"arm": a["label"], "phase": a["phase"], "task": "(arm)", "status": a["status"], "run_id": a["run_id"]}
        for _, a in arms.iterrows()
    ]
    phase = dict(zip(arms["run_id"], arms["phase"], strict=True))
    rows += [
        {
            "arm": c["label"],
            "phase": phase[c["arm_run_id"]],
            "task": c["task"],
            "status": c["status"],
            "run_id": c["run_id"],
        }
        for _, c in conds.sort_values("order", kind="stable").iterrows()
    ]
    columns = tuple(Column(k, k) for k in ("arm", "phase", "task", "status", "run_id"))
    return Table("runs", f"MLflow run ids behind every number ({len(rows)} runs)", columns, tuple(rows))


def _plots(final: pd.DataFrame, score: str, score_name: str, stem: str, n_tasks) -> tuple[Plot, ...]:
    cohorts = [c for c in COHORTS if n_tasks[c]]
    if final.empty or not cohorts:
        return ()
    by_cohort, full, points = {}, {}, {}
    for c in cohorts:
        series = {"S": [], "H": []}
        points[c] = []
        for _, a in final.iterrows():
            v, tokens = value(a, f"{c}/{score}"), value(a, f"{c}/input_tokens")
            if v is None:
                continue
            if a["method"] in series:
                series[a["method"]].append((int(a["topn"]), v))
            if a["label"] == "Full":
                full[c] = v
            if tokens is not None:
                points[c].append((a["label"], tokens, v))
        by_cohort[c] = {m: sorted(p) for m, p in series.items()}
    return (
        Plot(
            f"{stem}-{score}-vs-n.png",
            f"{score_name} against Top N, S and H; Full as a dashed line",
            plots.score_vs_n(by_cohort, full, score_name),
        ),
        Plot(
            f"{stem}-tokens-vs-{score}.png",
            f"mean input tokens against {score_name}, one point per arm",
            plots.tokens_vs_score(points, score_name),
        ),
    )


def _task_set_notes(conds: pd.DataFrame) -> list[str]:
    everyone = frozenset(conds["task"])
    notes = []
    for (_, label), group in conds.groupby(["order", "label"], sort=True):
        missing = sorted(everyone - frozenset(group["task"]))
        if missing:
            notes.append(f"{label} lacks tasks {', '.join(missing)}: paired comparisons use the tasks both arms ran.")
    return notes


def _unique(frame: pd.DataFrame, col: str) -> list[str]:
    return sorted({str(v) for v in frame[col].dropna()}) if col in frame.columns else []


def _fixtures(conds: pd.DataFrame) -> dict[str, str]:
    out = {}
    for task, group in conds.groupby("task", sort=True):
        digests = _unique(group, "fixture_sha256")  # absent when every run of the task failed
        out[task] = ", ".join(digests) or "n/a (no finished run)"
        out[task] += " (differs between runs!)" if len(digests) > 1 else ""
    return out


def _sweeps(arms: pd.DataFrame) -> dict[str, str]:
    out = {}
    for sweep, group in arms.groupby("sweep", sort=True):
        out[sweep] = "; ".join(sorted(set(group["overrides"])))
    return out


def _num(v: float | None, digits: int) -> str:
    return "n/a" if v is None else f"{v:,.{digits}f}"


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f}%"
