"""Parallel launchers: ``hydra/launcher=joblib_local`` runs jobs in two worker processes that
write one fresh SQLite store, and a frozen summary two of them need at once stays one summary.

The sweep (``method=S topn=-1..1 model=openai``, task payment, one generation) runs as the real
command line against the scripted server, whose S replies are sampled (each request would get a
different text) and held for seconds (``Script.hold``): both processes need the same summary at
once, one asks the model, the other waits for its recording and replays it.
``topn=-1`` is a user error raised in a worker: the command must still end in its one line and
exit 2. The same command again reuses every finished arm.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import run_cli
from tests.openai_server import Script, serve

SECRET = "sk-test-SECRET-parallel"
HOLD = 10.0  # seconds an S reply is held: both workers reach the summary within it


def _sweep(url: str, store: Path, recordings: Path):
    return run_cli(
        [
            "-m",
            "hydra/launcher=joblib_local",
            "method=S",
            "topn=-1..1",
            "task=payment",
            "model=openai",
            "model.name=qwen3.8-max",
            "model.generations=1",
            f"endpoint.base_url={url}",
            f"endpoint.recordings={recordings}",
        ],
        store,
        env={"OPENAI_API_KEY": SECRET, "CI": "1"},
        check=False,
    )


@pytest.fixture(scope="module")
def parallel(tmp_path_factory):
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher", reason="needs the [test] extra (joblib launcher)")
    store = tmp_path_factory.mktemp("parallel")
    script = Script()
    script.hold = {"S": HOLD}
    with serve(script) as url:
        first = _sweep(url, store, store / "recordings")
        s_requests = [r for r in script.requests if r["kind"] == "S"]
        second = _sweep(url, store, store / "recordings")
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    return store, client, first, second, s_requests


def _runs(client: MlflowClient, kind: str):
    exp = client.get_experiment_by_name("compaction")
    return client.search_runs([exp.experiment_id], f"tags.`washexp.kind` = '{kind}'", max_results=100)


# Since the public-API tracking merge (8b3e89b) these failed in 1 of 2 fresh-clone runs on 2026-12-04
# (a missing washexp.sha256 tag; a Traceback from Tracker.close): a race, issue 38's first item.
RACE = pytest.mark.xfail(strict=False, reason="a race in the public-API tracking path (issue 38)")


@RACE
def test_worker_error_reaches_the_command_as_one_line_and_exit_2(parallel):
    _, _, first, second, _ = parallel
    for proc in (first, second):
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert "washexp: topn=-1: must be >= 0" in proc.stderr.splitlines()
        assert "Traceback" not in proc.stderr


def test_one_fresh_store_two_writers_no_lock_or_migration_race(parallel):
    store, client, first, _, _ = parallel
    for bad in ("database is locked", "duplicate column", "UNIQUE constraint"):
        assert bad not in first.stderr
    assert [e.name for e in client.search_experiments()].count("compaction") == 1
    arms = _runs(client, "arm")
    assert sorted(r.data.tags["topn"] for r in arms) == ["0", "1"]
    assert {r.info.status for r in arms} == {"FINISHED"}
    assert len({r.data.tags["washexp.owner"] for r in arms}) == 2, "the two arms ran in two processes"
    assert not list(store.glob("multirun/.washexp-jobs-*")), "the outbox is removed"


@RACE
def test_two_processes_needing_one_summary_at_once_ask_once_and_log_the_same_bytes(parallel):
    _, client, _, _, s_requests = parallel
    assert len(s_requests) == 1, "the second worker waited for the first one's recording"
    conditions = _runs(client, "condition")
    assert len(conditions) == 2 and len({r.data.tags["washexp.owner"] for r in conditions}) == 2
    replied = s_requests[0]["wall"] + HOLD
    assert all(r.info.start_time / 1000 < replied for r in conditions), "both needed it while it was asked"
    tags = {r.data.tags["washexp.sha256.summary/g0.txt"] for r in conditions}
    files = {
        hashlib.sha256(Path(client.download_artifacts(r.info.run_id, "summary/g0.txt")).read_bytes()).hexdigest()
        for r in conditions
    }
    assert len(tags) == 1 and files == tags


def test_the_same_sweep_again_reuses_every_arm(parallel):
    _, client, _, second, _ = parallel
    assert len(_runs(client, "arm")) == 2 and len(_runs(client, "condition")) == 2
    assert (second.stdout + second.stderr).count("finished already; rerun=true runs it again") == 2


def test_the_store_and_experiment_are_made_before_any_job(tmp_path):
    """Both jobs fail before opening a tracker: the experiment can only come from the launching
    process's callback."""
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher", reason="needs the [test] extra (joblib launcher)")
    proc = run_cli(["-m", "hydra/launcher=joblib_local", "topn=-2,-1", "task=payment"], tmp_path, check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert sorted(line for line in proc.stderr.splitlines() if line.startswith("washexp:")) == [
        "washexp: topn=-1: must be >= 0",
        "washexp: topn=-2: must be >= 0",
    ]
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = client.get_experiment_by_name("compaction")
    assert exp is not None and not client.search_runs([exp.experiment_id])
