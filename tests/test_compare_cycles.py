"""``washexp compare`` of cycles records, on records built in memory (fast: no sweep, no store;
the end-to-end path, a real cycles sweep compared by sweep id and by its exported record, is
``tests/test_cycles.py``'s).

Traps guarded: a fact the last cycle dropped in B reads as "no regression"; a chain that failed in B
hides the facts it lost or is averaged out of the survival; a missing k reads as complete; a cycles
record is compared as a single-compaction one.
"""

from __future__ import annotations

import pytest

from washexp.compaction.records import compare_cycles as cycles
from washexp.compare import compare, kind
from washexp.errors import ConfigError


def _record(tasks: list[tuple], facts: list[tuple]) -> dict:
    """``tasks``: (arm, cohort, task, k, survival, failed); ``facts``: (arm, task, k, field, kept)."""
    return {
        "schema": 1,
        "topic": "compaction",
        "provenance": {"measurement": "cycles"},
        "data": {
            "cycles_tasks": [
                {"arm": a, "cohort": c, "task": t, "k": k, "survival": s, "failed": f} for a, c, t, k, s, f in tasks
            ],
            "cycles_facts": [{"arm": a, "task": t, "k": k, "field": f, "kept": kept} for a, t, k, f, kept in facts],
        },
    }


def _study(pay_y: bool = True, failed_backup: bool = False) -> dict:
    """S top0 at k = 1 and 2 on payment (primary, facts x and y) and backup (control, fact x)."""
    tasks = [
        ("S top0", "primary", "payment", 1, 1.0, False),
        ("S top0", "primary", "payment", 2, (1 + pay_y) / 2, False),
        ("S top0", "control", "backup", 1, 1.0, False),
        ("S top0", "control", "backup", 2, None if failed_backup else 1.0, failed_backup),
    ]
    facts = [
        ("S top0", "payment", 1, "x", True),
        ("S top0", "payment", 1, "y", True),
        ("S top0", "payment", 2, "x", True),
        ("S top0", "payment", 2, "y", pay_y),
        ("S top0", "backup", 1, "x", True),
    ]
    return _record(tasks, facts if failed_backup else [*facts, ("S top0", "backup", 2, "x", True)])


def test_a_record_against_itself_has_every_cell_and_no_loss():
    found = cycles.compare(_study(), _study())
    assert (found.cells, found.missing_cells, found.needles_lost, found.worst_drop) == (6, 0, 0, 0.0)
    assert not found.regressed(0, 0.0) and found.lines == [] and found.topic == "compaction cycles"
    assert [(m["arm"], m["cohort"], m["k"], m["n_tasks"], m["mean_a"]) for m in found.data["means"]] == [
        ("S top0", "control", 1, 1, 1.0),
        ("S top0", "control", 2, 1, 1.0),
        ("S top0", "primary", 1, 1, 1.0),
        ("S top0", "primary", 2, 1, 1.0),
    ]


def test_a_fact_lost_after_the_last_cycle_is_named_with_its_arm_k_task_and_field():
    found = cycles.compare(_study(), _study(pay_y=False))
    assert found.needles_lost == 1 and found.worst_drop == pytest.approx(0.5)
    assert found.lines == [
        "LOST in B: S top0 · k=2 · payment · y",
        "survival S top0 k=2 (primary): 1.000 -> 0.500 (B - A -0.500, 95% [-0.500, -0.500], n=1)",
    ]
    assert found.data["facts_lost_in_b"] == [
        {"arm": "S top0", "k": 2, "cohort": "primary", "task": "payment", "field": "y"}
    ]
    assert found.regressed(0, 1.0) and not found.regressed(1, 0.5)
    gained = cycles.compare(_study(pay_y=False), _study())  # B keeps more: no loss, no drop
    assert gained.needles_lost == 0 and gained.worst_drop == 0.0 and gained.lines == []


def test_a_chain_that_failed_in_b_loses_every_fact_a_kept_and_counts_zero():
    found = cycles.compare(_study(), _study(failed_backup=True))
    assert found.missing_cells == 0  # the failed condition keeps its cells
    assert found.data["facts_lost_in_b"] == [
        {"arm": "S top0", "k": 2, "cohort": "control", "task": "backup", "field": "x"}
    ]
    mean = next(m for m in found.data["means"] if (m["cohort"], m["k"]) == ("control", 2))
    assert (mean["mean_a"], mean["mean_b"]) == (1.0, 0.0) and found.worst_drop == 1.0
    both = cycles.compare(_study(failed_backup=True), _study(failed_backup=True))  # failed on both sides
    assert (both.cells, both.missing_cells, both.needles_lost) == (6, 0, 0)
    # a failed condition whose task's fields no record names is one cell, lost
    a = _record([("S top0", "primary", "t", 1, 1.0, False)], [("S top0", "t", 1, "x", True)])
    b = _record([("S top0", "primary", "t", 1, None, True)], [])
    assert cycles.cells(*cycles._tables(b, "B"), "B", {}) == {("S top0", 1, "primary", "t", cycles.UNNAMED): False}
    assert cycles.cells(*cycles._tables(a, "A"), "A", {}) == {("S top0", 1, "primary", "t", "x"): True}
    lost = cycles.compare(a, b)
    # ...and one whose fields A names has those cells: each kept in A is lost in B
    assert lost.needles_lost == 1 and lost.missing == [] and lost.data["facts_lost_in_b"][0]["field"] == "x"


