"""Where a generated task planted its facts: each field's kind, whether it supersedes an earlier
value, whether a near miss exists, and its depth (``generated.json``'s ``facts``).

A condition logs these rows as its ``planted.json`` table, so that a record can cut retention and
fact accuracy by kind and by depth from the runs alone. No value is in them: only the scorer's
grouping keys.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from washexp.errors import FixtureError
from washexp.inputs import load_json
from washexp.tasks.facts import KINDS

TABLE = "planted.json"
FILE = "generated.json"
THIRDS = ("first", "middle", "last")
_KEYS = {"field", "kind", "superseded", "near_miss", "unit", "depth", "third"}


def places(folder: Path, fields: list[str]) -> list[dict[str, Any]] | None:
    """The rows of a task folder's planted facts (None when the task records none), checked:
    one row per field of the task, known kinds and thirds."""
    path = folder / FILE
    if not path.is_file():
        return None
    raw = load_json(path)
    rows = raw.get("facts") if isinstance(raw, dict) else None
    if not isinstance(rows, list) or not all(isinstance(r, dict) and set(r) == _KEYS for r in rows):
        raise FixtureError(path, "facts", f"must be a list of objects with {', '.join(sorted(_KEYS))}")
    if sorted(r["field"] for r in rows) != sorted(fields):
        raise FixtureError(path, "facts", "must name each field of task.yaml once")
    for r in rows:
        if r["kind"] not in KINDS or r["third"] not in THIRDS:
            raise FixtureError(path, f"facts.{r['field']}", f"kind {r['kind']!r} or third {r['third']!r} is unknown")
    return [{k: r[k] for k in sorted(_KEYS)} for r in rows]
