"""A condition's identity: the code that computes it, and nothing else, decides whether a stored
run is reused. Each test runs the real command on a copy of the project whose source it edits."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import ROOT
from washexp.compaction.study import CODE
from washexp.provenance import code_modules

CELL = ["method=S", "topn=0", "task=[payment,backup]"]


def _project(tmp_path: Path) -> Path:
    copy = tmp_path / "project"
    copy.mkdir()
    for name in ("washexp", "conf"):
        shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "run.py", copy / "run.py")
    (copy / "fixtures").mkdir()
    shutil.copytree(ROOT / "fixtures" / "compaction", copy / "fixtures" / "compaction")
    return copy


def _run(project: Path) -> str:
    """The copy's own run.py (its folder comes first on sys.path, so its washexp is the one run)."""
    store = project / "store"
    args = [f"tracking.uri=sqlite:///{store / 'mlflow.db'}", f"tracking.artifacts={store / 'mlruns'}"]
    proc = subprocess.run(
        [sys.executable, str(project / "run.py"), *CELL, *args, f"hydra.run.dir={store / 'outputs'}"],
        cwd=project,
        capture_output=True,
        text=True,
        env={**os.environ, "CI": "1"},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout + proc.stderr


def _runs(project: Path) -> int:
    client = MlflowClient(f"sqlite:///{project / 'store' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("compaction")
    runs = client.search_runs([exp.experiment_id])
    return len([r for r in runs if r.data.tags["washexp.kind"] not in ("link", "decisions")])  # arms and units


@pytest.mark.slow
def test_a_note_in_a_record_builder_reuses_every_run_and_a_changed_rule_reuses_none(tmp_path):
    project = _project(tmp_path)
    _run(project)
    assert _runs(project) == 3  # the arm and its two tasks

    notes = project / "washexp" / "compaction" / "records" / "notes.py"
    text = notes.read_text(encoding="utf-8")
    assert "H is " in text
    notes.write_text(text.replace("H is ", "H here is ", 1), encoding="utf-8")
    again = _run(project)
    assert "finished already" in again and _runs(project) == 3

    budget = project / "washexp" / "compaction" / "inputs" / "budget.py"
    text = budget.read_text(encoding="utf-8")
    rule = "math.floor(ALLOWANCE_RATIO * evidence_tokens)"
    assert rule in text
    budget.write_text(text.replace(rule, "math.floor(ALLOWANCE_RATIO * evidence_tokens) - 1"), encoding="utf-8")
    changed = _run(project)
    assert "(2 run, 0 reused" in changed and _runs(project) == 6


def test_the_code_digest_holds_the_rules_and_no_record_builder():
    modules = code_modules(CODE)
    assert {"washexp.compaction.inputs.budget", "washexp.compaction.scoring.grading", "washexp.tokens"} <= set(modules)
    assert not [m for m in modules if ".record" in m or m.endswith((".cli", ".compare", ".study"))]


@pytest.mark.slow
def test_two_identical_sweeps_started_together_compute_each_identity_once(store):
    """The trap: both processes found no finished run and computed it (224 runs for 180 identities)."""
    from collections import Counter

    from tests.conftest import run_cli

    args = ["-m", "method=S,H", "topn=0..1", "task=[payment,backup,refactor]"]
    procs = []
    for i in range(2):
        tracking = [
            f"tracking.uri=sqlite:///{store / 'mlflow.db'}",
            f"tracking.artifacts={store / 'mlruns'}",
            f"hydra.sweep.dir={store / f'multirun{i}'}",
        ]
        procs.append(
            subprocess.Popen(
                [sys.executable, str(ROOT / "run.py"), *args, *tracking],
                cwd=store,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env={**os.environ, "CI": "1"},
            )
        )
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-2000:]
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("compaction").experiment_id], max_results=1000)
    finished = Counter(
        r.data.tags["washexp.hash"] for r in runs if r.data.tags["washexp.kind"] not in ("link", "decisions")
    )
    assert len(finished) == 4 + 12 and set(finished.values()) == {1}, finished.most_common(2)
    assert all(r.info.status == "FINISHED" for r in runs)
    run_cli(args, store)  # and a third finds every one finished
