"""The wash plan every washer returns, and what it does to a store's texts in memory.

A plan is a list of items, each naming one top-level ``*.md`` file of the store and an
operation on it:

- ``delete``: remove lines ``start..end`` (1-based, inclusive);
- ``replace``: put ``text`` in place of lines ``start..end``;
- ``delete-file``: remove the whole file (``start``/``end`` are ignored).

Lines are counted the way a reader counts them: a line ends at ``\\n`` (a ``\\r\\n`` ending is
one ending), and a final line with no newline is still a line; ``"a\\nb\\n"`` and ``"a\\nb"``
both have 2 lines, ``""`` has none. A lone ``\\r`` is not a line break.

Byte-faithful edits: a file no item names is returned identical. An edit keeps every byte
outside its range, including CRLF endings and whether the file ends with a newline:

- ``replace`` text is the new lines joined by ``\\n`` with no final newline (``"x\\ny"`` is two
  lines; ``""`` is one empty line; a ``\\r\\n`` inside the text counts as ``\\n``). Each new
  line takes the ending of the first replaced line; the last new line takes the ending of the
  last replaced line, so a replaced final line without a newline stays without one.
- ``delete`` of a range that reaches the end of a file without a final newline leaves the new
  last line without one too.

Items on one file must not overlap; they are applied bottom-up so line numbers always refer
to the file as the washer saw it. A bad plan raises one ``PlanError`` line naming the item.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from washexp.errors import WashexpError

CLASSES = frozenset(
    {"superseded", "duplicate", "done-point-in-time", "over-verbose", "trivially-obvious", "contradiction", "quick"}
)
OPS = frozenset({"delete", "replace", "delete-file"})
_ITEM_KEYS = ("file", "start", "end", "cls", "reason", "op", "text")
_PLAN_KEYS = ("items", "approved_drops", "washer", "notes")


class PlanError(WashexpError, ValueError):
    """A plan that cannot be applied; ``str(err)`` names the item index and the field."""

    def __init__(self, problem: str, *, index: int | None = None, field: str | None = None):
        self.index, self.field, self.problem = index, field, problem
        where = "plan" if index is None else f"plan items[{index}]"
        super().__init__(f"{where}{'.' + field if field else ''}: {problem}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)  # JSON true is not a line number


def check_file_name(name: Any) -> str | None:
    """Why ``name`` is not a store file name (a bare ``*.md`` name, no folder), or None."""
    if not isinstance(name, str) or not name:
        return f"must be a non-empty string, got {name!r}"
    if "/" in name or "\\" in name or "\0" in name:
        return f"must be a bare file name without a path separator, got {name!r}"
    if not name.endswith(".md"):
        return f"must end in .md, got {name!r}"
    return None


@dataclass(frozen=True)
class PlanItem:
    """One edit of one store file; validated on construction (see the module docstring)."""

    file: str
    start: int
    end: int
    cls: str
    reason: str
    op: str
    text: str | None = None

    def __post_init__(self) -> None:
        problem = _item_problem(self)
        if problem:
            raise PlanError(problem[1], field=problem[0])

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in _ITEM_KEYS}

    @classmethod
    def from_dict(cls, data: Any, index: int | None = None) -> PlanItem:
        """Build an item from its JSON form; errors name ``index`` and the field."""
        if not isinstance(data, Mapping):
            raise PlanError(f"must be an object, got {type(data).__name__}", index=index)
        unknown = sorted(set(data) - set(_ITEM_KEYS), key=repr)  # keys of any type
        if unknown:
            raise PlanError(f"unknown field(s) {', '.join(map(repr, unknown))}", index=index)
        for key in _ITEM_KEYS[:-1]:  # text is optional
            if key not in data:
                raise PlanError("is missing", index=index, field=key)
        try:
            return cls(**{k: data[k] for k in _ITEM_KEYS if k in data})
        except PlanError as err:
            raise PlanError(err.problem, index=index, field=err.field) from None


def _item_problem(item: PlanItem) -> tuple[str, str] | None:
    """(field, problem) for the first broken field of ``item``, or None."""
    if problem := check_file_name(item.file):
        return "file", problem
    if not isinstance(item.op, str) or item.op not in OPS:  # a list is unhashable: check the type first
        return "op", f"must be one of {', '.join(sorted(OPS))}, got {item.op!r}"
    if not isinstance(item.cls, str) or item.cls not in CLASSES:
        return "cls", f"must be one of {', '.join(sorted(CLASSES))}, got {item.cls!r}"
    if not isinstance(item.reason, str) or not item.reason.strip():
        return "reason", f"must be a non-empty string, got {item.reason!r}"
    for name in ("start", "end"):
        if not _is_int(getattr(item, name)):
            return name, f"must be an integer, got {getattr(item, name)!r}"
    if item.op != "delete-file":
        if item.start < 1:
            return "start", f"must be >= 1 (lines are 1-based), got {item.start}"
        if item.end < item.start:
            return "end", f"must be >= start {item.start}, got {item.end}"
    if item.op == "replace" and not isinstance(item.text, str):
        return "text", f"replace needs a string text, got {item.text!r}"
    if item.op != "replace" and item.text is not None:
        return "text", f"must be null for {item.op}"
    return None


@dataclass(frozen=True)
class Plan:
    """A washer's proposal: items, the drops it names for the fidelity gate, who made it, flags."""

    items: tuple[PlanItem, ...]
    approved_drops: tuple[dict, ...] = ()
    washer: str = ""
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        # lists are accepted and frozen to tuples, so a plan built in code equals its JSON round-trip
        object.__setattr__(self, "items", tuple(self.items))
        object.__setattr__(self, "approved_drops", tuple(self.approved_drops))
        object.__setattr__(self, "notes", tuple(self.notes))
        for i, item in enumerate(self.items):
            if not isinstance(item, PlanItem):
                raise PlanError(f"must be a PlanItem, got {type(item).__name__}", index=i)
        for i, drop in enumerate(self.approved_drops):
            if not isinstance(drop, Mapping) or not isinstance(drop.get("type"), str) or "value" not in drop:
                raise PlanError(f"approved_drops[{i}] must be an object with a string type and a value, got {drop!r}")
        if not isinstance(self.washer, str):
            raise PlanError(f"washer must be a string, got {self.washer!r}")
        for i, note in enumerate(self.notes):
            if not isinstance(note, str):
                raise PlanError(f"notes[{i}] must be a string, got {note!r}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "washer": self.washer,
            "items": [item.to_dict() for item in self.items],
            "approved_drops": [dict(d) for d in self.approved_drops],
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, data: Any) -> Plan:
        """Build a plan from its JSON form; ``items`` is required, the rest default to empty."""
        if not isinstance(data, Mapping):
            raise PlanError(f"must be an object, got {type(data).__name__}")
        unknown = sorted(set(data) - set(_PLAN_KEYS), key=repr)
        if unknown:
            raise PlanError(f"unknown field(s) {', '.join(map(repr, unknown))}")
        for key in ("items", "approved_drops", "notes"):
            if not isinstance(data.get(key, []), list):
                raise PlanError(f"{key} must be a list, got {type(data[key]).__name__}")
        if "items" not in data:
            raise PlanError("items is missing")
        items = tuple(PlanItem.from_dict(d, i) for i, d in enumerate(data["items"]))
        drops = tuple(dict(d) if isinstance(d, Mapping) else d for d in data.get("approved_drops", []))
        return cls(items, drops, data.get("washer", ""), tuple(data.get("notes", [])))


