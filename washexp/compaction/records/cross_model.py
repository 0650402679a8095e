"""The cross-model compaction record: arm x cohort x model side by side, and paired intervals
between models on the same tasks.

Each model's figures are its own record's (:func:`washexp.compaction.records.arms.build` with that
model): the arm tables' means (fact accuracy, retention, API input tokens) and the per-task scores
of its ``compaction_tasks`` data, where a failed condition counts 0. Cost is the sum of the
condition runs' ``cost_usd`` (money of live calls) over an arm and cohort, ``n/a`` when no run of
it logged one (no price configured, or runs made before cost was logged). Whatever arms the store
holds are shown (Full, S, H, a closed-book control...); an arm one model lacks is ``n/a`` for it
and named in the notes.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import pandas as pd

from washexp import __version__
from washexp.compaction.records import arms as per_model
from washexp.compaction.records import decisions as record_decisions
from washexp.compaction.records import variance as record_variance
from washexp.compaction.records.runs import metric, study_runs
from washexp.errors import WashexpError
from washexp.export import bootstrap, crossmodel, decide
from washexp.export.records import Column, Record, Table, show, through

COHORTS = per_model.COHORTS
FIGURES = (
    ("fact_accuracy", "fact accuracy"),
    ("retention", "retention"),
    ("api_input_tokens", "mean API input tokens"),
    ("cost_usd", "cost (USD)"),
)


def build(runs: pd.DataFrame, options) -> Record:
    models = options.models
    single = {}
    for model in models:
        study = study_runs(runs, model=model, sweeps=options.sweeps, until=options.date)
        crossmodel.one_identity(study.arms, model)
        (record,) = per_model.build(runs, dataclasses.replace(options, model=model, models=()))
        single[model] = (record, study, _nested(study, options.uri))
    return _record(models, single, options)


def _nested(study, uri: str) -> dict[tuple[str, str], bootstrap.Nested]:
    """(arm label, key) -> task -> generations -> answer scores, over the final arms' conditions
    (the hierarchy the intervals resample)."""
    final = study.arms[study.arms["phase"] == "final"]
    conds = study.conditions[study.conditions["arm_run_id"].isin(final["run_id"])]
    measured = bool(metric(conds, "fact_accuracy").notna().any())
    keys = ("fact_accuracy", "retention") if measured else ("retention",)
    return {
        (label, key): nested for key in keys for label, nested in record_variance.nested_scores(conds, uri, key).items()
    }


def _record(models: tuple[str, ...], single: dict, options) -> Record:
    first = {m: single[m][1].arms.iloc[0] for m in models}
    platforms = {m: str(first[m]["params.platform"]) for m in models}
    date = max(single[m][0].date for m in models)
    arm_order: dict[str, tuple] = {}
    for m in models:
        arms = single[m][1].arms
        for label, order in zip(arms["label"], arms["order"], strict=True):
            arm_order.setdefault(label, order)
    labels = sorted(arm_order, key=lambda lb: arm_order[lb])

    rows: list[dict[str, Any]] = []
    scores: dict[tuple[str, str, str, str], dict[str, float]] = {}
    for m in models:
        record, study, nested = single[m]
        by_key = {t.key: t for t in record.tables}
        cost = _cost(study)
        for cohort in COHORTS:
            for r in by_key.get(f"arms_{cohort}", Table("", "", (), ())).rows:
                rows.append(
                    {
                        "cohort": cohort,
                        "arm": r["arm"],
                        "model": m,
                        "tasks": r["tasks"],
                        "fact_accuracy": r["fact_accuracy"],
                        "retention": r["retention"],
                        "api_input_tokens": r["api_input_tokens"],
                        "api_input_tokens_total": r["api_input_tokens_total"],
                        "cost_usd": cost.get((r["arm"], cohort)),
                        "failed": r["failed"],
                        "run_id": r["run_id"],
                    }
                )
        for t in record.data["compaction_tasks"]:
            for key in ("fact_accuracy", "retention"):
                if t[key] is not None:
                    scores.setdefault((m, t["arm"], t["cohort"], key), {})[t["task"]] = nested[(t["arm"], key)][
                        t["task"]
                    ]
    position = {m: i for i, m in enumerate(models)}
    rows.sort(key=lambda r: (COHORTS.index(r["cohort"]), arm_order[r["arm"]], position[r["model"]]))
    measured = {m for m in models if any(r["model"] == m and r["fact_accuracy"] is not None for r in rows)}
    headline = "fact_accuracy" if measured else "retention"

    tables = [_decisions(models, scores, labels, measured), _models_table(models, first, single), _long_table(rows)]
    tables += [_wide_table(rows, models, labels, key, name) for key, name in FIGURES if _any(rows, key)]

    lacking = [
        f"{m} has no {lb} arm: its cells are n/a"
        for m in models
        for lb in labels
        if lb not in set(single[m][1].arms["label"])
    ]
    notes = [
        f"Models side by side: {', '.join(models)}. Each model's figures are those of its own record "
        f"(results/compaction-<platform>-<date>.md), built from the same runs; the headline is "
        f"{headline.replace('_', ' ')}.",
        "Models are compared in the decisions table, task by task over the tasks both ran (a failed condition "
        f"counts 0 and stays in): the {decide.describe()}.",
        "Cost: the money of the live calls its condition runs logged (cost_usd); n/a when no price was configured "
        "(a replayed call costs nothing).",
        *(
            []
            if len(measured) == len(models)
            else [f"No fact accuracy for {', '.join(sorted(set(models) - measured))} (no reader): n/a, never 0."]
        ),
        *lacking,
    ]
    small = [f"{m} ({first[m]['params.tier']})" for m in models if first[m]["params.backend"] == "local"]
    if small:
        notes.insert(
            0,
            f"Small-model record: {', '.join(small)} served on this machine. Its figures show that the harness "
            "measures a real model end to end (real summaries, rankings and answers, graded as the study grades "
            "them); they say nothing about how a larger model would score.",
        )
    for m in models:
        notes += [f"{m}: {n}" for n in single[m][0].notes if "left out" in n or "newer runs planned" in n]
    provenance = {
        "date": f"{date} (UTC date of the newest covered run)",
        "experiment": options.experiment,
        "washexp version (exporter)": __version__,
        crossmodel.MODELS: list(models),
        "records of each model (same runs)": {m: single[m][0].stem for m in models},
        "git commit of the runs": sorted({c for m in models for c in _prov(single, m, "git commit of the runs")}),
        "sweeps (overrides)": crossmodel.merge_sweeps([_prov(single, m, "sweeps (overrides)") for m in models]),
    }
    name = crossmodel.platform(models, platforms)
    return Record(
        topic="compaction",
        platform=name,
        date=date,
        title=f"Compaction study across models: {' vs '.join(models)}, {date}",
        provenance=provenance,
        notes=tuple(notes),
        tables=tuple(tables),
        data={"cross_model_arms": rows},
    )


def _cost(study) -> dict[tuple[str, str], float]:
    """(arm, cohort) -> the sum of its conditions' ``cost_usd``; absent when none logged one."""
    conds = _final_conditions(study)
    cost = metric(conds, "cost_usd")
    out: dict[tuple[str, str], float] = {}
    for (label, cohort), group in conds.assign(cost=cost).groupby(["label", "cohort"], sort=False):
        if group["cost"].notna().any():
            out[(str(label), str(cohort))] = float(group["cost"].fillna(0).sum())
    return out


