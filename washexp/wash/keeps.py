"""``keeps.json``: the items an earlier wash decided to keep, read strictly.

The file is a JSON list of ``{"target", "reason", "date"}`` objects, each a string, the target
not empty. A file that is not JSON or not of that shape is an input error: one
:class:`~washexp.errors.FixtureError` line naming the file and the entry (``washexp wash`` exits 2
before any work). CoalWash reads a damaged file tolerantly; we stop instead, because a keep
silently lost is an item a washer may then cut.

A target appears once: the latest keep of a target wins, in the file as in a wash's new keeps
(its reason and date replace the older ones). A new keep with a bad target is refused and named.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from washexp.errors import FixtureError
from washexp.wash.files import entry_problem
from washexp.wash.washer import Keep

KEEPS = "keeps.json"
_FIELDS = ("target", "reason", "date")


def keep_problem(entry: Any) -> str | None:
    """Why ``entry`` (a JSON value or a :class:`Keep`) is not a keep, or None."""
    if isinstance(entry, Keep):
        entry = asdict(entry)
    if not isinstance(entry, dict):
        return f"expected an object {{target, reason, date}}, got {type(entry).__name__}"
    if sorted(entry) != sorted(_FIELDS):
        return f"expected exactly the keys target, reason, date, got {sorted(map(str, entry))}"
    for key in _FIELDS:
        if not isinstance(entry[key], str):
            return f"{key} must be a string, got {type(entry[key]).__name__}"
    if not entry["target"].strip():
        return "target is empty"
    return None


def read_keeps(store: str | Path) -> tuple[Keep, ...]:
    """The store's keeps, one a target (the latest wins); ``()`` when there is no file."""
    path = Path(store) / KEEPS
    if problem := entry_problem(path):
        raise FixtureError(path, None, f"refusing to read the keeps: {problem}")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ()
    except (OSError, UnicodeDecodeError) as err:
        raise FixtureError(path, None, f"cannot read the keeps ({type(err).__name__})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise FixtureError(path, None, f"not JSON ({err.msg}, line {err.lineno})") from None
    if not isinstance(data, list):
        raise FixtureError(path, None, f"expected a list of keeps, got {type(data).__name__}")
    for i, entry in enumerate(data):
        if problem := keep_problem(entry):
            raise FixtureError(path, f"[{i}]", problem)
    return merged((), tuple(Keep(**entry) for entry in data))


def merged(keeps: tuple[Keep, ...], new: tuple[Keep, ...]) -> tuple[Keep, ...]:
    """``keeps`` then ``new``, one a target, the latest keep of each target winning."""
    latest = {k.target: k for k in (*keeps, *new)}
    return tuple(latest.values())


def dump(keeps: tuple[Keep, ...]) -> bytes:
    return (json.dumps([asdict(k) for k in keeps], indent=1, ensure_ascii=False) + "\n").encode("utf-8")
