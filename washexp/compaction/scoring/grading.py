"""Strict grading: ``{"facts": {...}}``, recursive type-exact JSON equality, no second chances.

- The whole reply must be one JSON object with a ``facts`` mapping (surrounding whitespace
  allowed; prose or a code fence around it makes it malformed).
- Equality is type-exact: ``1``, ``1.0`` and ``true`` are three different answers; strings
  match exactly; arrays match in order, except for the task's ``unordered_fields``, which
  compare as multisets.
- A missing field, or any field of a malformed reply, scores 0. No aliases, rewrites or
  retries are applied after scoring.
- A *format failure* is counted apart (it changes no score): a reply that is not the asked shape,
  one JSON object ``{"facts": {...}}`` holding exactly the task's fields. A reader tells "could
  not format" from "the evidence was lost" by it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from washexp.compaction.inputs.fixtures import Task


def strict_equal(a: Any, b: Any) -> bool:
    """Recursive JSON equality where the type must match too (bool is not int, int not float)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(strict_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(strict_equal(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _canonical(value: Any) -> str:
    # Type-preserving canonical form, so sorting never equates 1 with 1.0 or true.
    return json.dumps([type(value).__name__, value], sort_keys=True)


def unordered_equal(a: Any, b: Any) -> bool:
    if not (isinstance(a, list) and isinstance(b, list)) or len(a) != len(b):
        return False
    return all(strict_equal(x, y) for x, y in zip(sorted(a, key=_canonical), sorted(b, key=_canonical), strict=True))


def parse_facts(reply: str) -> dict[str, Any] | None:
    """The ``facts`` mapping of a reply, or None when the reply is malformed."""
    try:
        data = json.loads(reply)
    except (json.JSONDecodeError, TypeError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("facts"), dict):
        return None
    return data["facts"]


@dataclass(frozen=True)
class AnswerGrade:
    fields: dict[str, bool]
    malformed: bool
    format_failure: bool
    """Not the shape the reader was asked for: malformed, or ``facts`` without exactly the task's fields."""

    @property
    def score(self) -> float:
        """Fraction of fields correct within this answer."""
        return sum(self.fields.values()) / len(self.fields)

    @property
    def all_correct(self) -> bool:
        return all(self.fields.values())


def grade(task: Task, reply: str) -> AnswerGrade:
    facts = parse_facts(reply)
    if facts is None:
        return AnswerGrade({f: False for f in task.expected}, malformed=True, format_failure=True)
    result = {}
    for name, want in task.expected.items():
        if name not in facts:
            result[name] = False
        elif name in task.unordered_fields:
            result[name] = unordered_equal(facts[name], want)
        else:
            result[name] = strict_equal(facts[name], want)
    return AnswerGrade(result, malformed=False, format_failure=facts.keys() != task.fields.keys())
