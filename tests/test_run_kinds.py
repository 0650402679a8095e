"""The run kinds (washexp.tracking.kinds): each written as the store has always held it, read back
typed, and the kind tag's name written nowhere else."""

from pathlib import Path

import pytest

import washexp
from washexp.errors import WashexpError
from washexp.tracking.kinds import (
    KIND_TAG,
    ArmRun,
    ConditionRun,
    CyclesCell,
    CyclesRun,
    MeasurementRun,
    WashArmRun,
    WashFidelityRun,
    WashStoreRun,
)

# the tags as stores made before the kinds were typed hold them: a change here breaks old stores
STORED = [
    (ArmRun("full", None, "jev", "final"), {"washexp.kind": "arm", "method": "full", "phase": "final"}),
    (
        ArmRun("S", 0, "bm25", "preflight"),
        {"washexp.kind": "arm", "method": "S", "topn": "0", "ranker": "bm25", "phase": "preflight"},
    ),
    (ConditionRun("t01", "primary"), {"washexp.kind": "condition", "task": "t01", "cohort": "primary"}),
    (CyclesRun("turns"), {"washexp.kind": "cycles", "measurement": "cycles", "split": "turns"}),
    (
        CyclesCell("t01", 3, "control"),
        {"washexp.kind": "cycles-condition", "task": "t01", "k": "3", "cohort": "control"},
    ),
    (
        MeasurementRun("ceiling", "plain", "coalwash", "seed", False),
        {
            "washexp.kind": "measurement",
            "measurement": "ceiling",
            "washer": "plain",
            "gauge": "coalwash",
            "operator": "seed",
            "gates": "false",
        },
    ),
    (WashStoreRun("s1", "off"), {"washexp.kind": "wash-store", "store": "s1", "arm": "off"}),
    (
        WashFidelityRun("s1", "coalwash"),
        {"washexp.kind": "wash-fidelity", "store": "s1", "arm": "off", "gated": "coalwash"},
    ),
    (WashArmRun("A", "feed1"), {"washexp.kind": "wash-arm", "arm": "A", "feed": "feed1"}),
]


def row(tags: dict[str, str]) -> dict[str, str]:
    """A run's row as ``tracking.reader.search`` gives it."""
    return {f"tags.{k}": v for k, v in tags.items()}


@pytest.mark.parametrize(("record", "tags"), STORED, ids=[f"{type(r).__name__}-{i}" for i, (r, _) in enumerate(STORED)])
def test_each_kind_writes_the_stored_tags_and_reads_them_back_typed(record, tags):
    assert record.tags() == tags
    assert type(record).from_row(row(tags)) == record


def test_old_and_missing_values_read_as_they_always_meant():
    assert ArmRun.from_row(row({"method": "full", "topn": "n/a", "phase": "final"})).topn is None  # before 2026-12-01
    assert ArmRun.from_row({"tags.method": "H", "tags.topn": float("nan"), "tags.phase": "final"}).topn is None
    assert MeasurementRun.parse("gates", None) is True  # a run from before the gates tag
    assert CyclesCell.from_row(row({"task": "t", "k": "2", "cohort": "primary"})).cell == "t/k=2"


def test_a_tag_that_cannot_be_read_is_an_error_never_a_default():
    with pytest.raises(WashexpError, match="gates"):
        MeasurementRun.parse("gates", "maybe")
    with pytest.raises(WashexpError, match="method"):
        ArmRun.from_row(row({"topn": "2"}))


def test_the_kind_tag_is_named_once():
    root = Path(washexp.__file__).parent
    found = [p.relative_to(root) for p in root.rglob("*.py") if KIND_TAG in p.read_text(encoding="utf-8")]
    assert [str(p) for p in found] == ["tracking/kinds.py"]
