"""The reader's answers to one condition's contexts, graded strictly and aggregated as the study does."""

from __future__ import annotations

from dataclasses import dataclass

from washexp.compaction.aggregate import mean, task_score
from washexp.compaction.artifacts import to_json
from washexp.compaction.fixtures import Task
from washexp.compaction.grading import grade


@dataclass(frozen=True)
class Graded:
    metrics: dict[str, float | None]
    artifacts: dict[str, str]
    tables: dict[str, list[dict]]
    keys: list[str]
    """The recordings of the answers."""


def grade_answers(task: Task, gens, answers: int, where: dict) -> Graded:
    """Wait for every answer of every generation, grade it; a context that is not there scores 0
    per answer. ``api_input_tokens``: the endpoint's own input count of each answered context
    (``/g<N>`` per generation, the record compares them with Full's), mean and total."""
    acc, correct, rows, keys, artifacts = [], [], [], [], {}
    api_tokens: dict[int, float] = {}
    for gen in gens:
        if not gen.valid:
            acc.append([0.0] * answers)
            correct.append([0.0] * answers)
            continue
        replies = [future.result() for future in gen.answers]
        grades = [grade(task, reply.text) for reply in replies]
        for a, gr in enumerate(grades):
            rows += [
                {**where, "generation": gen.g, "answer": a, "field": f, "correct": ok, "malformed": gr.malformed}
                for f, ok in gr.fields.items()
            ]
        counted = [r.prompt_tokens for r in replies if r.prompt_tokens is not None]
        if counted:  # one context, one size: the endpoint's count of its answers' (equal) requests
            api_tokens[gen.g] = mean(counted)
        keys += [r.key for r in replies if r.key]
        artifacts[f"answers/g{gen.g}.json"] = to_json(
            [
                {"text": r.text, "prompt_tokens": r.prompt_tokens, "fields": gr.fields, "malformed": gr.malformed}
                for r, gr in zip(replies, grades, strict=True)
            ]
        )
        acc.append([gr.score for gr in grades])
        correct.append([float(gr.all_correct) for gr in grades])
    metrics = {
        "fact_accuracy": task_score(acc),
        "all_fields_correct": task_score(correct),
        "api_input_tokens": mean(api_tokens.values()),
        "api_input_tokens_total": float(sum(api_tokens.values())) if api_tokens else None,
        **{f"api_input_tokens/g{g}": t for g, t in api_tokens.items()},
    }
    return Graded(metrics, artifacts, {"grades.json": rows}, keys)
