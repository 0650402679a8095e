"""Where each fact was lost: a condition's per-fact ledger and its four loss cells.

Every graded fact has two observations: whether the compacted context still holds it (the
model-free needle check, :mod:`washexp.compaction.scoring.retention`) and whether the reader answered it
right (:mod:`washexp.compaction.scoring.grading`). Crossed, they give four cells:

- ``kept_answered``: kept and answered;
- ``kept_missed``: kept but missed (reading loss: the evidence was there);
- ``dropped_missed``: dropped and missed (compaction loss);
- ``dropped_answered``: dropped but answered (recovered from elsewhere, or guessed).

A generation with no context (invalid, or a part failed) is all ``dropped_missed``: its facts
were never in front of the reader, and the study scores its answers 0. The ledger reads grades
(booleans) and the retention check, never an expected value: only the scorer does.

Within a condition every generation has the same answer slots and every answer the same fields,
so a cell's fraction is its count over the rows, the study's hierarchical mean; it follows that
``kept_answered + kept_missed`` is the condition's retention and ``kept_answered +
dropped_answered`` its fact accuracy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from typing import NamedTuple

from washexp.compaction.scoring.grading import AnswerGrade

LEDGER_TABLE = "fact_ledger.json"


class Cell(StrEnum):
    KEPT_ANSWERED = "kept_answered"
    KEPT_MISSED = "kept_missed"
    DROPPED_MISSED = "dropped_missed"
    DROPPED_ANSWERED = "dropped_answered"

    @classmethod
    def of(cls, kept: bool, answered: bool) -> Cell:
        if kept:
            return cls.KEPT_ANSWERED if answered else cls.KEPT_MISSED
        return cls.DROPPED_ANSWERED if answered else cls.DROPPED_MISSED


CELL_NAMES = {
    Cell.KEPT_ANSWERED: "kept and answered",
    Cell.KEPT_MISSED: "kept but missed (reading loss)",
    Cell.DROPPED_MISSED: "dropped and missed (compaction loss)",
    Cell.DROPPED_ANSWERED: "dropped but answered (recovered or guessed)",
}


class LedgerRow(NamedTuple):
    """One fact of one answer (or, without a reader, of one generation: ``answer``, ``answered``
    and ``cell`` are None)."""

    task: str
    method: str
    topn: int | None
    generation: int
    repeat: int | None
    answer: int | None
    field: str
    context: bool
    """Whether the generation has a context at all (False: invalid or failed, every fact dropped)."""
    kept: bool
    answered: bool | None
    cell: str | None
    """A :class:`Cell` value; None without a reader."""


def ledger(
    where: Mapping, gens: Sequence, grades: Mapping[int, Sequence[AnswerGrade]] | None, slots: int, answers: int
) -> list[LedgerRow]:
    """The condition's ledger. ``grades``: generation -> its answers' grades (None: no reader);
    ``slots``: answers per generation (answers x repeats), each a row per field even where there is
    no context; ``answers``: answers per repeat (a slot's repeat is ``slot // answers``)."""
    rows = []
    for gen in gens:
        kept = {f: gen.valid and not m for f, m in gen.missing.items()}
        if grades is None:
            rows += [
                LedgerRow(where["task"], where["method"], where["topn"], gen.g, None, None, f, gen.valid, k, None, None)
                for f, k in kept.items()
            ]
            continue
        graded: Sequence[AnswerGrade | None] = grades.get(gen.g) or [None] * slots
        for i, gr in enumerate(graded):
            for f, k in kept.items():
                ok = bool(gr is not None and gr.fields.get(f, False))
                rows.append(
                    LedgerRow(
                        where["task"],
                        where["method"],
                        where["topn"],
                        gen.g,
                        i // answers,
                        i % answers,
                        f,
                        gen.valid,
                        k,
                        ok,
                        Cell.of(k, ok).value,
                    )
                )
    return rows


class Cells(NamedTuple):
    """The four cells' counts (rows of a ledger, or summed over conditions)."""

    kept_answered: int = 0
    kept_missed: int = 0
    dropped_missed: int = 0
    dropped_answered: int = 0

    @property
    def total(self) -> int:
        return sum(self)

    def fractions(self) -> dict[Cell, float] | None:
        """Each cell over all rows; None for an empty ledger (n/a, never 0)."""
        if not self.total:
            return None
        return {c: getattr(self, c.value) / self.total for c in Cell}

    def __add__(self, other: Cells) -> Cells:  # type: ignore[override]  # cell by cell, not tuple concatenation
        return Cells(*(a + b for a, b in zip(self, other, strict=True)))


def count(cells: Iterable[str | None]) -> Cells | None:
    """The cells of a ledger's rows; None when its rows have no reader (``cell`` None)."""
    values = list(cells)
    if not values or any(v is None for v in values):
        return None
    return Cells(*(sum(v == c.value for v in values) for c in Cell))


def metrics(rows: Sequence[LedgerRow]) -> dict[str, float]:
    """``facts_<cell>``: each cell's fraction of the condition (empty without a reader)."""
    cells = count(r.cell for r in rows)
    shares = cells.fractions() if cells else None
    return {f"facts_{c.value}": v for c, v in shares.items()} if shares else {}