def test_a_condition_with_no_fact_seen_has_no_survival_and_is_left_out_of_the_mean():
    a = _study()
    a["data"]["cycles_tasks"][3]["survival"] = None  # backup k=2: nothing seen by its last cycle
    found = cycles.compare(a, _study())
    assert [(m["cohort"], m["k"]) for m in found.data["means"]] == [("control", 1), ("primary", 1), ("primary", 2)]
    # two tasks of one (arm, cohort, k), each with a survival on one side only: no mean for it, the
    # later ones still compared
    tasks = [("S top0", "control", "backup", 1, 1.0, False), ("S top0", "control", "other", 1, None, False)]
    tasks += [("S top0", "primary", "payment", 1, 1.0, False)]
    facts = [("S top0", "payment", 1, "x", True)]
    swapped = [tasks[0][:4] + (None, False), tasks[1][:4] + (1.0, False), tasks[2]]
    found = cycles.compare(_record(tasks, facts), _record(swapped, facts))
    assert [(m["cohort"], m["k"]) for m in found.data["means"]] == [("primary", 1)]
    # no survival on any side: no mean at all, and no drop
    none = _record([("S top0", "primary", "payment", 1, None, False)], facts)
    found = cycles.compare(none, none)
    assert found.data["means"] == [] and found.worst_drop == 0.0 and not found.regressed(0, 0.0)


def test_a_missing_k_is_incomplete_and_named_unless_a_subset_is_allowed():
    b = _study()
    b["data"]["cycles_tasks"] = [t for t in b["data"]["cycles_tasks"] if t["k"] != 2]
    b["data"]["cycles_facts"] = [f for f in b["data"]["cycles_facts"] if f["k"] != 2]
    found = cycles.compare(_study(), b)
    assert found.missing == [("S top0", 2)] and found.missing_cells == 3 and found.regressed(0, 1.0)
    subset = cycles.compare(_study(), b, allow_subset=True)
    assert subset.subset and not subset.regressed(0, 0.0) and subset.cells == 6
    assert [m["k"] for m in subset.data["means"]] == [1, 1]  # only the common cells' tasks


def test_a_record_of_another_shape_is_an_input_error_naming_the_side():
    with pytest.raises(ConfigError, match=r"^B: the record has no cycles_tasks table"):
        cycles.compare(_study(), {"topic": "compaction", "data": {"cycles_facts": []}})
    bad = _study()
    del bad["data"]["cycles_facts"][0]["kept"]
    with pytest.raises(ConfigError, match=r"^A: cycles_facts row 0 lacks kept"):
        cycles.compare(bad, _study())
    with pytest.raises(ConfigError, match=r"^B: cycles_facts row 0 lacks kept"):
        cycles.compare(_study(), bad)
    text_k = _study()
    text_k["data"]["cycles_tasks"][1]["k"] = "2"
    with pytest.raises(ConfigError, match=r'^A: cycles_tasks row 1: k is "2", not a whole number$'):
        cycles.compare(text_k, _study())
    with pytest.raises(ConfigError, match=r"^A: the record has no cycles_tasks table"):
        cycles.compare({"topic": "compaction", "data": {"cycles_facts": []}}, _study())
    orphan = _study()
    orphan["data"]["cycles_facts"].append({"arm": "H top0", "task": "payment", "k": 1, "field": "x", "kept": True})
    with pytest.raises(ConfigError, match=r"^B: cycles_facts names H top0 · payment · k=1, which has no task row"):
        cycles.compare(_study(), orphan)
    with pytest.raises(ConfigError, match=r"^A: cycles_facts names H top0 · payment · k=1, which has no task row"):
        cycles.compare(orphan, _study())
    with pytest.raises(ConfigError, match="no arm x k x cohort x task x field cell in common"):
        cycles.compare(_study(), _record([("H top0", "primary", "payment", 1, 1.0, False)], []))


def test_a_cycles_record_compares_with_cycles_records_only():
    single = {"topic": "compaction", "provenance": {"measurement": "single"}, "data": {}}
    assert (kind(_study()), kind(single), kind({"topic": "wash"})) == ("compaction-cycles", "compaction", "wash")
    assert kind({"topic": "compaction", "provenance": "not a dict"}) == "compaction"
    with pytest.raises(ConfigError, match="^A is a compaction-cycles record and B a compaction record"):
        compare(_study(), single)
    with pytest.raises(ConfigError, match="^A is a compaction record and B a compaction-cycles record"):
        compare(single, _study())
    assert compare(_study(), _study(pay_y=False)).needles_lost == 1  # dispatched to the cycles comparer
