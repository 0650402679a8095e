"""The cliff (``measurement=cliff``): its crossing rule, its grid checks, masking at a budget, and
(slow) the real command end to end: sets generated into the sweep's folder, the record, verify."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import ROOT, run_cli
from washexp.compaction.cliff import Grid, mask_keep
from washexp.compaction.inputs.fixtures import load_tasks
from washexp.compaction.records.cliff import Crossing, Point, axis_points, crossing
from washexp.errors import ConfigError
from washexp.tokens import count

SURE_OVER = (0.5,) * 8
SURE_UNDER = (-0.5,) * 8
OVER_UNSURE = (0.4, -0.3, 0.4, -0.3, 0.4, -0.3, 0.4, -0.3)  # mean +0.05, its interval holds 0
UNDER_UNSURE = (-0.4, 0.3, -0.4, 0.3, -0.4, 0.3, -0.4, 0.3)  # mean -0.05, its interval holds 0


def _points(*ds: tuple[float, ...]) -> list[Point]:
    return [Point(2**i, d) for i, d in enumerate(ds)]


def test_a_method_never_under_never_crosses_and_says_so():
    c = crossing(_points(SURE_OVER, OVER_UNSURE, SURE_OVER))
    assert c == Crossing(None, None, None)
    assert c.describe("tokens") == "never crosses within the grid"


def test_the_crossing_is_the_first_point_under_with_its_sure_neighbours():
    points = _points(SURE_OVER, SURE_OVER, OVER_UNSURE, UNDER_UNSURE, OVER_UNSURE, SURE_UNDER, SURE_UNDER)
    assert points[2].interval[0] < 0 < points[2].interval[1]  # the unsure points are unsure
    assert points[5].interval[1] < 0 < points[1].interval[0]
    c = crossing(points)
    # first under at x=8 (not at the later over point); surely above last at x=2; surely under first at x=32
    assert c == Crossing(8, 2, 32)
    assert c.describe("tokens") == "8 tokens (surely above at 2; surely under at 32)"


def test_an_interval_that_never_decides_is_blank_not_a_neighbour():
    c = crossing(_points(OVER_UNSURE, UNDER_UNSURE, UNDER_UNSURE))
    assert (c.at, c.sure_over, c.sure_under, c.gentlest) == (2, None, None, False)


def test_exactly_half_of_full_is_not_under_whatever_the_float_noise():
    half = Point(1, (1 / 3 - 0.5, 2 / 3 - 0.5))  # retention 1/3 and 2/3 against Full's 1: a mean of 1/2
    assert half.mean != 0  # float noise below 0
    assert not half.under and crossing([half]).at is None
    # an interval that ends at 0 up to the noise holds 0: not surely under (mask at 4096 in the record)
    ends = Point(2, tuple(r - 0.5 for r in (1 / 2, 1 / 3, 1 / 6, 1 / 6, 1 / 2, 1 / 3, 1 / 2, 1 / 3)))
    assert -1e-12 < ends.interval[1] < 0 and ends.under  # the noise is there
    assert crossing([ends]).sure_under is None


def test_under_at_the_gentle_end_is_said_outside_the_grid():
    c = crossing(_points(SURE_UNDER, SURE_UNDER))
    assert (c.at, c.sure_under, c.gentlest) == (1, 1, True)
    assert "outside the grid" in c.describe("tokens")


def test_axis_points_run_from_the_gentle_end_at_the_axis_fixed_value():
    grid = {"budget_length": 8000, "length_budget": 256}
    rows = [
        {"method": "S", "task": t, "length": n, "budget": b, "retention": r, "full_retention": 1.0}
        for t in ("a", "b")
        for n, b, r in ((8000, 64, 0.0), (8000, 256, 0.5), (8000, 1024, 1.0), (1000, 256, 1.0), (64000, 256, 0.25))
    ]
    budget = axis_points(rows, "S", "retention", "budget", grid)
    assert [(p.x, p.d) for p in budget] == [(1024, (0.5, 0.5)), (256, (0.0, 0.0)), (64, (-0.5, -0.5))]
    length = axis_points(rows, "S", "retention", "length", grid)
    assert [p.x for p in length] == [1000, 8000, 64000]
    assert length[2].d == (-0.25, -0.25)


def _grid(**changed) -> SimpleNamespace:
    base = {
        "seed": 1,
        "tasks": 2,
        "budgets": [64, 256],
        "budget_length": 1000,
        "lengths": [1000, 2000],
        "length_budget": 256,
    }
    return SimpleNamespace(**(base | changed))


@pytest.mark.parametrize(
    ("changed", "named"),
    [
        ({"lengths": [1000, 500]}, "cliff.lengths=500"),
        ({"lengths": [70000]}, "cliff.lengths=70000"),
        ({"budget_length": 999}, "cliff.budget_length=999"),
        ({"budgets": [0]}, "cliff.budgets=0"),
        ({"budgets": []}, "cliff.budgets=[]"),
        ({"tasks": 0}, "cliff.tasks=0"),
        ({"budgets": [64, 64]}, "cliff.budgets=[64, 64]: a value twice"),
    ],
)
def test_a_grid_value_out_of_range_is_named(changed, named):
    with pytest.raises(ConfigError, match=named.replace("[", r"\[").replace("]", r"\]")):
        Grid.of(_grid(**changed))


def test_the_grid_measures_each_point_once_and_one_set_per_length():
    g = Grid.of(_grid(budgets=[64, 256, 1024]))
    assert g.points == [(1000, 64), (1000, 256), (1000, 1024), (2000, 256)]  # (1000, 256) once
    assert g.set_lengths == [1000, 2000]
    assert g.set_params(2000).min_tokens == g.set_params(2000).max_tokens == 2000


def test_masking_at_a_budget_keeps_the_latest_outputs_that_fit():
    task = load_tasks(ROOT / "fixtures" / "compaction", "payment")[0]
    last_two = sum(count(u.render()) for u in task.units[-2:])
    assert mask_keep(task, last_two) == 2
    assert mask_keep(task, last_two - 1) == 1
    assert mask_keep(task, 0) == 0
    assert mask_keep(task, 10**9) == len(task.units)


@pytest.mark.slow  # ~0.8 s (the reference roles and two conditions): over the default suite's per-test budget
def test_the_budget_is_the_summary_allowance_and_the_study_rule_stays_the_default():
    from washexp.compaction.backends.roles import roles_for
    from washexp.compaction.condition import Arm, run_condition
    from washexp.compaction.frozen import FrozenCache
    from washexp.compaction.inputs import budget
    from washexp.compaction.inputs.context import evidence_tokens
    from washexp.compaction.methods.method import builtin
    from washexp.config import ModelConfig

    task = load_tasks(ROOT / "fixtures" / "compaction", "payment")[0]
    cache = FrozenCache(roles_for(ModelConfig(name="reference")))
    # S alone (H's sizes are the same call, and each condition costs time in the default suite)
    given = run_condition(task, Arm("S", 0), cache, 1, 0, method=builtin("S"), allowance=100)
    assert given.metrics["allowance"] == 100
    study = run_condition(task, Arm("S", 0), cache, 1, 0, method=builtin("S"))
    assert study.metrics["allowance"] == budget.allowance(evidence_tokens(task)) != 100


# --- the real command ---------------------------------------------------------------------------

GRID = [
    "cliff.tasks=2",
    "cliff.lengths=[1000,2000]",
    "cliff.budgets=[64,2048]",
    "cliff.budget_length=1000",
    "cliff.length_budget=2048",
]


@pytest.mark.slow
def test_a_bad_grid_or_method_is_one_line_exit_2_and_nothing_written(tmp_path):
    for args, said in (
        (["measurement=cliff", "cliff.lengths=[500]"], "cliff.lengths=500: must be a whole number within 1000..65536"),
        (["measurement=cliff", "method=full"], "method=full: the cliff measures S, H, mask"),
    ):
        proc = run_cli(args, tmp_path, check=False, env={"CI": "1"})
        assert proc.returncode == 2, proc.stderr
        assert said in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert not list(tmp_path.rglob("manifest.json")) and not (tmp_path / "mlflow.db").exists()


@pytest.mark.slow
def test_the_cliff_sweep_generates_its_sets_and_its_record_verifies(tmp_path, capsys):
    from washexp.cli import main as washexp
    from washexp.tasks import manifest
    from washexp.verify import main as verify

    done = run_cli(["-m", "measurement=cliff", "method=S,H,mask", *GRID], tmp_path, env={"CI": "1"}, premade=True)
    assert "3 arms" in done.stdout, done.stdout
    sets = sorted((tmp_path / "multirun").glob("cliff-sets/L*"))
    assert [p.name for p in sets] == ["L1000", "L2000"]  # the sweep's own folder, never fixtures/
    digests = {p.name: manifest.digest(p / manifest.NAME) for p in sets}
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    out = tmp_path / "results"
    assert washexp(["export", "--bundle", "--tracking-uri", uri, "--out", str(out)]) == 0
    (record,) = out.glob("*-cliff-*.json")
    assert {p.name.removeprefix(record.stem) for p in out.glob(record.stem + "-*.png")} == {
        "-retention-vs-budget.png",
        "-retention-vs-length.png",
    }
    doc = json.loads(record.read_text())
    assert doc["provenance"]["task set manifest sha256 per length"] == digests
    rows = doc["data"]["cliff_conditions"]
    # 3 methods x 3 points (1000/64, 1000/2048, 2000/2048) x 2 tasks; Full keeps everything
    assert len(rows) == 18 and all(r["full_retention"] == 1.0 and not r["failed"] for r in rows)
    crossings = {(r["method"], r["axis"]): r for r in doc["tables"]["cliff"]["rows"]}
    assert set(crossings) == {(m, a) for m in ("S", "H", "mask") for a in ("budget", "length")}
    for (method, axis), row in crossings.items():
        points = axis_points(rows, method, "retention", axis, {"budget_length": 1000, "length_budget": 2048})
        assert row["crossing"] == crossing(points).at
    assert verify([str(record)]) == 0
    # a changed cell is named
    row = doc["tables"]["cliff_s"]["rows"][0]
    row["retention"] = round(row["retention"] + 0.25, 3)
    Path(record).write_text(json.dumps(doc, indent=1))
    assert verify([str(record)]) == 1
    assert "cliff_s" in capsys.readouterr().out


@pytest.mark.slow
def test_with_a_reader_the_cliff_has_fact_accuracy_beside_retention(tmp_path):
    """On a served model (the scripted server, its reader answering the facts written in its
    context): each condition logs fact accuracy for the method and for Full, and the record finds
    a crossing on it too."""
    from tests.conftest import scripted_sweep
    from tests.openai_server import Script, serve
    from washexp.cli import main as washexp
    from washexp.tasks.generate import generate

    grid = ["cliff.tasks=2", "cliff.lengths=[1000]", "cliff.budgets=[64,1024]", "cliff.budget_length=1000"]
    grid += ["cliff.length_budget=1024"]
    known = tmp_path / "known"  # the same set the sweep generates (same seed): the server's answer key
    generate(Grid.of(_grid(seed=52, lengths=[1000], budget_length=1000)).set_params(1000), 52, known)
    script = Script(tasks_root=known)
    script.models["scripted"] = "context"
    with serve(script) as url:
        scripted_sweep(url, tmp_path / "s", ("gen00000", "gen00001"), "measurement=cliff", "method=S", *grid)
    assert script.count("read") > 0
    uri = f"sqlite:///{tmp_path / 's' / 'mlflow.db'}"
    assert washexp(["export", "--tracking-uri", uri, "--out", str(tmp_path / "out")]) == 0
    (record,) = (tmp_path / "out").glob("*-cliff-*.json")
    doc = json.loads(record.read_text())
    rows = doc["data"]["cliff_conditions"]
    assert len(rows) == 4 and all(r["fact_accuracy"] is not None and r["full_fact_accuracy"] is not None for r in rows)
    scored = {(r["score"], r["axis"]) for r in doc["tables"]["cliff"]["rows"]}
    assert scored == {(s, a) for s in ("retention", "fact_accuracy") for a in ("budget", "length")}
    assert {p.name.removeprefix(record.stem) for p in (tmp_path / "out").glob(record.stem + "-*.png")} >= {
        "-fact_accuracy-vs-budget.png",
        "-fact_accuracy-vs-length.png",
    }
