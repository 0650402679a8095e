"""Model-free retention: could a reader answer each field from this context at all?

A field is retained when every one of its needles occurs in the context (whitespace-normalized
exact substring, no Unicode normalization: see ``washexp.needles``). A field with no needles is
stated by the query itself and is always retained.
"""

from __future__ import annotations

from washexp.compaction.inputs.fixtures import Task
from washexp.needles import finder


def retained_fields(task: Task, evidence_text: str) -> dict[str, list[str]]:
    """Field -> the needles *missing* from ``evidence_text`` (empty list = retained)."""
    found = finder(evidence_text)
    return {f: [n for n in needles if not found(n)] for f, needles in task.needles.items()}


def retention(missing: dict[str, list[str]]) -> float:
    """The fraction of fields retained."""
    return sum(not m for m in missing.values()) / len(missing)
