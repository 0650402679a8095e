"""Regrade a bundled record's answers without the model: the reader's raw replies
(``answers/g<N>.json``, kept in the bundle beside each run's grades) graded again by the study's
strict grader against the tasks must give the very ``grades.json`` rows the record was built from.
``washexp verify`` calls it after recomputing the record, so the chain from each reply the model
gave to each number of the record is checked with the tasks alone.

A task is used only if its folder's digest is the one the run was graded on (the run's
``washexp.sha256.fixture`` tag): tasks changed since are not regraded, and that is said.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from washexp.compaction.inputs.fixtures import Task, load_task
from washexp.compaction.scoring.answers import GRADES, grade_rows
from washexp.compaction.scoring.grading import grade
from washexp.errors import FixtureError, WashexpError
from washexp.tracking import bundle, reader

FIXTURE = bundle.TAG + "fixture"


class RegradeMismatch(WashexpError):
    """A bundled reply whose grade is not the one the record was built from."""


@dataclass(frozen=True)
class Regraded:
    replies: int
    runs: int
    skipped: tuple[str, ...]
    """Tasks whose replies were not regraded, each with why (not found, or changed since)."""
    logged: bool
    """Whether any run logged replies (a record without a reader has none to regrade)."""

    def said(self, tasks: Path) -> str | None:
        if not self.logged:
            return None
        if not self.replies and not self.skipped:
            return "no replies in the bundle to regrade (exported before bundles kept them)"
        done = f"{self.replies} replies of {self.runs} runs regraded against the tasks in {tasks}: every grade agrees"
        if self.skipped:
            done += f"; not regraded: {', '.join(self.skipped)}"
        return done


def _key(row: dict) -> tuple:
    return (row["generation"], row["answer"], row.get("repeat"), row["field"])


def _value(row: dict) -> tuple:
    return (bool(row["correct"]), bool(row["malformed"]), bool(row["format_failure"]))


def _replies(run_id: str, name: str, doc: Any) -> list[str]:
    if not isinstance(doc, list) or not all(isinstance(r, dict) and isinstance(r.get("text"), str) for r in doc):
        raise RegradeMismatch(f"bundle artifact {run_id}/{name}: not a list of replies with their text")
    return [r["text"] for r in doc]


def _task(tasks: Path, task_id: str, digest: Any, cache: dict[str, Task | str]) -> Task | str:
    """The task graded on, or why it cannot be used."""
    if task_id not in cache:
        folder = tasks / task_id
        try:
            task: Task | str = load_task(folder) if folder.is_dir() else f"{task_id} (not in the folder)"
        except FixtureError:
            task = f"{task_id} (does not load)"
        if isinstance(task, Task) and task.digest != digest:
            task = f"{task_id} (changed since it was graded)"
        cache[task_id] = task
    return cache[task_id]


def regrade(uri: str, experiment: str, tasks: Path) -> Regraded:
    """Every run in the bundle whose grades and replies it holds, regraded; the first reply whose
    grade differs is a :class:`RegradeMismatch` naming run, task, generation, answer and field."""
    runs = bundle.search(uri, experiment)
    root = bundle.folder(uri)
    if runs is None:
        return Regraded(0, 0, (), False)
    names = bundle.reply_files(runs.columns)
    cache: dict[str, Task | str] = {}
    count = n_runs = 0
    skipped: set[str] = set()
    for row in runs.to_dict("records"):
        run_id = row["run_id"]
        listed = [n for n in names if isinstance(row.get(bundle.TAG + n), str)]
        held = [n for n in listed if (root / "runs" / run_id / n).exists()]
        if not held or not (root / "runs" / run_id / GRADES).exists():
            continue
        if held != listed:  # a bundle keeps a run's replies whole, or none of them
            missing = sorted(set(listed) - set(held))[0]
            raise RegradeMismatch(f"bundle artifact {run_id}/{missing}: missing (its run's other replies are there)")
        task = _task(tasks, str(row.get("tags.task")), row.get(FIXTURE), cache)
        if isinstance(task, str):
            skipped.add(task)
            continue
        stored = reader.json_artifact(uri, run_id, GRADES)
        rows = [dict(zip(stored["columns"], r, strict=True)) for r in stored["data"]]
        answers = int(row["params.answers_per_context"])
        for name in held:
            g = int(bundle.REPLIES.match(name).group(1))  # type: ignore[union-attr]
            texts = _replies(run_id, name, reader.json_artifact(uri, run_id, name))
            where = {"task": task.id}
            graded = [grade(task, t) for t in texts]
            again = {_key(r): _value(r) for r in grade_rows(where, g, graded, answers, len(texts) // answers)}
            kept = {_key(r): _value(r) for r in rows if r["generation"] == g}
            for key in sorted(again.keys() | kept.keys(), key=str):
                if again.get(key) != kept.get(key):
                    gen, answer, repeat, field = key
                    at = f"generation {gen}, answer {answer}" + (f", repeat {repeat}" if repeat is not None else "")
                    raise RegradeMismatch(
                        f"run {run_id} ({task.id}), {at}, field {field}: the record's grade "
                        f"(correct, malformed, format failure) {kept.get(key)}, regraded {again.get(key)}"
                    )
            count += len(texts)
        n_runs += 1
    return Regraded(count, n_runs, tuple(sorted(skipped)), bool(names))
