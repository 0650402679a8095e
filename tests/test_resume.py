"""Killing a sweep mid-arm and running the same command again: nothing left RUNNING, no finished
condition computed twice, the sweep complete."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from contextlib import closing
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import ROOT, SCRIPTED_ENV, new_store_copy, run_cli, scripted_model
from tests.openai_server import HOLD_LIMIT_S, Script, serve
from washexp.app import STOPPED

# 3 arms x 14 conditions: killed in the second (after 18), before the end; more arms would only
# repeat the third's path (resuming after the killed arm)
SWEEP = ["-m", "method=S", "topn=0..2"]


def _runs(store: Path):
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    exp = client.get_experiment_by_name("compaction")
    return [] if exp is None else client.search_runs([exp.experiment_id], max_results=5000)


def _finished_conditions(store: Path) -> int:
    """Read-only, with sqlite3: an MLflow client here would migrate a store the sweep is still
    creating, and two migrations of one new store race (the sweep's fails)."""
    try:
        with closing(sqlite3.connect(f"file:{store / 'mlflow.db'}?mode=ro", uri=True, timeout=1)) as db:
            (count,) = db.execute(
                "SELECT COUNT(*) FROM runs JOIN tags ON tags.run_uuid = runs.run_uuid"
                " WHERE runs.status = 'FINISHED' AND tags.key = 'washexp.kind' AND tags.value = 'condition'"
            ).fetchone()
    except sqlite3.OperationalError:  # not made yet, its tables not yet there, or locked by a write
        return 0
    return count


def _start(store: Path, sweep: list[str] = SWEEP, env: dict[str, str] | None = None) -> subprocess.Popen:
    args = [
        f"tracking.uri=sqlite:///{store / 'mlflow.db'}",
        f"tracking.artifacts={store / 'mlruns'}",
        f"hydra.sweep.dir={store / 'multirun'}",
    ]
    return subprocess.Popen(
        [sys.executable, str(ROOT / "run.py"), *sweep, *args],
        cwd=store,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "CI": "1", **(env or {})},
    )


@pytest.mark.parametrize(
    "sig", [signal.SIGKILL, pytest.param(signal.SIGINT, marks=pytest.mark.slow)], ids=["SIGKILL", "SIGINT"]
)
def test_killed_sweep_resumes_without_duplicates(tmp_path, sig):
    proc = _start(tmp_path)
    deadline = time.monotonic() + 300
    while _finished_conditions(tmp_path) < 18 and time.monotonic() < deadline:  # mid second arm
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        time.sleep(0.2)
    proc.send_signal(sig)
    proc.wait(timeout=120)
    before = _runs(tmp_path)
    if sig == signal.SIGINT:  # stopped, not killed outright: it closed its own runs
        # (a unit it interrupted ends KILLED: tests/test_tracking_store.py; here the Ctrl-C may
        # also land between units, while the next arm waits for the last writes)
        assert not [r for r in before if r.info.status == "RUNNING"]

    run_cli(SWEEP, tmp_path)

    runs = _runs(tmp_path)
    assert not [r.data.tags["mlflow.runName"] for r in runs if r.info.status == "RUNNING"]
    finished = [r for r in runs if r.info.status == "FINISHED"]
    per_identity = Counter(r.data.tags["washexp.hash"] for r in finished if r.data.tags["washexp.kind"] == "condition")
    assert len(per_identity) == 42 and set(per_identity.values()) == {1}, per_identity.most_common(3)
    arms = [r for r in finished if r.data.tags["washexp.kind"] == "arm"]
    assert sorted(r.data.tags["mlflow.runName"] for r in arms) == [f"S top{n} · arm" for n in range(3)]
    # every finished arm lists its 14 tasks: those it computed, and a link to each it reused
    # (a reused run stays under the arm that computed it, even a killed one)
    children = Counter(
        r.data.tags["mlflow.parentRunId"] for r in finished if r.data.tags["washexp.kind"] in ("condition", "link")
    )
    assert {children[a.info.run_id] for a in arms} == {14}
    by_id = {r.info.run_id: r for r in runs}
    links = [r for r in finished if r.data.tags["washexp.kind"] == "link"]
    assert all(by_id[r.data.tags["washexp.link"]].info.status == "FINISHED" for r in links)
    done_before = {
        r.info.run_id for r in before if r.info.status == "FINISHED" and r.data.tags["washexp.kind"] == "condition"
    }
    assert done_before <= {r.info.run_id for r in finished}  # finished work was reused, not redone


@pytest.mark.parametrize(
    ("sig", "code", "name"),
    [(signal.SIGINT, 130, "Ctrl-C"), pytest.param(signal.SIGTERM, 143, "SIGTERM", marks=pytest.mark.slow)],
    ids=["Ctrl-C", "SIGTERM"],  # SIGTERM takes Ctrl-C's path to its own code and word
)
def test_a_stop_ends_the_command_at_once_in_one_line_with_the_shells_code(tmp_path, sig, code, name):
    """Ctrl-C or SIGTERM while a model call is on its way: the open runs end KILLED, and the
    command ends on one line with 128 + the signal, never a traceback, and without waiting for
    the call (here held unanswered until the command has ended)."""
    script = Script()
    released = threading.Event()
    script.hold = {"S": released.is_set}
    with serve(script) as url:
        # the client would wait far longer than the server holds the call (HOLD_LIMIT_S): a
        # command that waited for it would end only when the test lets the server answer
        model = [*scripted_model(url, tmp_path / "recordings"), "endpoint.timeout_s=3600"]
        new_store_copy(tmp_path / "mlflow.db")  # the store's making is not what this test checks
        proc = _start(tmp_path, ["-m", "method=S", "topn=0", "task=payment", *model], SCRIPTED_ENV)
        try:
            while not any(r["kind"] == "S" for r in script.requests):
                assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
                time.sleep(0.05)
            proc.send_signal(sig)
            said = proc.communicate(timeout=HOLD_LIMIT_S / 2)[1].decode()
        finally:
            released.set()
            if proc.poll() is None:
                proc.kill()
    assert (proc.returncode, said.splitlines()[-1:]) == (code, [f"washexp: {STOPPED.format(name)}"]), said
    assert "Traceback" not in said
    statuses = Counter(r.info.status for r in _runs(tmp_path))
    assert statuses["KILLED"] >= 1 and statuses["RUNNING"] == 0, statuses
