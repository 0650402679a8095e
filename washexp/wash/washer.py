"""The one pluggable step of a wash: a washer proposes a plan; the pipeline does the rest.

A washer sees the store's texts (never ``expected.json``), the keeps (items an earlier wash
decided to keep, so they are not flagged again) and a scratch folder it may use; it returns a
:class:`Proposal`. The gates, the operator and the transactional apply judge the plan the same
way whoever proposed it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from washexp.hashing import sha256_bytes
from washexp.wash.plan import Plan, PlanItem, split_lines


@dataclass(frozen=True)
class Keep:
    """An item kept on purpose (``keeps.json``: ``{target, reason, date}``, and CoalWash's optional
    enforcement handle ``{anchor, anchorFile}``: text that must survive an edit of that file)."""

    target: str
    reason: str
    date: str
    anchor: str | None = None
    anchor_file: str | None = None


def target_of(item: PlanItem, files: dict[str, str]) -> str:
    """A plan item's stable name: its file and the sha256 of the lines it covers (robust to
    lines moving), or the file alone for a whole-file delete."""
    if item.op == "delete-file":
        return item.file
    lines = split_lines(files[item.file])[item.start - 1 : item.end]
    return f"{item.file}#{sha256_bytes(''.join(lines).encode('utf-8'))[:16]}"


@dataclass(frozen=True)
class Proposal:
    plan: Plan
    cost_tokens: int = 0
    """The washer's own token cost (model usage; 0 for a rule-based washer)."""
    artifacts: dict[str, str] = field(default_factory=dict)
    """What the washer wants kept with the round (a command's stdout and stderr, a model's flags)."""
    keeps: tuple[Keep, ...] = ()
    """New keeps: items the washer looked at and decided to keep (recorded in ``keeps.json``)."""
    notes: tuple[str, ...] = ()
    calls: Mapping[str, int] = field(default_factory=dict)
    """Model calls per seat (``outsider``, ``insider``, ``check``; ``plain``); empty: no model call."""


@runtime_checkable
class Washer(Protocol):
    name: str

    def propose(self, files: dict[str, str], keeps: tuple[Keep, ...], scratch: Path) -> Proposal: ...
