"""Parallel launchers: ``hydra/launcher=joblib_local`` runs jobs in two worker processes that
write one fresh SQLite store, and a frozen summary two of them need at once stays one summary.

The sweep (``method=S topn=-1..1 model=openai``, task payment, one generation) runs as the real
command line against the scripted server, whose S replies are sampled (each request would get a
different text) and held (``Script.hold``) until both workers' conditions have started: both
processes need the same summary at once, one asks the model, the other waits for its recording
and replays it.
``topn=-1`` is a user error raised in a worker: the command must still end in its one line and
exit 2. The same command again reuses every finished arm.
"""

from __future__ import annotations

import hashlib
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import run_cli, scripted_model
from tests.openai_server import Script, serve

SECRET = "sk-test-SECRET-parallel"


def _sweep(url: str, store: Path, recordings: Path):
    return run_cli(
        [
            "-m",
            "hydra/launcher=joblib_local",
            "method=S",
            "topn=-1..1",
            "task=payment",
            *scripted_model(url, recordings, "qwen3.8-max", platform=None, answers=None),
        ],
        store,
        env={"OPENAI_API_KEY": SECRET, "CI": "1"},
        check=False,
        child=True,  # the workers' lines go to the descriptors, which only a child's capture holds
    )


@pytest.fixture(scope="module")
def parallel(tmp_path_factory):
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher", reason="needs the [test] extra (joblib launcher)")
    store = tmp_path_factory.mktemp("parallel")
    script = Script()
    # S's reply is held until both workers' conditions have started (a condition, not a guess of
    # seconds that a busy machine can overrun)
    script.hold = {"S": lambda: _conditions_started(store / "mlflow.db") >= 2}
    with serve(script) as url:
        first = _sweep(url, store, store / "recordings")
        s_requests = [r for r in script.requests if r["kind"] == "S"]
        second = _sweep(url, store, store / "recordings")
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    return store, client, first, second, s_requests


def _conditions_started(db: Path) -> int:
    """Read-only, with sqlite3 (an MLflow client here would migrate the store the sweep is making)."""
    try:
        with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)) as con:
            (count,) = con.execute(
                "SELECT COUNT(*) FROM tags WHERE key = 'washexp.kind' AND value = 'condition'"
            ).fetchone()
    except sqlite3.Error:  # not made yet, its tables not yet there, or locked by a write
        return 0
    return count


def _runs(client: MlflowClient, kind: str):
    exp = client.get_experiment_by_name("compaction")
    return client.search_runs([exp.experiment_id], f"tags.`washexp.kind` = '{kind}'", max_results=100)


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


def test_two_processes_needing_one_summary_at_once_ask_once_and_log_the_same_bytes(parallel):
    _, client, _, _, s_requests = parallel
    assert len(s_requests) == 1, "the second worker waited for the first one's recording"
    conditions = _runs(client, "condition")
    assert len(conditions) == 2 and len({r.data.tags["washexp.owner"] for r in conditions}) == 2
    replied = s_requests[0]["released"]
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


def test_a_workers_flush_returns_once_its_runs_are_stored(tmp_path):
    """A worker stores its runs before its job reports: at its exit OpenTelemetry's exit hook
    (registered at the first trace, after the tracker's) shuts the trace processor down first,
    and the traces of a write still queued then were dropped ("Processor is already shutdown":
    1 sweep in 6 lost a run's traces). ``Sweep.flush`` waits for the tracker's queued writes."""
    import threading

    from washexp.engine.sweep import Sweep
    from washexp.tracking.writer import MlflowTracker

    tracker = MlflowTracker(f"sqlite:///{tmp_path / 'mlflow.db'}", "compaction", tmp_path / "mlruns", tmp_path)
    sweep = Sweep(tmp_path)
    sweep.shared("tracker", lambda: tracker)
    stored, flushed = threading.Event(), threading.Event()
    tracker._writer.submit("a run", stored.wait)  # a write that ends when the test lets it

    def flush():
        sweep.flush()
        flushed.set()

    threading.Thread(target=flush, daemon=True).start()
    assert not flushed.wait(0.5), "flush returned while a write was still queued"
    stored.set()
    assert flushed.wait(60)
    tracker.close()
