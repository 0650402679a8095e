"""Structured-token recall: how many of a store's structured values a cut kept, per class.

Counted by washexp's port of CoalWash's fidelity-gate inventory (:mod:`washexp.wash.coalwash.inventory`),
never by what a washer says of itself (a tool does not grade itself). The classes are the gate's
value classes:

    wikilinks, dates, versions, links, frontmatter, codespans, quotes, numbers

**Recall is CoalWash's rule** (its controlled-fidelity scorer, ``controlled-fidelity-score.mjs``):
per class, the **distinct values** the before side states (its inventory's sets), and how many of
them the after side still states anywhere: ``|before & after| / |before|``. A store's sets are the
union of its files' sets, each file read on its own (its own frontmatter block; no value spans two
files); a single file is exactly the scorer's ``inventory(text)``. A file whose frontmatter block
cannot be read (a cut through its closing ``---``) declares no key. A value the after side adds is
no gain. An empty class has no recall (``None``, shown ``n/a``), never 100 %.

**Occurrence recall** is a second figure, named as such, that CoalWash does not publish: the
seven single-line classes count each value's occurrences over the store's distinct lines (an exact
duplicate line is one statement), frontmatter keys once per file, and recall is the multiset
intersection ``sum(min(before[v], after[v])) / sum(before[v])``. What it adds: a value stated in
two different places and cut down to one (a fact merged away from one of its contexts) is a loss
here and none under CoalWash's rule.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from washexp.wash.coalwash.inventory import frontmatter_keys, lines, take_inventory, token_lists

CLASSES = ("wikilinks", "dates", "versions", "links", "frontmatter", "codespans", "quotes", "numbers")
"""The recall classes, in the gate's order (its ``fencedLines`` are not structured tokens)."""


@dataclass(frozen=True)
class Census:
    """Per class, the distinct values a store states, and how often (see the module doc)."""

    values: dict[str, tuple[str, ...]]
    """CoalWash's sets: each class's distinct values, in first-seen order."""
    counts: dict[str, Counter]
    """Occurrences over distinct lines (frontmatter: once per file), for occurrence recall."""
    unreadable_frontmatter: tuple[str, ...] = ()
    """Files whose frontmatter block could not be read (their keys are not in the census)."""

    @property
    def total(self) -> int:
        return sum(sum(c.values()) for c in self.counts.values())


def census(files: Mapping[str, str]) -> Census:
    """The census of a store's files (name -> text, in store order)."""
    inv = take_inventory(list(files.values()))
    values = {cls: tuple(inv.values[cls]) for cls in CLASSES}
    distinct = "\n".join(dict.fromkeys(line for text in files.values() for line in lines(text)))
    found = token_lists(distinct)
    counts = {cls: Counter(found[cls]) for cls in CLASSES if cls != "frontmatter"}
    keys: Counter = Counter()
    unreadable = []
    for name, text in files.items():
        names, incomplete = frontmatter_keys(text)
        keys.update(names)
        if incomplete:
            unreadable.append(name)
    counts["frontmatter"] = keys
    return Census(values, {cls: counts[cls] for cls in CLASSES}, tuple(unreadable))


@dataclass(frozen=True)
class ClassRecall:
    total: int
    kept: int
    lost: dict[str, int]
    """value -> how many went (1 a value under CoalWash's rule; occurrences under occurrence recall)."""

    @property
    def dropped(self) -> int:
        return self.total - self.kept

    @property
    def pct(self) -> float | None:
        return 100.0 * self.kept / self.total if self.total else None


@dataclass(frozen=True)
class Recall:
    by_class: dict[str, ClassRecall]

    @property
    def total(self) -> int:
        return sum(c.total for c in self.by_class.values())

    @property
    def kept(self) -> int:
        return sum(c.kept for c in self.by_class.values())

    @property
    def dropped(self) -> int:
        return self.total - self.kept

    @property
    def pct(self) -> float | None:
        return 100.0 * self.kept / self.total if self.total else None

    def to_dict(self) -> dict:
        """JSON-ready: totals, kept, recall % per class and overall, and every value lost."""
        return {
            "total": self.total,
            "kept": self.kept,
            "recall_pct": self.pct,
            "by_class": {
                cls: {"total": c.total, "kept": c.kept, "recall_pct": c.pct, "lost": c.lost}
                for cls, c in self.by_class.items()
            },
        }


def recall(before: Census, after: Census) -> Recall:
    """CoalWash's recall of ``after`` against ``before``: distinct values per class (module doc)."""
    out = {}
    for cls in CLASSES:
        there = set(after.values[cls])
        lost = {v: 1 for v in before.values[cls] if v not in there}
        total = len(before.values[cls])
        out[cls] = ClassRecall(total, total - len(lost), lost)
    return Recall(out)


def occurrence_recall(before: Census, after: Census) -> Recall:
    """Occurrence recall: the multiset intersection over distinct lines, per class (module doc)."""
    out = {}
    for cls in CLASSES:
        b, a = before.counts[cls], after.counts[cls]
        kept = sum(min(n, a[v]) for v, n in b.items())
        lost = {v: n - a[v] for v, n in b.items() if a[v] < n}
        out[cls] = ClassRecall(sum(b.values()), kept, lost)
    return Recall(out)


def recall_of(before: Mapping[str, str], after: Mapping[str, str]) -> Recall:
    """CoalWash's recall of one store's files after a cut against before it."""
    return recall(census(before), census(after))
