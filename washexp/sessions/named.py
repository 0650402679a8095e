"""Facts a user names (``--facts FILE``): no planting, each needle must already be in the session.

The file (YAML or JSON) maps a task id (as ``washexp import`` names it: ``<file stem>-001``...)
to its fields::

    session-001:
      deploy_id:
        description: The id of the deploy that failed.
        expected: DEP-4471
        needles: ["DEP-4471"]        # or needle: "DEP-4471"
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from washexp.errors import FixtureError
from washexp.inputs import load_yaml
from washexp.needles import contains


@dataclass(frozen=True)
class NamedFact:
    field: str
    description: str
    expected: Any
    needles: tuple[str, ...]


def load(path: Path) -> dict[str, list[NamedFact]]:
    raw = load_yaml(path)
    if not isinstance(raw, dict) or not raw:
        raise FixtureError(path, None, "must map task ids to their fields")
    facts: dict[str, list[NamedFact]] = {}
    for task, fields in raw.items():
        if not isinstance(fields, dict) or not fields:
            raise FixtureError(path, str(task), "must map field names to {description, expected, needles}")
        facts[str(task)] = [_fact(path, f"{task}.{name}", str(name), spec) for name, spec in fields.items()]
    return facts


def _fact(path: Path, where: str, name: str, spec: Any) -> NamedFact:
    if not isinstance(spec, dict) or not {"description", "expected"} <= spec.keys():
        raise FixtureError(path, where, "needs description, expected and needles (or needle)")
    needles = spec.get("needles", [spec["needle"]] if "needle" in spec else None)
    if not isinstance(needles, list) or not all(isinstance(n, str) and n.strip() for n in needles):
        raise FixtureError(path, where, "needles must be a list of non-empty strings")
    if not isinstance(spec["description"], str) or not spec["description"].strip():
        raise FixtureError(path, f"{where}.description", "must be a non-empty string")
    return NamedFact(name, spec["description"], spec["expected"], tuple(needles))


def check(path: Path, task: str, facts: list[NamedFact], units: list[str], query: str) -> None:
    """Each needle must be in the session's tool results (as written, secrets masked), and in
    neither the query nor its field's description: there it would prove nothing."""
    evidence = "\n".join(units)
    for fact in facts:
        for needle in fact.needles:
            where = f"{task}.{fact.field}"
            if not contains(evidence, needle):
                raise FixtureError(path, where, f"needle {needle!r} is in no tool result of the session")
            if contains(query, needle) or contains(fact.description, needle):
                raise FixtureError(
                    path, where, f"needle {needle!r} is in the query or the description: it proves nothing"
                )
