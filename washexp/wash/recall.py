"""Structured-token recall: how many of a store's structured values a cut kept, per class.

Counted by washexp's port of CoalWash's fidelity-gate inventory (:mod:`washexp.wash.inventory`,
its public functions only), never by what a washer says of itself (a tool does not grade
itself). The classes are the gate's value classes:

    wikilinks, dates, versions, links, frontmatter, codespans, quotes, numbers

The census of a store (its top-level ``*.md`` files, as :func:`washexp.wash.files.read_md`
gives them) is a multiset per class:

- the seven single-line classes count each value's occurrences over the store's **distinct
  lines** (all files together, each line once, as the gate's multiset layer counts them): a line
  stated twice verbatim is one statement, so cutting an exact duplicate line costs nothing;
- ``frontmatter`` counts each top-level key once per file that declares it. A file whose block
  cannot be read (a cut through its closing ``---``) declares no key: its keys count as lost.

Recall of *after* against *before* is the multiset intersection over the before count:
``sum(min(before[v], after[v])) / sum(before[v])``, per class and over all classes. A value an
after side states more often, or newly, is no gain. An empty class has no recall (``None``,
shown ``n/a``), never 100 %.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from washexp.wash.inventory import frontmatter_keys, lines, token_lists

CLASSES = ("wikilinks", "dates", "versions", "links", "frontmatter", "codespans", "quotes", "numbers")
"""The recall classes, in the gate's order (its ``fencedLines`` are not structured tokens)."""


@dataclass(frozen=True)
class Census:
    """Per class, each value and how often the store states it (see the module doc)."""

    counts: dict[str, Counter]
    unreadable_frontmatter: tuple[str, ...] = ()
    """Files whose frontmatter block could not be read (their keys are not in the census)."""

    @property
    def total(self) -> int:
        return sum(sum(c.values()) for c in self.counts.values())


def census(files: Mapping[str, str]) -> Census:
    """The census of a store's files (name -> text, in store order)."""
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
    return Census({cls: counts[cls] for cls in CLASSES}, tuple(unreadable))


@dataclass(frozen=True)
class ClassRecall:
    total: int
    kept: int
    lost: dict[str, int]
    """value -> how many of its occurrences went."""

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
    """Recall of ``after`` against ``before``, per class (the multiset intersection; module doc)."""
    out = {}
    for cls in CLASSES:
        b, a = before.counts[cls], after.counts[cls]
        kept = sum(min(n, a[v]) for v, n in b.items())
        lost = {v: n - a[v] for v, n in b.items() if a[v] < n}
        out[cls] = ClassRecall(sum(b.values()), kept, lost)
    return Recall(out)


def recall_of(before: Mapping[str, str], after: Mapping[str, str]) -> Recall:
    """Recall of one store's files after a cut against before it."""
    return recall(census(before), census(after))
