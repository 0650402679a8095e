"""``keeps.json``: the items an earlier wash decided to keep, in CoalWash's format.

The file is CoalWash's (``keeps.mjs``, v1.1.0): ``{"v": 1, "keeps": [{"target", "reason", "date"}]}``,
an entry optionally carrying CoalWash's enforcement handle ``anchor`` + ``anchorFile``
(``washexp.wash.coalwash.keep_gate``). washexp writes exactly that, so CoalWash reads what washexp wrote,
and reads it back, so a CoalWash user's keeps are honoured. A plain JSON list of entries (what
washexp wrote before) is read too, and rewritten in CoalWash's format.

A file whose ``v`` is newer than 1 is **read-only**: its entries are honoured as far as they can be
read (CoalWash reads none of them; excluding more is the safe side) and it is never rewritten: the
wash's new keeps are then not recorded, and the receipt says so.

Read strictly where CoalWash is tolerant: a file that is not JSON, not of either shape, or holds an
entry that is not an object with a non-empty string ``target`` (and string ``reason``, ``date``,
``anchor``, ``anchorFile`` when present) is an input error, one
:class:`~washexp.errors.FixtureError` line naming the file and the entry (``washexp wash`` exits 2
before any work). CoalWash drops such an entry silently; a keep silently lost is an item a washer
may then cut. Other keys of an entry are ignored, as CoalWash ignores them.

A target appears once: the latest keep of a target wins, in the file as in a wash's new keeps (its
reason and date replace the older ones; an anchor it lacks is kept from the older one, as
CoalWash's ``recordKeep`` keeps it). A new keep with a bad target is refused and named.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from washexp.errors import FixtureError
from washexp.inputs import parse_json, read_untrusted
from washexp.wash.washer import Keep

KEEPS = "keeps.json"
SCHEMA_V = 1
"""The ``v`` CoalWash writes and reads; a newer one is read-only."""
_STRINGS = {"target": "target", "reason": "reason", "date": "date", "anchor": "anchor", "anchorFile": "anchor_file"}


@dataclass(frozen=True)
class KeepsFile:
    keeps: tuple[Keep, ...]
    v: float
    """The file's schema version (1 for a missing file or a plain list)."""

    @property
    def writable(self) -> bool:
        return self.v <= SCHEMA_V


def keep_problem(entry: Any) -> str | None:
    """Why ``entry`` (a JSON value or a :class:`Keep`) is not a keep, or None."""
    if isinstance(entry, Keep):
        entry = _to_json(entry)
    if not isinstance(entry, dict):
        return f"expected an object {{target, reason, date}}, got {type(entry).__name__}"
    if "target" not in entry:
        return "target is missing"
    for key in _STRINGS:
        if key in entry and not isinstance(entry[key], str):
            return f"{key} must be a string, got {type(entry[key]).__name__}"
    if not entry["target"].strip():
        return "target is empty"
    return None


def _from_json(entry: dict) -> Keep:
    values = {field: entry[key] for key, field in _STRINGS.items() if key in entry}
    return Keep(**{"reason": "", "date": "", **values})


def _to_json(keep: Keep) -> dict[str, Any]:
    out = {"target": keep.target, "reason": keep.reason, "date": keep.date}
    if keep.anchor:
        out["anchor"] = keep.anchor
    if keep.anchor_file:
        out["anchorFile"] = keep.anchor_file
    return out


def _version(path: Path, data: Any) -> tuple[list, float]:
    if isinstance(data, list):
        return data, SCHEMA_V
    if not isinstance(data, dict) or not isinstance(data.get("keeps"), list):
        raise FixtureError(path, None, 'expected a list of keeps or {"v": 1, "keeps": [...]}')
    v = data.get("v", SCHEMA_V)
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise FixtureError(path, "v", f"must be a number, got {type(v).__name__}")
    return data["keeps"], v


def read_keeps_file(store: str | Path) -> KeepsFile:
    """The store's keeps (one a target, the latest wins) and the file's version."""
    path = Path(store) / KEEPS
    raw = read_untrusted(path)  # a regular file of the store, capped: never a FIFO, device or link out
    if raw is None:
        return KeepsFile((), SCHEMA_V)
    data = parse_json(raw, path)
    entries, v = _version(path, data)
    where = "keeps" if isinstance(data, dict) else ""
    for i, entry in enumerate(entries):
        if problem := keep_problem(entry):
            raise FixtureError(path, f"{where}[{i}]", problem)
    return KeepsFile(merged((), tuple(_from_json(e) for e in entries)), v)


def read_keeps(store: str | Path) -> tuple[Keep, ...]:
    """The store's keeps, one a target (the latest wins); ``()`` when there is no file."""
    return read_keeps_file(store).keeps


def merged(keeps: tuple[Keep, ...], new: tuple[Keep, ...]) -> tuple[Keep, ...]:
    """``keeps`` then ``new``, one a target, the latest keep of each target winning (an anchor the
    latest lacks is kept from the one it replaces)."""
    latest: dict[str, Keep] = {}
    for k in (*keeps, *new):
        prior = latest.pop(k.target, None)
        if prior is not None:
            k = replace(k, anchor=k.anchor or prior.anchor, anchor_file=k.anchor_file or prior.anchor_file)
        latest[k.target] = k
    return tuple(latest.values())


def dump(keeps: tuple[Keep, ...]) -> bytes:
    """CoalWash's format: ``{"v": 1, "keeps": [...]}``."""
    data = {"v": SCHEMA_V, "keeps": [_to_json(k) for k in keeps]}
    return (json.dumps(data, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
