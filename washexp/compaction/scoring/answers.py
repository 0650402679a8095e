"""The reader's answers to one condition's contexts, graded strictly and aggregated as the study does."""

from __future__ import annotations

from dataclasses import dataclass

from washexp.compaction.artifacts import to_json
from washexp.compaction.inputs.fixtures import Task
from washexp.compaction.scoring.aggregate import mean, task_score
from washexp.compaction.scoring.grading import AnswerGrade, grade

GRADES = "grades.json"
"""The table of every graded answer, field by field (:func:`grade_rows`)."""


@dataclass(frozen=True)
class Graded:
    metrics: dict[str, float | None]
    artifacts: dict[str, str]
    tables: dict[str, list[dict]]
    keys: list[str]
    """The recordings of the answers."""
    grades: dict[int, list[AnswerGrade]]
    """Generation -> its answers' grades, slot by slot (the fact ledger reads them)."""


def grade_answers(task: Task, gens, answers: int, where: dict, repeats: int = 1) -> Graded:
    """Wait for every answer of every generation, grade it; a context that is not there scores 0
    per answer. ``format_failures`` of ``answers_graded``: answers not in the asked shape (counted
    apart, scored as graded). ``api_input_tokens``: the endpoint's own input count of each answered context
    (``/g<N>`` per generation, the record compares them with Full's), mean and total.

    ``repeats`` > 1 (``model.repeats``): a generation's answers are ``answers`` per repeat, repeat
    by repeat; its score pools them all (the mean of the repeats' scores), each repeat's own score
    is ``fact_accuracy/r<k>``, and ``fact_accuracy_repeat_spread`` / ``_sd`` say how far the
    repeats differ (max - min, and the population standard deviation). At 1 nothing is added."""
    acc, correct, rows, keys, artifacts = [], [], [], [], {}
    by_gen: dict[int, list[AnswerGrade]] = {}
    graded = format_failures = 0
    api_tokens: dict[int, float] = {}
    per_repeat: list[list[list[float]]] = [[] for _ in range(repeats)]
    for gen in gens:
        if not gen.valid:
            acc.append([0.0] * answers * repeats)
            correct.append([0.0] * answers * repeats)
            for r in range(repeats):
                per_repeat[r].append([0.0] * answers)
            continue
        replies = [future.result() for future in gen.answers]
        grades = [grade(task, reply.text) for reply in replies]
        by_gen[gen.g] = grades
        graded += len(grades)
        format_failures += sum(gr.format_failure for gr in grades)
        rows += grade_rows(where, gen.g, grades, answers, repeats)
        counted = [r.prompt_tokens for r in replies if r.prompt_tokens is not None]
        if counted:  # one context, one size: the endpoint's count of its answers' (equal) requests
            api_tokens[gen.g] = sum(counted) / len(counted)
        keys += [r.key for r in replies if r.key]
        artifacts[f"answers/g{gen.g}.json"] = to_json(
            [
                {
                    "text": r.text,
                    "prompt_tokens": r.prompt_tokens,
                    "fields": gr.fields,
                    "malformed": gr.malformed,
                    "format_failure": gr.format_failure,
                    **({"repeat": i // answers} if repeats > 1 else {}),
                }
                for i, (r, gr) in enumerate(zip(replies, grades, strict=True))
            ]
        )
        acc.append([gr.score for gr in grades])
        correct.append([float(gr.all_correct) for gr in grades])
        for r in range(repeats):
            per_repeat[r].append([gr.score for gr in grades[r * answers : (r + 1) * answers]])
    metrics = {
        "fact_accuracy": task_score(acc),
        "all_fields_correct": task_score(correct),
        "answers_graded": float(graded),
        "format_failures": float(format_failures),
        "api_input_tokens": mean(api_tokens.values()),
        "api_input_tokens_total": float(sum(api_tokens.values())) if api_tokens else None,
        **{f"api_input_tokens/g{g}": t for g, t in api_tokens.items()},
    }
    if repeats > 1:
        metrics |= repeat_metrics([task_score(r) for r in per_repeat])
    return Graded(metrics, artifacts, {GRADES: rows}, keys, by_gen)


def grade_rows(where: dict, g: int, grades: list[AnswerGrade], answers: int, repeats: int) -> list[dict]:
    """The ``grades.json`` rows of one generation's graded answers, field by field (the rows a
    record is built from; ``washexp verify`` rebuilds them from the bundled replies)."""
    rows = []
    for i, gr in enumerate(grades):
        where_answer = {"answer": i % answers, **({"repeat": i // answers} if repeats > 1 else {})}
        rows += [
            {
                **where,
                "generation": g,
                **where_answer,
                "field": f,
                "correct": ok,
                "malformed": gr.malformed,
                "format_failure": gr.format_failure,
            }
            for f, ok in gr.fields.items()
        ]
    return rows


def repeat_metrics(scores: list[float | None]) -> dict[str, float | None]:
    """Each repeat's fact accuracy (``fact_accuracy/r<k>``), their spread (max - min) and their
    population standard deviation; None where a repeat has no score."""
    out: dict[str, float | None] = {f"fact_accuracy/r{k}": s for k, s in enumerate(scores)}
    known = [s for s in scores if s is not None]
    if len(known) == len(scores) and known:
        m = sum(known) / len(known)
        out["fact_accuracy_repeat_spread"] = max(known) - min(known)
        out["fact_accuracy_repeat_sd"] = (sum((s - m) ** 2 for s in known) / len(known)) ** 0.5
    return out
