"""``washexp power``: its arithmetic on a record, checked by simulation, and its bad input."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import washexp_cli
from washexp import power
from washexp.export import decide

RESULTS = Path(__file__).resolve().parent.parent / "results"
RECORD = RESULTS / "compaction-local-qwen2.5-coder-1.5b-2026-12-04.json"
SIM_SEED = 50_3


def _cli(*args: str) -> subprocess.CompletedProcess:
    return washexp_cli("power", *args)


def test_components_split_a_simulated_record():
    """A record simulated with known components (tasks 0.02, generations 0.01, answers 0.04; 3
    generations of 2 answers): the planner recovers each within sampling error."""
    rng = np.random.default_rng(SIM_SEED)
    tasks, rows, nested = [f"t{i}" for i in range(400)], [], []
    for t in tasks:
        effect = rng.normal(0.1, math.sqrt(0.02))  # the task's own difference S - H
        for arm, shift in (("S top0", effect), ("H top0", 0.0)):
            gens = [[float(g + rng.normal(0, 0.2)) for _ in range(2)] for g in rng.normal(shift, 0.1, 3)]
            nested.append({"arm": arm, "cohort": "primary", "task": t, "metric": "fact_accuracy", "scores": gens})
            value = float(np.mean([np.mean(g) for g in gens]))
            rows.append(
                {"arm": arm, "method": arm[0], "topn": 0, "cohort": "primary", "task": t, "failed": False}
                | {"valid": True, "retention": None, "fact_accuracy": value}
            )
    c = power.components({"data": {"compaction_tasks": rows, "compaction_nested": nested}}, "S vs H", "primary")
    assert (c.G, c.A, c.n_tasks) == (3, 2, 400)
    assert c.answers == pytest.approx(0.04, rel=0.15)
    assert c.generations == pytest.approx(0.01, rel=0.5)
    assert c.tasks == pytest.approx(0.02, rel=0.3)
    assert c.variance(3, 2) == pytest.approx(c.per_task)  # at the record's sizes: the observed spread
    # the tasks it asks for reach the power asked: simulated panels of that size, the sign-flip test
    (G, A, n) = next(p for p in power.plan(c, 0.10, 0.8, 1) if p[:2] == (3, 2))
    sd = math.sqrt(c.variance(3, 2))
    hits = sum(decide.p_value(rng.normal(0.10, sd, n)) < decide.ALPHA for _ in range(300))
    assert hits / 300 >= 0.72
    assert n == decide.tasks_for(0.10, sd)


def test_a_committed_record_says_what_it_cannot_decide():
    out = _cli(str(RECORD), "--delta", "0.10")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "family 'S vs H' (4 comparisons" in text and "cohort primary, 4 tasks, 1 generation(s) x 1 answer(s)" in text
    assert "cannot decide any difference in this family" in text and "2/2^4 = 0.125" in text
    assert "to detect 0.1 with 80% power at two-sided 0.05 after Holm over 4" in text
    assert "generations not estimable (one per task): left out" in text


def test_a_one_generation_record_leaves_generations_and_answers_out():
    out = _cli(str(RESULTS / "compaction-reference-2026-12-04.json"), "--cohort", "control")
    assert out.returncode == 0, out.stderr
    assert "generations not estimable (one per task): left out" in out.stdout
    assert "answers not estimable (one value per generation): left out" in out.stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--delta", "0"], "--delta 0 is outside (0, 1)"),
        (["--delta", "1.5"], "--delta 1.5 is outside (0, 1)"),
        (["--power", "1"], "--power 1 is outside (0, 1)"),
        (["--family", "nope"], "family 'nope': not in this record"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, says):
    out = _cli(str(RECORD), *args)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and says in out.stderr


def test_a_record_without_per_task_values_or_common_tasks_is_exit_2(tmp_path):
    bare = json.loads(RECORD.read_text())
    bare["data"] = {"compaction_fields": []}
    (tmp_path / "bare.json").write_text(json.dumps(bare))
    out = _cli(str(tmp_path / "bare.json"))
    assert out.returncode == 2 and "no per-task values (data.compaction_tasks)" in out.stderr
    assert out.stderr.count("\n") == 1
    lone = json.loads(RECORD.read_text())
    lone["data"]["compaction_tasks"] = [t for t in lone["data"]["compaction_tasks"] if t["task"] == "payment"]
    (tmp_path / "lone.json").write_text(json.dumps(lone))
    out = _cli(str(tmp_path / "lone.json"))
    assert out.returncode == 2 and "fewer than 2 tasks in common" in out.stderr
    assert out.stderr.count("\n") == 1
