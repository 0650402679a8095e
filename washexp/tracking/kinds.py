"""The kinds of run washexp writes, each a typed record declared once.

Every run carries a :data:`KIND_TAG` naming its kind (:class:`Kind`), and the values that say
what it measured as tags of the same names as the record's fields (``method``, ``topn``,
``task``, ``k``, ``gates``...). The planner writes a record's :meth:`RunKind.tags`; a record
builder reads one back with :meth:`RunKind.from_row` (a row of ``tracking.reader.search``'s
frame) or one value with :meth:`RunKind.parse`, typed: MLflow keeps tags as text, and the text
is made and read here only. The stored names and values are those washexp has always written,
so an old store reads as a new one.
"""

from __future__ import annotations

import math
import types
import typing
from dataclasses import MISSING, dataclass, fields
from enum import StrEnum
from typing import Any, ClassVar, Self

from washexp.errors import WashexpError

KIND_TAG = "washexp.kind"


class Kind(StrEnum):
    ARM = "arm"
    """A compaction arm: one method at one top-N over a task set."""
    CONDITION = "condition"
    """One task of an arm."""
    CYCLES = "cycles"
    """An arm measured over cycles of compaction (``measurement=cycles``)."""
    CYCLES_CELL = "cycles-condition"
    """One (task, k) of a cycles arm."""
    CLIFF = "cliff"
    """A method measured against budget and length (``measurement=cliff``)."""
    CLIFF_CELL = "cliff-condition"
    """One (length, budget, task) of a cliff run."""
    MEASUREMENT = "measurement"
    """A wash measurement (ceiling, infinity, sawtooth, controlled, chain)."""
    WASH_STORE = "wash-store"
    """One store under one gauge arm of a ceiling or infinity measurement."""
    WASH_FIDELITY = "wash-fidelity"
    """One store of a controlled or chain measurement."""
    WASH_ARM = "wash-arm"
    """One arm (A or B) of the sawtooth."""
    DECISIONS = "decisions"
    """A compaction sweep's decisions (:mod:`washexp.compaction.sweep_decisions`): a top-level run
    that is no arm and no unit, which every selection of runs by kind leaves out."""
    LINK = "link"
    """A finished run reused under one more parent (``Tracker.link``)."""


TOP_KINDS = (Kind.ARM, Kind.MEASUREMENT, Kind.CYCLES, Kind.CLIFF)
"""The kinds of a sweep's top-level runs (the rest hang under them)."""


@dataclass(frozen=True)
class RunKind:
    """A run's kind and the tags it is written with, each field one tag of its name."""

    kind: ClassVar[Kind]
    optional: ClassVar[frozenset[str]] = frozenset()
    """Fields left untagged at their default (a missing tag reads as the default)."""
    legacy: ClassVar[dict[str, dict[str, Any]]] = {}
    """Per field, values older stores wrote and what they mean."""

    def tags(self) -> dict[str, str]:
        out = {KIND_TAG: self.kind.value}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in self.optional and value == f.default:
                continue
            out[f.name] = str(value).lower() if isinstance(value, bool) else str(value)
        return out

    @classmethod
    def parse(cls, name: str, text: Any) -> Any:
        """The typed value of tag ``name`` as a store holds it (None or NaN when a run lacks it)."""
        f = next(f for f in fields(cls) if f.name == name)
        if text is None or (isinstance(text, float) and math.isnan(text)):
            if f.default is MISSING:
                raise WashexpError(f"a {cls.kind.value} run without its {name!r} tag")
            return f.default
        if text in cls.legacy.get(name, {}):
            return cls.legacy[name][text]
        hint = typing.get_type_hints(cls)[name]
        kinds = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        if bool in kinds:
            if text not in ("true", "false"):
                raise WashexpError(f"a {cls.kind.value} run's {name!r} tag is {text!r}: expected true or false")
            return text == "true"
        if int in kinds:
            return int(text)
        return str(text)

    @classmethod
    def columns(cls) -> dict[str, str]:
        """Its tags' columns in a ``search`` frame (``tags.<name>``) -> the field's name."""
        return {f"tags.{f.name}": f.name for f in fields(cls)}

    @classmethod
    def from_row(cls, row) -> Self:
        """The record of one run, from its row in a ``search`` frame (columns ``tags.<name>``)."""
        return cls(**{f.name: cls.parse(f.name, row.get(f"tags.{f.name}")) for f in fields(cls)})


@dataclass(frozen=True)
class ArmRun(RunKind):
    kind = Kind.ARM
    optional = frozenset({"topn", "ranker"})
    legacy = {"topn": {"n/a": None}}  # Full's top-N before 2026-12-01

    method: str
    topn: int | None = None
    """None for a method that keeps the whole context (Full): no tag, never ``n/a``."""
    ranker: str = "jev"
    """Only a non-Jev ranker is tagged: Jev's arms keep the tags they had."""
    phase: str = "final"


@dataclass(frozen=True)
class ConditionRun(RunKind):
    kind = Kind.CONDITION

    task: str
    cohort: str


@dataclass(frozen=True)
class CyclesRun(RunKind):
    kind = Kind.CYCLES

    split: str
    measurement: str = "cycles"


@dataclass(frozen=True)
class DecisionsRun(RunKind):
    kind = Kind.DECISIONS

    sweep: str


@dataclass(frozen=True)
class CliffRun(RunKind):
    kind = Kind.CLIFF

    method: str
    measurement: str = "cliff"


@dataclass(frozen=True)
class CliffCell(RunKind):
    kind = Kind.CLIFF_CELL

    task: str
    length: int
    budget: int


@dataclass(frozen=True)
class CyclesCell(RunKind):
    kind = Kind.CYCLES_CELL

    task: str
    k: int
    cohort: str

    @property
    def cell(self) -> str:
        """``<task>/k=<k>``: the cell's name in an arm's ``conditions.json`` and a record."""
        return f"{self.task}/k={self.k}"


@dataclass(frozen=True)
class MeasurementRun(RunKind):
    kind = Kind.MEASUREMENT

    measurement: str
    washer: str
    gauge: str
    operator: str
    gates: bool = True


@dataclass(frozen=True)
class WashStoreRun(RunKind):
    kind = Kind.WASH_STORE

    store: str
    arm: str


@dataclass(frozen=True)
class WashFidelityRun(RunKind):
    kind = Kind.WASH_FIDELITY

    store: str
    gated: str
    arm: str = "off"


@dataclass(frozen=True)
class WashArmRun(RunKind):
    kind = Kind.WASH_ARM

    arm: str
    feed: str
