"""``washexp compare`` fails closed, on records built in memory (fast: no sweep, no store).

Traps guarded: a B that lacks cells of A reads as "no regression"; a record with no rows, or rows of
another shape, reads as "nothing lost"; a needle lost over several rounds counts (and is named) once
per round; a condition that failed in B hides the fields it lost.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from washexp.compaction.records import compare as compaction
from washexp.compare import Findings, Shape, compare, coverage_lines, missing_groups, rows
from washexp.errors import ConfigError
from washexp.wash.records import compare as wash

# ---------------------------------------------------------------- shared: cells, rows, the verdict


def test_missing_cells_are_named_by_their_shortest_wholly_missing_prefix():
    a = {("S", "p", "pay", "x"), ("S", "p", "pay", "y"), ("S", "p", "cko", "x"), ("H", "p", "pay", "x")}
    assert missing_groups(a, a) == []
    assert missing_groups(a, set()) == [("H",), ("S",)]
    assert missing_groups(a, {("S", "p", "cko", "x"), ("H", "p", "pay", "x")}) == [("S", "p", "pay")]
    assert missing_groups(a, a - {("S", "p", "pay", "y")}) == [("S", "p", "pay", "y")]
    # cells of B that A lacks are no concern of A's
    assert missing_groups({("S", "p")}, {("S", "p"), ("H", "p")}) == []


def test_a_record_without_rows_or_of_an_unknown_shape_is_an_input_error():
    good = {"topic": "t", "data": {"tab": [{"k": 1, "j": 2}]}}
    assert rows(good, "A", "tab", {"k": Shape.WHOLE}, key=("k",)) == [{"k": 1, "j": 2}]
    with pytest.raises(ConfigError, match=r"^B: the record has no other table"):
        rows(good, "B", "other", {"k": Shape.WHOLE}, key=("k",))
    with pytest.raises(ConfigError, match="has no rows"):
        rows({"data": {"tab": []}}, "A", "tab", {"k": Shape.WHOLE}, key=("k",))
    assert rows({"data": {"tab": []}}, "A", "tab", {"k": Shape.WHOLE}, key=("k",), empty_ok=True) == []
    with pytest.raises(ConfigError, match=r"^A: tab row 1 lacks m, z"):
        rows(
            {"data": {"tab": [{"m": 1, "z": 1}, {"k": 1}]}},
            "A",
            "tab",
            {"m": Shape.WHOLE, "z": Shape.WHOLE},
            key=("m",),
        )
    with pytest.raises(ConfigError, match="not an object"):
        rows({"data": {"tab": ["row"]}}, "A", "tab", {"k": Shape.WHOLE}, key=("k",))
    with pytest.raises(ConfigError, match="no tab table"):
        rows({"data": "nonsense"}, "A", "tab", {"k": Shape.WHOLE}, key=("k",))


def test_a_value_of_another_shape_is_an_input_error_naming_the_row_and_key():
    """A record is untrusted: a string where a number belongs was a traceback (ValueError in
    float()), a string where a list belongs was read as the set of its characters."""
    fits = {
        Shape.TEXT: (["x", ""], [1, None, ["x"]]),
        Shape.WHOLE: ([0, 3, -1], [1.0, True, "1", None]),
        Shape.NUMBER: ([0, 0.5, -2], [True, "0.5", None, float("nan"), float("inf")]),
        Shape.NUMBER_OR_NULL: ([None, 1, 0.25], [False, "x", float("nan")]),
        Shape.FLAG: ([True, False], [0, 1, "true", None]),
        Shape.TEXTS: ([[], ["a", "b"]], ["ab", ["a", 1], None]),
        Shape.TEXT_BY_TEXT: ([{}, {"n1": "v"}], [{"n1": 1}, ["v"], "v"]),
    }
    for shape, (good, bad) in fits.items():
        assert all(shape.fits(v) for v in good), shape
        assert not any(shape.fits(v) for v in bad), shape
    table = {"data": {"tab": [{"k": 1, "x": "a"}, {"k": "2", "x": "b"}]}}
    assert rows(table, "A", "tab", {"x": Shape.TEXT}, key=("x",)) == table["data"]["tab"]
    with pytest.raises(ConfigError, match=r'^B: tab row 1: k is "2", not a whole number$'):
        rows(table, "B", "tab", {"k": Shape.WHOLE, "x": Shape.TEXT}, key=("x",))
    # the value as written (not escaped), cut at 60 characters
    with pytest.raises(ConfigError, match=r'^A: tab row 0: k is "étape", not a whole number$'):
        rows({"data": {"tab": [{"k": "étape"}]}}, "A", "tab", {"k": Shape.WHOLE}, key=("k",))
    with pytest.raises(ConfigError) as long:
        rows({"data": {"tab": [{"k": "x" * 100}]}}, "A", "tab", {"k": Shape.WHOLE}, key=("k",))
    assert str(long.value) == f'A: tab row 0: k is "{"x" * 59}, not a whole number'
    bad = _study()
    bad["data"]["compaction_fields"][0]["retained"] = "abc"
    with pytest.raises(ConfigError, match=r'^B: compaction_fields row 0: retained is "abc", not a number$'):
        compaction.compare(_study(), bad)
    lost_as_text = _kept()
    lost_as_text["data"]["wash_rounds"][0]["lost"] = "n1"
    with pytest.raises(ConfigError, match=r'^A: wash_rounds row 0: lost is "n1", not a list of text$'):
        wash.compare(lost_as_text, _kept())


def test_missing_cells_are_a_regression_unless_a_subset_was_allowed():
    assert not Findings("t").regressed(0, 0.05)
    assert Findings("t", missing_cells=1).regressed(10, 1.0)
    assert not Findings("t", missing_cells=1, subset=True).regressed(0, 0.05)
    assert not Findings("t", needles_lost=2, worst_drop=0.05).regressed(2, 0.05)  # at the thresholds: passes
    assert Findings("t", needles_lost=3).regressed(2, 0.05)
    assert Findings("t", worst_drop=0.051).regressed(2, 0.05)


def test_the_first_line_says_what_was_compared():
    assert coverage_lines(Findings("t", needles_lost=1, worst_drop=0.25), "REGRESSION") == [
        "REGRESSION: 1 needle(s) lost in B, worst mean drop +0.250"
    ]
    partial = Findings("t", cells=5, missing=[("S", "pay")], missing_cells=2)
    assert coverage_lines(partial, "REGRESSION") == [
        "REGRESSION: 0 needle(s) lost in B, worst mean drop +0.000; B lacks 2 of A's 5 cells",
        "MISSING in B: S · pay",
    ]
    partial.subset = True
    first, verdict, named = coverage_lines(partial, "no regression")
    assert first == "SUBSET: only the 3 of A's 5 cells that B has were compared (--allow-subset)"
    assert verdict.startswith("no regression: ") and named == "MISSING in B: S · pay"


def test_records_of_two_families_do_not_compare():
    with pytest.raises(ConfigError, match="compare like with like"):
        compare({"topic": "wash"}, {"topic": "compaction"})
    with pytest.raises(ConfigError, match="unknown comparer"):
        compare({"topic": "nope"}, {"topic": "nope"})


# ---------------------------------------------------------------- compaction


def _task(arm: str, task: str, retention: float | None, failed: bool = False, cohort: str = "primary") -> dict:
    return {"arm": arm, "cohort": cohort, "task": task, "failed": failed, "retention": retention}


def _record(tasks: list[dict], fields: list[tuple[str, str, str, float]]) -> dict:
    for t in tasks:
        t.setdefault("fact_accuracy", None)
    rows_ = [{"arm": a, "task": t, "field": f, "retained": r} for a, t, f, r in fields]
    return {"schema": 1, "topic": "compaction", "data": {"compaction_tasks": tasks, "compaction_fields": rows_}}


def _study(pay_y: float = 1.0) -> dict:
    """S top3 on payment (primary) and backup (control); Full on payment."""
    return _record(
        [_task("S top3", "payment", 0.5 + pay_y / 2), _task("S top3", "backup", 1.0, cohort="control")]
        + [_task("Full", "payment", 1.0)],
        [("S top3", "payment", "x", 1.0), ("S top3", "payment", "y", pay_y), ("S top3", "backup", "x", 1.0)]
        + [("Full", "payment", "x", 1.0), ("Full", "payment", "y", 1.0)],
    )


def test_a_compaction_record_against_itself_has_every_cell_and_no_loss():
    found = compaction.compare(_study(), _study())
    assert (found.cells, found.missing_cells, found.needles_lost, found.worst_drop) == (5, 0, 0, 0.0)
    assert not found.regressed(0, 0.0) and found.lines == []
    assert [(m["metric"], m["arm"], m["cohort"], m["n_tasks"]) for m in found.data["means"]] == [
        ("retention", "Full", "primary", 1),
        ("retention", "S top3", "control", 1),
        ("retention", "S top3", "primary", 1),
    ]


def test_a_field_lost_in_b_is_named_with_its_arm_task_and_field():
    found = compaction.compare(_study(), _study(pay_y=0.5))
    assert found.needles_lost == 1 and found.worst_drop == pytest.approx(0.25)
    assert found.lines[0] == "LOST in B: S top3 · payment · y (retained 1.00 -> 0.50)"
    assert found.data["fields_lost_in_b"] == [
        {"arm": "S top3", "cohort": "primary", "task": "payment", "field": "y", "retained_a": 1.0, "retained_b": 0.5}
    ]
    mean = found.data["means"][2]
    assert (mean["arm"], mean["cohort"], mean["mean_a"], mean["mean_b"]) == ("S top3", "primary", 1.0, 0.75)
    # a field B retained better is no loss
    assert compaction.compare(_study(pay_y=0.5), _study()).needles_lost == 0


def test_a_b_without_a_task_or_an_arm_of_a_is_incomplete_and_names_it():
    b = _study()
    b["data"]["compaction_tasks"] = [t for t in b["data"]["compaction_tasks"] if t["arm"] != "Full"]
    b["data"]["compaction_fields"] = [f for f in b["data"]["compaction_fields"] if f["arm"] != "Full"]
    found = compaction.compare(_study(), b)
    assert found.missing == [("Full",)] and found.missing_cells == 2 and found.regressed(0, 0.05)
    b["data"]["compaction_fields"] = [f for f in b["data"]["compaction_fields"] if f["task"] != "backup"]
    b["data"]["compaction_tasks"] = [t for t in b["data"]["compaction_tasks"] if t["task"] != "backup"]
    assert compaction.compare(_study(), b).missing == [("Full",), ("S top3", "control")]  # backup: its only task
    one = _study()
    one["data"]["compaction_fields"] = [f for f in one["data"]["compaction_fields"] if f["field"] != "y"]
    assert compaction.compare(_study(), one).missing == [("Full", "primary", "payment", "y")] + [
        ("S top3", "primary", "payment", "y")
    ]


def test_allow_subset_compares_only_the_common_cells():
    b = _study(pay_y=0.0)
    b["data"]["compaction_tasks"] = [t for t in b["data"]["compaction_tasks"] if t["task"] != "backup"]
    b["data"]["compaction_fields"] = [f for f in b["data"]["compaction_fields"] if f["task"] != "backup"]
    found = compaction.compare(_study(), b, allow_subset=True)
    assert found.subset and (found.cells, found.missing_cells) == (5, 1) and found.needles_lost == 1
    assert {m["cohort"] for m in found.data["means"]} == {"primary"}  # backup (control) not compared
    found = compaction.compare(_study(), _study(), allow_subset=True)
    assert not found.regressed(0, 0.0)


def test_nothing_in_common_is_an_input_error():
    other = _record([_task("H top1", "refactor", 1.0)], [("H top1", "refactor", "z", 1.0)])
    with pytest.raises(ConfigError, match="no arm x cohort x task x field cell in common"):
        compaction.compare(_study(), other, allow_subset=True)


def test_a_condition_failed_in_b_loses_every_field_a_retained():
    b = _study()
    b["data"]["compaction_tasks"][0] |= {"failed": True, "retention": 0.0}
    b["data"]["compaction_fields"] = [f for f in b["data"]["compaction_fields"] if f["arm"] != "S top3"]
    b["data"]["compaction_fields"] += [{"arm": "S top3", "task": "backup", "field": "x", "retained": 1.0}]
    found = compaction.compare(_study(), b)
    assert found.missing_cells == 0 and found.needles_lost == 2
    assert [(r["task"], r["field"], r["retained_b"]) for r in found.data["fields_lost_in_b"]] == [
        ("payment", "x", 0.0),
        ("payment", "y", 0.0),
    ]
    # failed in A as well: nothing lost, nothing missing
    assert compaction.compare(b, b).needles_lost == 0


def test_a_failed_condition_whose_fields_no_record_names_is_one_cell():
    lone = _record([_task("S top0", "solo", 0.0, failed=True)], [])
    found = compaction.compare(lone, lone)
    assert found.cells == 1 and found.needles_lost == 0
    done = _record([_task("S top0", "solo", 1.0)], [("S top0", "solo", "f", 1.0)])
    assert compaction.compare(done, lone).needles_lost == 1  # solo's field f: retained 1 in A, 0 in B


def test_a_blind_compaction_record_is_refused():
    blind = _study()
    blind["data"]["compaction_fields"] = []  # what every export wrote before the tables were read
    with pytest.raises(ConfigError, match=r"^B: 3 finished condition\(s\) without compaction_fields rows"):
        compaction.compare(_study(), blind)
    stray = _study()
    stray["data"]["compaction_fields"].append({"arm": "H top5", "task": "payment", "field": "x", "retained": 1.0})
    with pytest.raises(ConfigError, match="names H top5 · payment, which has no task row"):
        compaction.compare(stray, _study())
    with pytest.raises(ConfigError, match="compaction_tasks table has no rows"):
        compaction.compare(_study(), _record([], []))


# ---------------------------------------------------------------- wash

NEEDLES = {"m1": "[[deploy-runbook]]", "m2": "v2.31.0", "m3": "never page twice"}


def _wash(lost: dict[tuple[str, int], list[str]], muscle: dict[str, dict[str, str]] | None = None) -> dict:
    """Rounds of the ceiling measurement: (store, round) -> the muscle ids lost so far."""
    rounds = [
        {"measurement": "ceiling", "washer": "reference", "gauge": "off (off)", "store": s, "round": r, "lost": ids}
        for (s, r), ids in lost.items()
    ]
    muscle = muscle or {"lean": NEEDLES, "plump": {"m1": "`retry_limit`"}}
    return {
        "schema": 1,
        "topic": "wash",
        "data": {"wash_rounds": rounds, "wash_muscle": [{"store": s, "needles": n} for s, n in muscle.items()]},
    }


def _kept() -> dict:
    return _wash({("lean", 1): [], ("lean", 2): [], ("lean", 3): [], ("plump", 1): []})


def test_a_needle_lost_over_several_rounds_is_named_and_counted_once():
    b = _wash({("lean", 1): [], ("lean", 2): ["m2"], ("lean", 3): ["m2", "m3"], ("plump", 1): []})
    found = wash.compare(_kept(), b)
    assert found.needles_lost == 2 and found.missing_cells == 0
    lost = [line for line in found.lines if line.startswith("LOST")]
    assert lost == [
        "LOST in B: lean m2 'v2.31.0' (version) at round 2 [ceiling · reference · off (off)]",
        "LOST in B: lean m3 'never page twice' (prose) at round 3 [ceiling · reference · off (off)]",
    ]
    assert [(r["id"], r["round"], r["class"]) for r in found.data["lost_in_b"]] == [
        ("m2", 2, "version"),
        ("m3", 3, "prose"),
    ]
    (lean, plump) = found.data["store_means"]
    assert (lean["store"], lean["round"], lean["kept_a"], lean["kept_b"]) == ("lean", 3, 1.0, pytest.approx(1 / 3))
    assert found.worst_drop == pytest.approx(2 / 3) and plump["drop"] == 0
    assert "store mean: lean [ceiling · reference · off (off)] muscle kept 1.000 -> 0.333" in found.lines
    assert "cliff: version first falls at round 2 in B (never in A) [ceiling · reference · off (off)]" in found.lines


def test_a_needle_lost_in_both_at_the_same_round_is_no_regression():
    a = _wash({("lean", 1): ["m1"], ("lean", 2): ["m1"], ("plump", 1): []})
    b = _wash({("lean", 1): [], ("lean", 2): ["m1"], ("plump", 1): []})
    assert wash.compare(a, a).needles_lost == 0
    assert wash.compare(b, a).needles_lost == 1  # a lost it a round earlier
    assert wash.compare(a, b).needles_lost == 0
    found = wash.compare(_wash({("lean", 1): ["m1"], ("plump", 1): []}), _wash({("lean", 1): [], ("plump", 1): []}))
    cliff = {side: [c["round"] for c in cs if c["class"] == "wikilink"] for side, cs in found.data["cliffs"].items()}
    assert cliff == {"A": [1], "B": [None]}


def test_a_wash_b_without_a_store_or_a_round_of_a_is_incomplete():
    only_lean = _wash({("lean", 1): [], ("lean", 2): [], ("lean", 3): []})
    found = wash.compare(_kept(), only_lean)
    assert found.missing == [("ceiling", "reference", "off (off)", "plump")] and found.regressed(0, 0.05)
    short = _wash({("lean", 1): [], ("lean", 2): [], ("plump", 1): []})
    assert wash.compare(_kept(), short).missing == [("ceiling", "reference", "off (off)", "lean", 3)]
    fewer = _wash(
        {("lean", 1): [], ("lean", 2): [], ("lean", 3): [], ("plump", 1): []},
        {"lean": {"m1": NEEDLES["m1"], "m2": NEEDLES["m2"]}, "plump": {"m1": "`retry_limit`"}},
    )
    found = wash.compare(_kept(), fewer)
    assert found.missing == [("ceiling", "reference", "off (off)", "lean", r, "m3") for r in (1, 2, 3)]
    assert found.missing_cells == 3 and found.cells == 10
    subset = wash.compare(_kept(), only_lean, allow_subset=True)
    assert subset.subset and not subset.regressed(0, 0.05) and subset.missing_cells == 1


def test_a_blind_wash_record_is_refused():
    with pytest.raises(ConfigError, match="wash_rounds table has no rows"):
        wash.compare(_kept(), _wash({}))
    odd = _kept()
    del odd["data"]["wash_rounds"][0]["lost"]
    with pytest.raises(ConfigError, match="^A: wash_rounds row 0 lacks lost"):
        wash.compare(odd, _kept())


# ---------------------------------------------------------------- the command, on record files


def _files(tmp_path, a: dict, b: dict) -> list[str]:
    import json

    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    return [str(tmp_path / "a.json"), str(tmp_path / "b.json")]


def test_the_command_prints_the_verdict_first_and_exits_by_it(tmp_path, capsys, monkeypatch):
    import json

    from washexp.compare import main

    monkeypatch.chdir(tmp_path)  # no project here: two record files compare anywhere
    assert main(_files(tmp_path, _study(), _study())) == 0
    assert capsys.readouterr().out == "no regression: 0 needle(s) lost in B, worst mean drop +0.000\n"
    assert main(_files(tmp_path, _study(), _study(pay_y=0.5))) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "REGRESSION: 1 needle(s) lost in B, worst mean drop +0.250"
    assert out[1] == "LOST in B: S top3 · payment · y (retained 1.00 -> 0.50)"
    assert main([*_files(tmp_path, _study(), _study(pay_y=0.5)), "--max-needles-lost", "1"]) == 1  # the mean drop
    capsys.readouterr()
    args = [*_files(tmp_path, _study(), _study(pay_y=0.5)), "--max-needles-lost", "1", "--max-mean-drop", "0.25"]
    assert main(args) == 0
    capsys.readouterr()
    b = _study()
    b["data"]["compaction_tasks"] = [t for t in b["data"]["compaction_tasks"] if t["arm"] != "Full"]
    b["data"]["compaction_fields"] = [f for f in b["data"]["compaction_fields"] if f["arm"] != "Full"]
    assert main(_files(tmp_path, _study(), b)) == 1
    assert capsys.readouterr().out.splitlines()[:2] == [
        "REGRESSION: 0 needle(s) lost in B, worst mean drop +0.000; B lacks 2 of A's 5 cells",
        "MISSING in B: Full",
    ]
    assert main([*_files(tmp_path, _study(), b), "--allow-subset", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert (found["schema"], found["topic"], found["regression"], found["subset"]) == (1, "compaction", False, True)
    assert (found["cells_a"], found["missing_in_b"], found["missing"]) == (5, 2, [["Full"]])
    assert found["thresholds"] == {"max_needles_lost": 0, "max_mean_drop": 0.05} and found["needles_lost"] == 0


@pytest.mark.parametrize(
    ("b", "expected"),
    [
        ("{not json", "not valid JSON"),
        ('{"schema": 2, "topic": "compaction", "data": {}}', "not a washexp record of schema 1"),
        ('{"schema": 1, "topic": "compaction"}', "not a washexp record of schema 1"),
        ("[1]", "not a washexp record of schema 1"),
    ],
)
def test_the_command_refuses_what_is_not_a_record_in_one_line(tmp_path, capsys, monkeypatch, b, expected):
    from washexp.compare import main

    monkeypatch.chdir(tmp_path)
    a, path = _files(tmp_path, _study(), {})
    (tmp_path / "b.json").write_text(b)
    assert main([a, path]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("washexp compare: ") and expected in err, err
    assert main([a]) == 2 and capsys.readouterr().err.count("\n") == 1


def test_every_refusal_names_the_side_it_is_about():
    blind = _study()
    blind["data"]["compaction_fields"] = []
    first = r"^A: 3 finished condition\(s\) without compaction_fields rows, first S top3 · payment"
    with pytest.raises(ConfigError, match=first):
        compaction.compare(blind, _study())
    odd = _study()
    del odd["data"]["compaction_fields"][0]["retained"]
    with pytest.raises(ConfigError, match="^A: compaction_fields row 0 lacks retained"):
        compaction.compare(odd, _study())
    with pytest.raises(ConfigError, match="^B: compaction_fields row 0 lacks retained"):
        compaction.compare(_study(), odd)
    stray = _study()
    stray["data"]["compaction_fields"].append({"arm": "H top5", "task": "payment", "field": "x", "retained": 1.0})
    with pytest.raises(ConfigError, match="^B: compaction_fields names H top5"):
        compaction.compare(_study(), stray)
    with pytest.raises(ConfigError, match="^B: the record has no wash_rounds table"):
        wash.compare(_kept(), {"topic": "wash", "data": {}})
    with pytest.raises(ConfigError, match=r"^A: the record has no tab table \(not a wash record compare knows\)"):
        rows({"topic": "wash", "data": {}}, "A", "tab", {}, key=())
    with pytest.raises(ConfigError, match="^A is a wash record and B a compaction record"):
        compare({"topic": "wash"}, {"topic": "compaction"})
    with pytest.raises(ConfigError, match=r"^A: tab row 0 lacks \(not an object\)"):
        rows({"data": {"tab": [7]}}, "A", "tab", {"k": Shape.WHOLE}, key=("k",))


def test_compare_fails_closed_unless_told_and_passes_both_sides_on():
    b = _study(pay_y=0.5)
    b["data"]["compaction_tasks"] = [t for t in b["data"]["compaction_tasks"] if t["arm"] != "Full"]
    b["data"]["compaction_fields"] = [f for f in b["data"]["compaction_fields"] if f["arm"] != "Full"]
    found = compare(_study(), b)
    assert found.topic == "compaction" and not found.subset and found.missing == [("Full",)]
    assert found.needles_lost == 1 and found.data["fields_lost_in_b"][0]["retained_b"] == 0.5
    assert compare(_study(), b, True).subset
    assert wash.compare(_kept(), _kept()).topic == "wash"


def test_a_fact_accuracy_regression_with_the_same_retention_is_a_regression():
    """Mutant killed (issue 36): a compare that read retention only would call a reader that now
    answers wrongly from the same context "no regression"."""

    def study(accuracy: float) -> dict:
        r = _study()
        for t in r["data"]["compaction_tasks"]:
            t["fact_accuracy"] = accuracy if t["arm"] == "S top3" and t["task"] == "payment" else 1.0
        return r

    found = compaction.compare(study(1.0), study(0.5))
    assert found.needles_lost == 0  # every field still retained
    assert found.worst_drop == pytest.approx(0.5) and found.regressed(0, 0.05)
    assert "fact_accuracy S top3 (primary): 1.000 -> 0.500" in found.lines[0]
    assert not compaction.compare(study(0.5), study(1.0)).regressed(0, 0.05)  # an improvement is none


def test_the_wash_json_carries_survival_per_class_and_round_and_the_cliffs():
    two = {"m1": "v1.2.3", "m2": "v2.31.0", "m3": "never page twice"}
    a = _wash({("lean", 1): [], ("lean", 2): ["m1"]}, {"lean": two})
    b = _wash({("lean", 1): ["m1"], ("lean", 2): ["m1", "m2"]}, {"lean": two})
    found = wash.compare(a, b)
    g = "ceiling · reference · off (off)"
    assert found.data["survival"] == {
        "A": [
            {"group": g, "class": "prose", "round": 1, "survival": 1.0},
            {"group": g, "class": "prose", "round": 2, "survival": 1.0},
            {"group": g, "class": "version", "round": 1, "survival": 1.0},
            {"group": g, "class": "version", "round": 2, "survival": 0.5},
        ],
        "B": [
            {"group": g, "class": "prose", "round": 1, "survival": 1.0},
            {"group": g, "class": "prose", "round": 2, "survival": 1.0},
            {"group": g, "class": "version", "round": 1, "survival": 0.5},
            {"group": g, "class": "version", "round": 2, "survival": 0.0},
        ],
    }
    assert found.data["cliffs"] == {
        "A": [{"group": g, "class": "prose", "round": None}, {"group": g, "class": "version", "round": 2}],
        "B": [{"group": g, "class": "prose", "round": None}, {"group": g, "class": "version", "round": 1}],
    }
    assert f"cliff: version first falls at round 1 in B (2 in A) [{g}]" in found.lines
    # B's own lines come after the verdict's: LOST first, then the store mean, then the cliff
    assert found.lines == [
        f"LOST in B: lean m1 'v1.2.3' (version) at round 1 [{g}]",
        f"LOST in B: lean m2 'v2.31.0' (version) at round 2 [{g}]",
        f"store mean: lean [{g}] muscle kept 0.667 -> 0.333",
        f"cliff: version first falls at round 1 in B (2 in A) [{g}]",
    ]


def test_a_cliff_at_the_same_round_in_both_is_no_finding_and_an_even_store_no_mean_line():
    a = _wash({("lean", 1): [], ("lean", 2): ["m2"]})
    found = wash.compare(a, a)
    assert found.lines == [] and found.worst_drop == 0.0 and found.needles_lost == 0
    assert found.data["store_means"][0]["drop"] == 0.0


@pytest.mark.parametrize("side", ["A", "B"])
def test_a_wash_record_without_its_muscle_table_is_named_by_side(side):
    bare = _kept()
    del bare["data"]["wash_muscle"]
    pair = (bare, _kept()) if side == "A" else (_kept(), bare)
    with pytest.raises(ConfigError, match=f"^{side}: the record has no wash_muscle table"):
        wash.compare(*pair)


def test_nothing_in_common_names_the_wash_cells():
    a = _wash({("lean", 1): []})
    b = _wash({("plump", 1): []})
    with pytest.raises(ConfigError, match="no measurement x washer x store x round x needle cell in common"):
        wash.compare(a, b)


# ---------------------------------------------------------------- the command, in process, on record files

from washexp import compare as compare_cli  # noqa: E402


def _files(tmp_path, a: dict, b: dict):
    pa, pb = tmp_path / "a.json", tmp_path / "b.json"
    pa.write_text(json.dumps(a), encoding="utf-8")
    pb.write_text(json.dumps(b), encoding="utf-8")
    return str(pa), str(pb)


def test_the_command_on_two_record_files_exits_1_on_a_lost_needle_and_says_so(tmp_path, capsys):
    a, b = _files(
        tmp_path, _kept(), _wash({("lean", 1): [], ("lean", 2): ["m2"], ("lean", 3): ["m2"], ("plump", 1): []})
    )
    assert compare_cli.main([a, a]) == 0
    assert capsys.readouterr().out.splitlines() == ["no regression: 0 needle(s) lost in B, worst mean drop +0.000"]
    assert compare_cli.main([a, b]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "REGRESSION: 1 needle(s) lost in B, worst mean drop +0.333"
    assert out[1].startswith("LOST in B: lean m2 'v2.31.0'")
    # the thresholds: one lost needle allowed, and a drop of 1/3 within 0.34
    assert compare_cli.main([a, b, "--max-needles-lost", "1", "--max-mean-drop", "0.34"]) == 0
    capsys.readouterr()
    assert compare_cli.main([a, b, "--max-needles-lost", "1"]) == 1  # the default mean drop is 0.05
    capsys.readouterr()


def test_the_command_json_is_the_findings_with_the_thresholds(tmp_path, capsys):
    short = _wash({("lean", 1): [], ("lean", 2): ["m2"], ("lean", 3): ["m2"]})
    a, b = _files(tmp_path, _kept(), short)
    assert compare_cli.main([a, b, "--json", "--allow-subset"]) == 1
    out = json.loads(capsys.readouterr().out)
    head = {k: out[k] for k in list(out)[:10]}
    assert head == {
        "schema": 1,
        "topic": "wash",
        "regression": True,
        "needles_lost": 1,
        "worst_mean_drop": pytest.approx(1 / 3),
        "cells_a": 10,
        "missing_in_b": 1,
        "subset": True,
        "missing": [["ceiling", "reference", "off (off)", "plump"]],
        "thresholds": {"max_needles_lost": 0, "max_mean_drop": 0.05},
    }
    assert set(out) - set(head) == {"lost_in_b", "store_means", "survival", "cliffs"}


@pytest.mark.parametrize(
    "setup, message",
    [
        (lambda p: p.write_text("{", encoding="utf-8"), "not valid JSON"),
        (lambda p: p.write_text('{"schema": 2, "data": {}}', encoding="utf-8"), "not a washexp record of schema 1"),
        (lambda p: p.write_text('{"schema": 1}', encoding="utf-8"), "not a washexp record of schema 1"),
        (lambda p: p.write_text("[1]", encoding="utf-8"), "not a washexp record of schema 1"),
    ],
)
def test_the_command_refuses_a_file_that_is_not_a_record_in_one_line(tmp_path, capsys, setup, message):
    good, _ = _files(tmp_path, _kept(), _kept())
    bad = tmp_path / "bad.json"
    setup(bad)
    assert compare_cli.main([good, str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"washexp compare: {bad}: {message}") and err.count("\n") == 1


def test_the_command_usage_errors_are_one_line_exit_2(tmp_path, capsys):
    a, b = _files(tmp_path, _kept(), _kept())
    assert compare_cli.main([a, b, "--sweep", "x"]) == 2
    assert (
        capsys.readouterr().err
        == f"washexp compare: --sweep goes with model:NAME sides; {a} is a record or a sweep already\n"
    )
    assert compare_cli.main(["model:m", "model:m"]) == 2
    assert capsys.readouterr().err == "washexp compare: A and B are both model:m: name two models\n"
    assert compare_cli.main([a]) == 2
    assert capsys.readouterr().err.startswith("washexp compare: the following arguments are required: b")
    assert compare_cli.main([a, b, "--max-needles-lost", "x"]) == 2
    assert "--max-needles-lost: 'x' is not a whole number >= 0" in capsys.readouterr().err
    assert compare_cli.main([a, b, "--max-mean-drop", "x"]) == 2
    assert "--max-mean-drop: 'x' is not a finite number >= 0" in capsys.readouterr().err


def test_any_error_in_a_side_is_an_input_error_exit_2_whatever_its_class(tmp_path, capsys):
    """compare only reads, so whatever stops it is in its input: a store (here a bundle folder,
    which stands where a store goes) that is not what it says is exit 2, as a ConfigError is,
    though its error (a BundleMismatch) is no ConfigError."""
    assert compare_cli.main(["sweep-a", "sweep-b", "--tracking-uri", f"bundle:{tmp_path}"]) == 2
    assert capsys.readouterr().err == "washexp compare: bundle artifact bundle.json: missing\n"


@pytest.mark.parametrize(
    ("flag", "value", "what"),
    [
        ("--max-mean-drop", "nan", "finite number >= 0"),  # every drop > nan is false: "no regression"
        ("--max-mean-drop", "inf", "finite number >= 0"),
        ("--max-mean-drop", "-0.1", "finite number >= 0"),
        ("--max-needles-lost", "-1", "whole number >= 0"),
        ("--max-needles-lost", "1.5", "whole number >= 0"),
    ],
)
def test_a_threshold_that_is_no_bound_is_a_usage_error(tmp_path, capsys, flag, value, what):
    """``--max-mean-drop nan`` passed a worst drop of +0.333 as "no regression" (exit 0)."""
    lost = _wash({("lean", 1): [], ("lean", 2): ["m2"], ("lean", 3): ["m2"], ("plump", 1): []})
    a, b = _files(tmp_path, _kept(), lost)
    assert compare_cli.main([a, b, "--max-needles-lost", "5", "--max-mean-drop", "0.5", flag, value]) == 2
    assert capsys.readouterr().err == f"washexp compare: argument {flag}: {value!r} is not a {what}\n"
    assert compare_cli.main([a, b, flag, "0"]) == 1  # 0 is a bound: the loss is a regression


def test_a_repeated_cell_row_is_an_input_error_naming_the_table_and_row(tmp_path, capsys):
    """B's last row of a cell won: a field retained 0 then repeated as retained 1, or a wash round
    that lost a muscle needle then repeated without the loss, passed as "no regression"."""
    study = _study()
    fields = study["data"]["compaction_fields"]
    twice = {**fields[0], "retained": 0.0}
    study["data"]["compaction_fields"] = [twice, *fields]
    with pytest.raises(ConfigError, match=r"^B: compaction_fields row 1 repeats row 0 \(S top3 · payment · x\)"):
        compaction.compare(_study(), study)
    study = _study()
    study["data"]["compaction_tasks"].append(dict(study["data"]["compaction_tasks"][0]))
    with pytest.raises(ConfigError, match=r"^A: compaction_tasks row \d+ repeats row 0"):
        compaction.compare(study, _study())
    rounds = _kept()
    lost_then_kept = {**rounds["data"]["wash_rounds"][1], "lost": ["m2"]}
    rounds["data"]["wash_rounds"].insert(1, lost_then_kept)
    a, b = _files(tmp_path, _kept(), rounds)
    assert compare_cli.main([a, b]) == 2
    err = capsys.readouterr().err
    assert (
        err == "washexp compare: B: wash_rounds row 2 repeats row 1 (ceiling · reference · off (off) · lean · 2):"
        " one cell, one row\n"
    )
    muscle = _kept()
    muscle["data"]["wash_muscle"].append(dict(muscle["data"]["wash_muscle"][0]))
    with pytest.raises(ConfigError, match=r"^B: wash_muscle row 2 repeats row 0 \(lean\)"):
        wash.compare(_kept(), muscle)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),  # RecursionError in the parser
        ('{"schema": 1, "data": ' + "[" * 500 + "]" * 500 + "}", "nested too deeply"),  # past the cap
        ('{"schema": 1, "data": ' + "9" * 1_000_000 + "}", "Exceeds the limit"),  # int() of 10^6 digits
    ],
)
def test_a_record_nested_too_deep_or_with_a_huge_integer_is_one_line(tmp_path, capsys, text, why):
    a, b = _files(tmp_path, _kept(), _kept())
    Path(b).write_text(text, encoding="utf-8")
    assert compare_cli.main([a, b]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"washexp compare: {b}: not usable JSON") and why in err and err.count("\n") == 1, err


def test_an_integer_past_a_floats_range_is_no_number():
    """``10**400`` where a number belongs was an OverflowError in ``Shape.fits``."""
    assert not Shape.NUMBER.fits(10**400) and not Shape.NUMBER_OR_NULL.fits(-(10**400))
    assert Shape.NUMBER.fits(2**60) and Shape.WHOLE.fits(10**400)
    study = _study()
    study["data"]["compaction_fields"][0]["retained"] = 10**400
    with pytest.raises(ConfigError, match=r"^B: compaction_fields row 0: retained is 1000\d+, not a number$"):
        compaction.compare(_study(), study)


def test_a_store_side_is_read_from_the_store_the_command_names(tmp_path, capsys):
    """A sweep id, a run id or model:NAME is looked up in ``--tracking-uri`` (with ``--experiment``
    and ``--sweep`` passed along); what is wrong with that store is the one line, exit 2. The store
    here is a 0-byte file: refused before MLflow opens it (fast, and nothing is made of it)."""
    empty = tmp_path / "mlflow.db"
    empty.write_bytes(b"")
    uri = ["--tracking-uri", f"sqlite:///{empty}"]
    record, _ = _files(tmp_path, _kept(), _kept())
    refusal = f"washexp compare: {empty}: an empty file (0 bytes), not a tracking store;"
    for sides in (
        [record, "2026-11-30/10-31-23"],
        ["no-such-file.json", record],  # named like a record but not a file: a store side
        ["model:m", record],
        ["model:m", "model:n", "--sweep", "2026-11-30/10-31-23", "--experiment", "wash"],
    ):
        assert compare_cli.main([*sides, *uri]) == 2
        err = capsys.readouterr().err
        assert err.startswith(refusal) and err.count("\n") == 1, (sides, err)
    assert empty.read_bytes() == b""
    # a model of a topic no record builder knows, and a model with no name: refused the same way
    assert compare_cli.main(["model:m", record, "--experiment", "other", *uri]) == 2
    assert capsys.readouterr().err == "washexp compare: unknown record builder 'other' (known: compaction, wash)\n"
    assert compare_cli.main(["model:", record, *uri]) == 2
    assert capsys.readouterr().err == "washexp compare: model:: name a model (model:NAME)\n"


def test_inside_a_project_a_store_side_is_read_from_the_projects_store(tmp_path, capsys, monkeypatch):
    """Without ``--tracking-uri``, the store is the project's own (``mlruns/mlflow.db`` under the
    folder holding ``conf/`` and ``run.py``), found from any folder below it."""
    project = tmp_path / "project"
    (project / "conf").mkdir(parents=True)
    (project / "run.py").write_text("")
    (project / "mlruns").mkdir()
    (project / "mlruns" / "mlflow.db").write_bytes(b"")  # refused before MLflow opens it
    (project / "results").mkdir()
    monkeypatch.chdir(project / "results")
    record, _ = _files(tmp_path, _kept(), _kept())
    assert compare_cli.main([record, "2026-11-30/10-31-23"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"washexp compare: {project / 'mlruns' / 'mlflow.db'}: an empty file (0 bytes)"), err


def test_the_usage_line_names_the_command(capsys):
    with pytest.raises(SystemExit) as done:
        compare_cli.main(["--help"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("usage: washexp compare [-h] ")
