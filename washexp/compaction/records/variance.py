"""The compaction record's variance: the nested scores its hierarchical intervals resample, and
the between-repeat spread of ``model.repeats``.

Nested scores (``bootstrap.Nested``, per arm label): task -> generations -> answer scores, read
from each finished condition's own tables: ``retention.json`` (one row per generation and field:
a generation's retention is one score) and, for fact accuracy, ``grades.json`` (one row per answer
and field: an answer's score is the share of its fields right; a repeat's answers are more answers
of the same generation). A generation with no context (invalid or failed) scores one 0, a failed
condition one 0 for the task, as the study counts them. Each task's nested mean must be the score
its run logged: a mismatch is an error, never an interval over other numbers.
"""

from __future__ import annotations

import math

import pandas as pd

from washexp.compaction.records.runs import score, value
from washexp.errors import WashexpError
from washexp.export import bootstrap
from washexp.export.records import Column, Table
from washexp.tracking.reader import load_table

COHORTS = ("primary", "control")


def nested_scores(conds: pd.DataFrame, uri: str, key: str) -> dict[str, bootstrap.Nested]:
    """arm label -> task -> generations -> answer scores, for ``key`` (``retention`` or ``fact_accuracy``)."""
    out: dict[str, bootstrap.Nested] = {}
    finished = conds[conds["status"] == "FINISHED"]
    gens = _generations(load_table(uri, "retention.json", list(finished["run_id"]))) if len(finished) else {}
    answers = _answers(load_table(uri, "grades.json", list(finished["run_id"]))) if key == "fact_accuracy" else {}
    for _, c in conds.iterrows():
        logged = score(c, key)
        if c["status"] == "FAILED":
            nested = [[0.0]]
        else:
            run = c["run_id"]
            if run not in gens:
                raise WashexpError(f"run {run}: retention.json has no generation rows")
            if key == "retention":
                nested = [[r] for _, r in sorted(gens[run].items())]
            else:
                nested = [answers.get((run, g), [0.0]) for g in sorted(gens[run])]
        if logged is not None and not math.isclose(bootstrap.nested_mean(nested), logged, abs_tol=1e-9):
            raise WashexpError(
                f"run {c['run_id']} ({c['label']} · {c['task']}): its tables give {key} "
                f"{bootstrap.nested_mean(nested):.6f}, its metric {logged:.6f}"
            )
        if logged is not None:
            out.setdefault(c["label"], {})[c["task"]] = nested
    return out


def nested_rows(conds: pd.DataFrame, uri: str, key: str) -> list[dict]:
    """The nested scores as the record's machine table (``data.compaction_nested``): per arm and
    task its generations' answer scores, what ``washexp power`` splits into variance components."""
    cohort = dict(zip(conds["task"], conds["cohort"], strict=False))
    return [
        {"arm": arm, "cohort": cohort[task], "task": task, "metric": key, "scores": nested}
        for arm, tasks in nested_scores(conds, uri, key).items()
        for task, nested in sorted(tasks.items())
    ]


def _generations(table: pd.DataFrame) -> dict[str, dict[int, float]]:
    """run -> generation -> retention (the share of fields retained; 0 without a context)."""
    if table.empty:
        return {}
    kept = table.assign(retained=table["retained"].astype(float))
    grouped = kept.groupby(["run_id", "generation"])["retained"].mean()
    out: dict[str, dict[int, float]] = {}
    for key, r in grouped.items():
        assert isinstance(key, tuple)  # grouped by two columns
        run, g = key
        out.setdefault(str(run), {})[int(g)] = float(r)
    return out


def _answers(table: pd.DataFrame) -> dict[tuple[str, int], list[float]]:
    """(run, generation) -> each answer's score (the share of its fields right), repeats pooled."""
    if table.empty:
        return {}
    by = ["run_id", "generation", *(["repeat"] if "repeat" in table.columns else []), "answer"]
    graded = table.assign(correct=table["correct"].astype(float))
    if "repeat" in graded.columns:
        graded = graded.assign(repeat=graded["repeat"].fillna(0))
    scores = graded.groupby(by, sort=True)["correct"].mean()
    out: dict[tuple[str, int], list[float]] = {}
    for idx, s in scores.items():
        assert isinstance(idx, tuple)  # grouped by three or four columns
        out.setdefault((str(idx[0]), int(idx[1])), []).append(float(s))
    return out


def repeats_table(final: pd.DataFrame) -> Table | None:
    """Per arm and cohort: each repeat's fact accuracy and the spread between them (``model.repeats``
    > 1); None when no covered arm repeated its answering step."""
    cols = [c for c in final.columns if str(c).startswith("metrics.") and "/fact_accuracy/r" in str(c)]
    if not cols:
        return None
    n = 1 + max(int(str(c).rsplit("/r", 1)[1]) for c in cols)
    rows = []
    for _, arm in final.sort_values("order", kind="stable").iterrows():
        for c in COHORTS:
            spread = value(arm, f"{c}/fact_accuracy_repeat_spread")
            if spread is None:
                continue
            per = [value(arm, f"{c}/fact_accuracy/r{k}") for k in range(n)]
            rows.append(
                {
                    "arm": arm["label"],
                    "cohort": c,
                    "repeats": sum(p is not None for p in per),
                    **{f"r{k}": p for k, p in enumerate(per)},
                    "mean": value(arm, f"{c}/fact_accuracy"),
                    "spread": spread,
                    "sd": value(arm, f"{c}/fact_accuracy_repeat_sd"),
                    "task_spread": value(arm, f"{c}/fact_accuracy_task_repeat_spread"),
                }
            )
    columns = (
        Column("arm", "arm"),
        Column("cohort", "cohort"),
        Column("repeats", "repeats"),
        *(Column(f"r{k}", f"repeat {k}") for k in range(n)),  # the default cell: show(row.get(key))
        Column("mean", "fact accuracy (all repeats)"),
        Column("spread", "spread (max − min)"),
        Column("sd", "SD between repeats"),
        Column("task_spread", "mean per-task spread"),
    )
    return Table(
        "repeats",
        "Between-repeat spread of fact accuracy (model.repeats)",
        columns,
        tuple(rows),
        note="Each repeat reruns the answering step at the configured temperature, its calls recorded apart "
        "(never one replayed as another). Repeat k: the arm's fact accuracy from that repeat's answers alone; "
        "spread and SD (population) are between the repeats' means; the per-task spread is each task's own "
        "max − min, averaged over tasks. The intervals pool a repeat's answers as answers of their generation.",
    )