_LINE = re.compile(r"[^\n]*\n|[^\n]+\Z")


def split_lines(text: str) -> list[str]:
    """The file's lines with their endings kept; ``"".join`` of the result is ``text``."""
    return _LINE.findall(text)


def line_ending(line: str) -> str:
    """``"\\r\\n"``, ``"\\n"`` or ``""`` (a final line without a newline)."""
    if line.endswith("\r\n"):
        return "\r\n"
    return "\n" if line.endswith("\n") else ""


def _replaced(block: list[str], text: str) -> list[str]:
    """The new lines for ``block``: ``text`` split on newlines, endings taken from ``block``."""
    inner = line_ending(block[0]) or "\n"  # a one-line block at EOF: new inner lines get a plain \n
    new = re.split(r"\r?\n", text)
    return [line + inner for line in new[:-1]] + [new[-1] + line_ending(block[-1])]


def apply_to_texts(files: dict[str, str], plan: Plan) -> dict[str, str]:
    """The store's texts after ``plan``, computed in memory; ``files`` is not changed.

    Raises ``PlanError`` for an item on a file not in ``files``, a range past the file's last
    line, two items on one file that overlap, or a ``delete-file`` with another item on the
    same file. Files keep their order; a deleted file is absent from the result.
    """
    by_file: dict[str, list[tuple[int, PlanItem]]] = {}
    for i, item in enumerate(plan.items):
        if item.file not in files:
            raise PlanError(f"no file {item.file!r} in the store", index=i, field="file")
        by_file.setdefault(item.file, []).append((i, item))
    out = dict(files)
    for name, entries in by_file.items():
        if any(item.op == "delete-file" for _, item in entries):
            if len(entries) > 1:
                raise PlanError(f"{name} is deleted by another item and cannot also be edited", index=entries[1][0])
            del out[name]
            continue
        out[name] = _edit_file(files[name], entries)
    return out


def _edit_file(text: str, entries: list[tuple[int, PlanItem]]) -> str:
    lines = split_lines(text)
    entries = sorted(entries, key=lambda e: (e[1].start, e[1].end))
    for (i, a), (j, b) in zip(entries, entries[1:], strict=False):
        if b.start <= a.end:
            raise PlanError(
                f"lines {b.start}-{b.end} overlap items[{i}] lines {a.start}-{a.end}", index=j, field="start"
            )
    for i, item in entries:
        if item.end > len(lines):
            raise PlanError(f"{item.file} has {len(lines)} lines, range ends at {item.end}", index=i, field="end")
    for _, item in reversed(entries):  # bottom-up: earlier line numbers stay valid
        lo, hi = item.start - 1, item.end
        if item.op == "replace":
            lines[lo:hi] = _replaced(lines[lo:hi], item.text or "")
            continue
        at_eof_without_newline = hi == len(lines) and line_ending(lines[-1]) == ""
        del lines[lo:hi]
        if at_eof_without_newline and lines:
            last = lines[-1]
            lines[-1] = last[: len(last) - len(line_ending(last))]
    return "".join(lines)
