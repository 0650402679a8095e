"""The human gate: an operator policy decides every delete and every drop a plan entails.

What the operator sees is a :class:`Review`: each delete (lines or a whole file, with their
text) and each structured value the plan would drop that its deletes entail or the plan itself
declares (the fidelity gate's approval keys, e.g. a deleted scratch file's index link).
Rewrites are not shown, and a value a rewrite loses without the plan declaring it is not the
operator's to approve: the fidelity gate blocks it whoever operates. A muscle needle lost in a
shown rewrite is a loss, whoever approved the plan.

- ``approve-all``: what a washer alone does (every delete and drop approved);
- ``approve-none``: refuses every delete and every drop;
- ``interactive``: asks y/n for each on a terminal;
- ``benchmark``: plays the seed's operator, who "never approves a cut that costs a muscle
  needle". It approves deletes and the drops they entail, and refuses any delete whose text
  holds a muscle needle the store would no longer hold after the plan (``Review.after``), and any
  drop whose value is part of such a lost needle (it reads ``expected.json``, as only the scorer
  and this operator may). A copy of a needle that survives elsewhere (a scratch file's
  ``[[migration-log]]`` while the index keeps it) costs nothing. A refused muscle delete is the
  system working, and is counted.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from washexp.errors import ConfigError
from washexp.needles import contains, finder
from washexp.registry import unknown_name


@dataclass(frozen=True)
class Delete:
    index: int
    """The item's index in the plan."""
    file: str
    text: str
    """What would be deleted (the lines, or the whole file)."""
    reason: str


@dataclass(frozen=True)
class Review:
    deletes: tuple[Delete, ...]
    drops: tuple[str, ...]
    """Approval keys (``type:value``) of the values the plan would drop that its deletes entail or
    its ``approved_drops`` declare; only these can be approved."""
    after: str | None = None
    """The store's text after the whole plan, its files joined as the scorer joins them; None when
    unknown (a needle-checking operator then treats every needle in a cut as lost)."""


@dataclass(frozen=True)
class Decision:
    approved: frozenset[int]
    """Indices of the approved deletes."""
    approved_drops: frozenset[str]
    refused: tuple[tuple[int, str], ...] = ()
    """(item index, why) for each refused delete."""
    notes: tuple[str, ...] = field(default=())


class Operator(Protocol):
    @property
    def name(self) -> str: ...  # read-only: the policies are frozen dataclasses

    def review(self, review: Review) -> Decision: ...


@dataclass(frozen=True)
class ApproveAll:
    name: str = "approve-all"

    def review(self, review: Review) -> Decision:
        return Decision(frozenset(d.index for d in review.deletes), frozenset(review.drops))


@dataclass(frozen=True)
class ApproveNone:
    name: str = "approve-none"

    def review(self, review: Review) -> Decision:
        refused = tuple((d.index, "the operator approves no delete") for d in review.deletes)
        return Decision(frozenset(), frozenset(), refused)


@dataclass(frozen=True)
class Benchmark:
    """The seed's operator: never approves a cut that costs a muscle needle."""

    muscle: tuple[tuple[str, str], ...]
    """(id, needle) of every muscle needle of the store."""
    name: str = "benchmark"

    def review(self, review: Review) -> Decision:
        kept = None if review.after is None else finder(review.after)
        lost = [(mid, needle) for mid, needle in self.muscle if kept is None or not kept(needle)]
        approved, refused = set(), []
        for d in review.deletes:
            held = [mid for mid, needle in lost if contains(d.text, needle)]
            if held:
                refused.append((d.index, f"holds muscle {', '.join(held)}"))
            else:
                approved.add(d.index)
        # The drops the deletes entail are shown and approved, except a value that is part of a
        # muscle needle the plan loses (that would be a muscle value going).
        drops = {k for k in review.drops if not any(contains(needle, k.partition(":")[2]) for _, needle in lost)}
        return Decision(frozenset(approved), frozenset(drops), tuple(refused))


@dataclass(frozen=True)
class Interactive:
    ask: Callable[[str], str] = input
    name: str = "interactive"

    def review(self, review: Review) -> Decision:
        if self.ask is input and not sys.stdin.isatty():
            raise ConfigError("operator=interactive needs a terminal (stdin is not one)")
        approved, refused = set(), []
        for d in review.deletes:
            shown = d.text if len(d.text) < 600 else d.text[:600] + " ..."
            prompt = f"\n--- delete from {d.file} ({d.reason}):\n{shown}\n--- approve this delete? [y/N] "
            if self.ask(prompt).strip().lower() in ("y", "yes"):
                approved.add(d.index)
            else:
                refused.append((d.index, "refused at the terminal"))
        drops = {k for k in review.drops if self.ask(f"drop {k}? [y/N] ").strip().lower() in ("y", "yes")}
        return Decision(frozenset(approved), frozenset(drops), tuple(refused))


OPERATORS = ("approve-all", "approve-none", "interactive", "benchmark")


def make_operator(name: str, muscle: tuple[tuple[str, str], ...] | None = None) -> Operator:
    """``muscle``: the store's (id, needle) pairs, required by ``benchmark`` only."""
    if name == "approve-all":
        return ApproveAll()
    if name == "approve-none":
        return ApproveNone()
    if name == "interactive":
        return Interactive()
    if name == "benchmark":
        if muscle is None:
            raise ConfigError("operator=benchmark needs the store's expected.json (--expected FILE)")
        return Benchmark(tuple(muscle))
    raise ConfigError(unknown_name("operator", name, list(OPERATORS)))