def _final_conditions(study) -> pd.DataFrame:
    return study.conditions[study.conditions["arm_run_id"].isin(study.arms[study.arms["phase"] == "final"]["run_id"])]


def _prov(single: dict, model: str, key: str):
    return single[model][0].provenance[key]


def _any(rows: list[dict], key: str) -> bool:
    return any(r[key] is not None for r in rows)


def _models_table(models, first, single) -> Table:
    rows = []
    for m in models:
        study = single[m][1]
        final = _final_conditions(study)
        rows.append(
            {
                "model": m,
                "backend": first[m]["params.backend"],
                "tier": first[m]["params.tier"],
                "platform": first[m]["params.platform"],
                "arms": int((study.arms["phase"] == "final").sum()),
                "tasks": int(final["task"].nunique()),
                "conditions_failed": int((final["status"] == "FAILED").sum()),
                "record": single[m][0].stem,
            }
        )
    return Table(
        "models",
        "Models",
        tuple(Column(k, k.replace("_", " ")) for k in rows[0]),
        tuple(rows),
    )


def _long_table(rows: list[dict]) -> Table:
    def na(key):
        return lambda r: show(r[key])

    return Table(
        "arms_by_model",
        "Arm x cohort x model",
        (
            Column("cohort", "cohort"),
            Column("arm", "arm"),
            Column("model", "model"),
            Column("tasks", "tasks", lambda r: f"{r['tasks']:.0f}"),
            Column("fact_accuracy", "fact accuracy", na("fact_accuracy")),
            Column("retention", "retention"),
            Column("api_input_tokens", "mean API input tokens", lambda r: _num(r["api_input_tokens"], 1)),
            Column("cost_usd", "cost (USD)", lambda r: _usd(r["cost_usd"])),
            Column("failed", "failed conditions", lambda r: _num(r["failed"], 0)),
        ),
        tuple(rows),
        note="One row per arm, cohort and model, the models of an arm next to each other. Means over tasks "
        "(equal weights); a failed condition counts 0. n/a: not measured (never 0).",
    )


