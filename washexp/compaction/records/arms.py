"""The compaction record: arms by cohort, tasks by arm, decisions (paired tests over tasks), plots, run ids.

Arm rows are the arm runs' own cohort metrics (``primary/retention``...); per-task cells and the
decisions read the condition runs (through the record's own ``data.compaction_tasks``). A failed
condition counts 0 and stays in, as in the study's aggregation; an unmeasured value is ``n/a``,
never 0. A condition that failed because a context was longer than the model's window (the
endpoint's own refusal) is such a 0 too, but counted apart and shown as ``OVER WINDOW``: a property
of the model, not a broken run. Preflight-phase runs are listed apart and enter no other table."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd

from washexp import measurements
from washexp.compaction.records import closed as record_closed
from washexp.compaction.records import decisions as record_decisions
from washexp.compaction.records import loss as record_loss
from washexp.compaction.records import notes as record_notes
from washexp.compaction.records import tables as record_tables
from washexp.compaction.records import variance as record_variance
from washexp.compaction.records.budgets import budget_tables
from washexp.compaction.records.data import compare_data
from washexp.compaction.records.planted import planted_tables
from washexp.compaction.records.runs import metric, provenance_head, study_runs, unique, value
from washexp.export import decide, plots, selection
from washexp.export.records import Column, Plot, Record, Table
from washexp.export.run_facts import run_facts
from washexp.export.spend import role_spend
from washexp.models.base import OverWindow
from washexp.tokens import TOKENIZER
from washexp.tracking.kinds import ArmRun, Kind

COHORTS = ("primary", "control")
OVER_WINDOW = OverWindow.__name__
"""The error type of a condition the endpoint refused for its length."""
REFERENCE_HEADLINE = (
    "Offline reference backend: a labelled deterministic baseline (extractive S and H, BM25 Jev "
    "ranking, no reader), not a model result. Its retention says which facts survive compaction "
    "mechanically; no fact was answered or graded."
)


def build(runs: pd.DataFrame, options) -> list[Record]:
    """Each compaction measurement's records, in the registry's order (:mod:`washexp.measurements`:
    the study's per model, then the cycles records where ``measurement=cycles`` runs exist); runs of
    none of them is the study's own "no arm runs match"."""
    records: list[Record] = []
    for name in measurements.names("compaction"):
        builder = measurements.get(name).record
        records += measurements.use(builder)(runs, options) if builder is not None else []
    return records or _study(runs, options)


def study_records(runs: pd.DataFrame, options) -> list[Record]:
    """The study's record per model (``measurement=single``), none without an arm run."""
    arms = selection.parents(runs, Kind.ARM, model=options.model, sweeps=options.sweeps, until=options.date)
    return [] if arms.empty else _study(runs, options)


def _study(runs: pd.DataFrame, options) -> list[Record]:
    study = study_runs(runs, model=options.model, sweeps=options.sweeps, until=options.date)
    records = []
    for model, arms in study.arms.groupby("model", sort=True):
        conds = study.conditions[study.conditions["arm_run_id"].isin(arms["run_id"])]
        final = arms[arms["phase"] == "final"]
        data = compare_data(final, conds, options.uri)
        metric = _headline(data["compaction_tasks"])
        means = record_decisions.arm_means(data["compaction_tasks"], metric)  # the plots' bars: the headline's
        record = _record(arms, conds, tuple(study.notes.get(model, ())), options.experiment, options.uri, means)
        record = _with_closed_book(record, final, conds, options.uri)
        fconds = conds[conds["arm_run_id"].isin(final["run_id"])]
        data["compaction_nested"] = record_variance.nested_rows(fconds, options.uri, metric)
        records.append(_with_decisions(record, data, metric))
    return records


def _headline(rows: list[dict]) -> str:
    return "fact_accuracy" if "fact_accuracy" in record_decisions.metrics_of(rows) else "retention"


def _with_decisions(record: Record, data: dict[str, list], metric: str) -> Record:
    """The decisions, then the headline, first of the record's tables: both read from its own
    per-task values (``data.compaction_tasks``), so anyone can recompute them from the JSON."""
    rows = data["compaction_tasks"]
    first = (record_decisions.decisions_table(rows), record_decisions.headline_table(rows, metric))
    return dataclasses.replace(record, tables=(*first, *record.tables), data=data)


def _record(
    arms: pd.DataFrame, conds: pd.DataFrame, left_out: tuple[str, ...], experiment: str, uri: str, means: list[dict]
) -> Record:
    """``means``: the headline's rows (``records.decisions.arm_means``), whose intervals the plots draw."""
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
    has_full = "Full" in set(final["label"])

    notes = [
        REFERENCE_HEADLINE
        if reference
        else f"Model {model} (tier {first['params.tier']}, platform {platform}): fact accuracy from "
        f"its reader's answers, graded by strict type-exact JSON equality."
    ]
    if first["params.backend"] == "local":
        notes.append(
            f"A small model served on this machine ({model}, {first['params.tier']}): the record shows that the "
            "harness measures a real model end to end (real summaries, rankings and answers, graded as the study "
            "grades them); it says nothing about how a larger model would score."
        )
    notes.append(
        "Tasks weigh equally within a cohort; primary and control cohorts are reported "
        "separately; a failed condition counts as 0 and stays in the denominator."
    )
    notes.append(
        f"n is small: {n_tasks['primary']} primary and {n_tasks['control']} control tasks. The decisions table "
        f"tests every declared comparison with the {decide.describe()}; with 4 tasks no p is below 0.125, so no "
        "comparison on 4 tasks can be decided at 0.05, and its verdict says how many tasks would decide it."
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
    notes += record_notes.task_set_notes(fconds)
    notes += list(left_out)
    planned = int(first["params.generations"])
    generations = record_tables.generations_table(
        fconds, planned, "Distinct: different values among the generations that produced one (H: accepted or not)."
    )
    notes += record_notes.generation_notes(generations.rows, planned)
    notes += record_notes.count_notes(final, measured)
    notes += record_notes.method_notes(arms, reference)

    api = record_tables.api_by_arm(fconds)
    over_by = fconds[over].groupby(["label", "cohort"]).size().to_dict()
    cost = record_tables.cost_by_arm(fconds)
    arm_tables = [record_tables.arm_table(final, c, api, "n/a", over_by, cost) for c in COHORTS if n_tasks[c]]
    tables = list(arm_tables)

    def task_table(key: str, title: str, digits: int = 3) -> Table:
        return record_tables.per_task_table(fconds, final, key, title, digits, over)

    cells = record_loss.arm_cells(final, fconds, uri)
    tables.append(record_loss.loss_table(cells))
    tables.append(task_table("retention", "Retention per task"))
    if measured:
        tables.append(task_table("fact_accuracy", "Fact accuracy per task"))
        tables.append(task_table("api_input_tokens", "Mean API input tokens per task", 1))
    tables.append(task_table("input_tokens", "Mean input tokens per task (local Qwen)", 1))
    tables.append(task_table("units_kept", "Units kept per task (mean)", 1))
    tables.append(generations)
    tables.append(record_tables.invalid_table(fconds))
    tables.append(record_tables.failed_contexts_table(fconds))
    tables += budget_tables(arm_tables, dict(zip(final["label"], final["method"], strict=True)), measured)
    tables += planted_tables(fconds, uri, measured)
    repeats = record_variance.repeats_table(final)
    if repeats is not None:
        tables.append(repeats)
    tables.append(_preflight_table(pre))
    if (spent := role_spend(arms, conds, uri)) is not None:  # runs since calls were counted per role (issue 49)
        tables.append(spent)

    stem = f"compaction-{platform}-{date}"
    bars = _bars(final, [m for m in means if m["metric"] == score])
    record_plots = _plots(final, score, score_name, stem, n_tasks, bars) + _loss_plot(cells, stem)
    provenance = {
        **provenance_head(arms, date, experiment),
        "roles": _roles(arms),
        "generations per task (planned; distinct counts in the generations table)": int(first["params.generations"]),
        "H implementation": unique(arms[arms["method"] == "H"], "params.h_label"),
        "answers per context": int(first["params.answers_per_context"]),
        "tokenizer": TOKENIZER,
        "fixtures sha256 (task folder tree digest)": _fixtures(conds),
        **({"task set manifest sha256": sets} if (sets := unique(arms, "params.taskset")) else {}),
        "sweeps (overrides)": selection.sweeps(arms["sweep"], arms["overrides"]),
        **run_facts(arms),
    }
    plugins = unique(arms, "params.plugin")
    if plugins:  # what each plugin arm was built from: target, args, package, version, source
        provenance["plugin methods (spec)"] = [json.loads(p) for p in plugins]
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
    )


def _with_closed_book(record: Record, final: pd.DataFrame, conds: pd.DataFrame, uri: str) -> Record:
    """The closed-book arm's note (its fact accuracy beside Full's) and per-field table, after the arms."""
    measured = bool(metric(conds, "fact_accuracy").notna().any())
    notes, table = record_closed.closed_book(final, conds[conds["arm_run_id"].isin(final["run_id"])], uri, measured)
    if not notes:
        return record
    tables = list(record.tables)
    if table is not None:
        at = next(i for i, t in enumerate(tables) if not t.key.startswith("arms_"))
        tables.insert(at, table)
    return dataclasses.replace(record, notes=(*record.notes, *notes), tables=tuple(tables))


def _over_window(conds: pd.DataFrame) -> pd.Series:
    """Which failed conditions the endpoint refused as longer than the model's window."""
    error = conds.get("tags.washexp.error_type", pd.Series(None, index=conds.index, dtype=object))
    return (conds["status"] == "FAILED") & (error == OVER_WINDOW)


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


def _bars(final: pd.DataFrame, means: list[dict]) -> plots.Bars:
    """Each final arm's interval by cohort and (method, top-N), from the headline's rows."""
    key = {a["label"]: (a["method"], ArmRun.parse("topn", a["topn"])) for _, a in final.iterrows()}
    out: dict[str, dict[tuple[str, int | None], plots.Bar]] = {}
    for m in means:
        if m["ci_low"] is not None and m["arm"] in key:
            out.setdefault(m["cohort"], {})[key[m["arm"]]] = plots.Bar(m["ci_low"], m["ci_high"], m["n_tasks"])
    return out


def _plots(final: pd.DataFrame, score: str, score_name: str, stem: str, n_tasks, bars: plots.Bars) -> tuple[Plot, ...]:
    cohorts = [c for c in COHORTS if n_tasks[c]]
    if final.empty or not cohorts:
        return ()
    by_cohort: dict[str, dict[str, list[tuple[int, float]]]] = {}
    full: dict[str, float] = {}
    points: dict[str, list[tuple[str, int | None, float, float]]] = {}
    for c in cohorts:
        series: dict[str, list[tuple[int, float]]] = {
            m: [] for m in dict.fromkeys(["S", "H", *final["method"]]) if m not in ("full", "none")
        }
        points[c] = []
        for _, a in final.iterrows():
            v, tokens = value(a, f"{c}/{score}"), value(a, f"{c}/input_tokens")
            if v is None:
                continue
            n = ArmRun.parse("topn", a["topn"])
            if a["method"] in series and n is not None:  # only Full and the closed book have no N
                series[a["method"]].append((n, v))
            if a["method"] == "full":
                full[c] = v
            if tokens is not None:
                points[c].append((a["method"], ArmRun.parse("topn", a["topn"]), tokens, v))
        by_cohort[c] = {m: sorted(p) for m, p in series.items()}
    drawn = list(dict.fromkeys(m for c in cohorts for m, p in by_cohort[c].items() if p))  # its lines, by name
    against = f"{score_name} against Top N" + (f", {_listed(drawn)}" if drawn else "")
    return (
        Plot(
            f"{stem}-{score}-vs-n.png",
            against + ("; Full as a dashed line" if full else "") + _said(bars),
            plots.score_vs_n(
                by_cohort, full, score_name, f"{score_name.capitalize()} against Top N, by cohort", n_tasks, bars
            ),
        ),
        Plot(
            f"{stem}-tokens-vs-{score}.png",
            f"mean input tokens against {score_name}, one point per arm" + _said(bars),
            plots.tokens_vs_score(
                points, score_name, f"Input tokens against {score_name}, one point per arm", n_tasks, bars
            ),
        ),
    )


def _listed(names: list[str]) -> str:
    """``S``, ``S and H``, ``S, H and mask``."""
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def _said(bars: plots.Bars) -> str:
    """The caption's word on the bars (drawn where an arm has 2 tasks or more in a cohort)."""
    if not bars:
        return ""
    return (
        "; bars: each arm's 95% sign-flip interval over its tasks, as in the headline table (the whole range "
        "with 5 tasks or fewer)"
    )


def _loss_plot(cells: list[record_loss.ArmCells], stem: str) -> tuple[Plot, ...]:
    """Compaction loss against reading loss, one point per arm with a reader (none without one)."""
    points = record_loss.loss_points(cells)
    if not points:
        return ()
    return (
        Plot(
            f"{stem}-compaction-vs-reading-loss.png",
            "compaction loss (dropped and missed) against reading loss (kept but missed), one point per arm",
            plots.loss_scatter(points, "Where facts were lost: compaction loss against reading loss, by cohort"),
        ),
    )


def _roles(arms: pd.DataFrame) -> dict:
    """The backend's spec and every role any covered arm called (each arm logs only its own)."""
    out: dict = {}
    for text in sorted({str(v) for v in arms["params.roles"].dropna()}):
        spec = json.loads(text)
        out = {**out, **spec, "roles": {**out.get("roles", {}), **spec.get("roles", {})}}
    return out


def _fixtures(conds: pd.DataFrame) -> dict[str, str]:
    out: dict[str, str] = {}
    for task, group in conds.groupby("task", sort=True):
        digests = unique(group, "fixture_sha256")  # absent when every run of the task failed
        shown = ", ".join(digests) or "n/a (no finished run)"
        out[str(task)] = shown + (" (differs between runs!)" if len(digests) > 1 else "")
    return out
