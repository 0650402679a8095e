"""Hierarchical averaging, as the study specifies.

Fields within an answer, answers within a generation, generations within a task, then tasks
equally. Cohorts (primary, control) are reported separately. A failed planned condition stays
in the denominator as 0: callers pass 0.0 for it, never drop it. An empty denominator is
``None`` (reported as n/a), never 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return sum(values) / len(values) if values else None


def task_score(generations: Sequence[Sequence[float]]) -> float | None:
    """Per-answer scores grouped by generation -> the task's score."""
    return mean(m for m in (mean(answers) for answers in generations) if m is not None)


def cohort_means(task_scores: dict[str, float], cohorts: dict[str, str]) -> dict[str, float | None]:
    """Task scores -> the mean per cohort and over all tasks, every task weighted equally."""
    out = {c: mean(s for t, s in task_scores.items() if cohorts[t] == c) for c in ("primary", "control")}
    out["all"] = mean(task_scores.values())
    return out


# Per-condition metrics an arm aggregates task by task (equal weights, failed = 0).
_SCORES = ("retention", "retention_all_fields", "fact_accuracy", "all_fields_correct")
_SUMS = ("contexts", "contexts_shortened", "contexts_valid", "input_tokens_total")
_SUMS_IF_MEASURED = (
    "answers_graded",
    "format_failures",
    "contexts_failed",
    "contexts_failed_s",
    "contexts_failed_jev",
    "contexts_failed_h",
    "api_input_tokens_total",
    "h_full_check_endpoint",
    "h_full_check_local",
    "h_full_check_gguf",
    "invalid_provenance",
    "invalid_over_allowance",
    "invalid_empty",
    "invalid_over_ceiling",
    "invalid_not_shorter",
)


REPEAT = "fact_accuracy/r"
"""``model.repeats`` > 1: each repeat's fact accuracy, ``fact_accuracy/r<k>``."""


def _repeat_spread(out: dict, per_task: dict, cohorts: dict[str, str], repeats: list[str]) -> None:
    """Between-repeat spread of an arm per cohort: max - min and the population SD of the repeats'
    cohort means, and the mean over tasks of each task's own spread."""
    for cohort in ("primary", "control", "all"):
        found = [out.get(f"{cohort}/{k}") for k in repeats]
        means = [x for x in found if x is not None]
        if len(means) < len(found):
            continue
        m = sum(means) / len(means)
        out[f"{cohort}/fact_accuracy_repeat_spread"] = max(means) - min(means)
        out[f"{cohort}/fact_accuracy_repeat_sd"] = (sum((x - m) ** 2 for x in means) / len(means)) ** 0.5
        within = [
            per_task[t].get("fact_accuracy_repeat_spread", 0.0) for t in per_task if cohort in ("all", cohorts[t])
        ]
        out[f"{cohort}/fact_accuracy_task_repeat_spread"] = sum(within) / len(within)


def arm_metrics(per_task: dict[str, dict[str, float]], cohorts: dict[str, str]) -> dict[str, float]:
    """Cohort aggregates of an arm: tasks weighted equally, a failed condition counted as 0
    (a failed condition's entry is ``{"failed": 1.0, "contexts": generations}``)."""
    out: dict[str, float] = {}
    # Conditions finish in any order under concurrency; float sums must not depend on it.
    per_task = dict(sorted(per_task.items()))
    measured = {k for m in per_task.values() for k in m}
    repeats = sorted((k for k in measured if k.startswith(REPEAT)), key=lambda k: int(k[len(REPEAT) :]))
    for key in (*_SCORES, *repeats):
        if key not in measured:
            continue  # e.g. no reader: accuracy is absent, never 0
        scores = {t: m.get(key, 0.0) for t, m in per_task.items()}
        for cohort, value in cohort_means(scores, cohorts).items():
            if value is not None:
                out[f"{cohort}/{key}"] = value
    if repeats:
        _repeat_spread(out, per_task, cohorts, repeats)
    for cohort in ("primary", "control", "all"):
        members = [m for t, m in per_task.items() if cohort in ("all", cohorts[t])]
        if not members:
            continue
        for key in _SUMS:
            out[f"{cohort}/{key}"] = sum(m.get(key, 0.0) for m in members)
        for key in _SUMS_IF_MEASURED:
            if key in measured:
                out[f"{cohort}/{key}"] = sum(m.get(key, 0.0) for m in members)
        out[f"{cohort}/tasks"] = float(len(members))
        out[f"{cohort}/failed"] = float(sum(m.get("failed", 0.0) for m in members))
        # Invalid: H's validity rules; a context whose role reply failed is counted apart.
        out[f"{cohort}/invalid"] = sum(
            m["contexts"] - m["contexts_valid"] - m.get("contexts_failed", 0.0) for m in members if "failed" not in m
        )
        for key in ("input_tokens", "reduction_pct", "api_input_tokens"):  # means over tasks with contexts
            values = [m[key] for m in members if key in m]
            if values:
                out[f"{cohort}/{key}"] = sum(values) / len(values)
    return out