def _wide_table(rows: list[dict], models, labels, key: str, name: str) -> Table:
    cell = {(r["cohort"], r["arm"], r["model"]): r[key] for r in rows}
    out = []
    for cohort in COHORTS:
        for arm in labels:
            if any((cohort, arm, m) in cell for m in models):
                out.append({"cohort": cohort, "arm": arm, **{m: cell.get((cohort, arm, m)) for m in models}})
    fmt = _usd if key == "cost_usd" else (lambda v: _num(v, 1)) if key == "api_input_tokens" else show
    return Table(
        f"{key}_by_model",
        f"{name[0].upper()}{name[1:]}: the models side by side",
        (
            Column("cohort", "cohort"),
            Column("arm", "arm"),
            *(Column(m, m, through(m, fmt)) for m in models),
        ),
        tuple(out),
    )


def _decisions(models, scores, labels, measured) -> Table:
    """Each model against each, per metric, cohort and arm (one family per arm: its model pairs),
    by the paired sign-flip test over the tasks both ran (a task's value its hierarchical mean)."""
    found = []
    for key in ("fact_accuracy", "retention"):
        for cohort in COHORTS:
            for arm in labels:
                values = {
                    m: {t: bootstrap.nested_mean(g) for t, g in scores.get((m, arm, cohort, key), {}).items()}
                    for m in models
                    if key != "fact_accuracy" or m in measured
                }
                pairs = list(itertools.combinations([m for m in models if m in values], 2))
                where = {"analysis": "ITT", "family": f"model vs model, {arm}", "cohort": cohort, "metric": key}
                found += record_decisions.family_rows(values, pairs, decide.DELTA, **where)
    if not found:
        raise WashexpError(f"models {', '.join(models)} share no arm and task: nothing to put side by side")
    note = (
        record_decisions.NOTE + " Here A and B are two models in one arm (ITT only: each model's own record has both)."
    )
    return record_decisions.table(found, note=note)


def _num(v, digits: int) -> str:
    return "n/a" if v is None else f"{v:,.{digits}f}"


def _usd(v) -> str:
    return "n/a" if v is None else f"${v:,.4f}"
