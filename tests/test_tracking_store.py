"""What a run puts in the store is what MLflow's own client calls put there.

The writer goes through MLflow's public client only: a run's files in one ``log_artifacts`` call,
each table by ``MlflowClient.log_table`` (MLflow writes its file and its tag), its params, metrics
and tags in ``log_batch`` calls, then ``set_terminated``. These tests write the same run both ways (the
writer, and MLflow's per-file calls) into one real store, SQLite and PostgreSQL, and compare
everything a fresh ``MlflowClient`` sees: run name, status, lifecycle, user, times, artifact
location, params, metrics with their steps, tags, artifact paths and their sha256, the tables
through ``mlflow.load_table``, what a search filter finds, and what the runner's lookup finds.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient

from tests.conftest import new_store_copy
from tests.postgres import postgres_cluster
from washexp.tracking import open_tracker
from washexp.tracking.runs import HASH_TAG, OWNER_TAG, PARENT_TAG, Found, FoundRun
from washexp.tracking.serialise import table_json, with_ids

PARAMS = {"model": "reference", "topn": 2, "roles": {"read": "reference", "jev": None}}
METRICS = {"retention": 0.75, "contexts": 3.0}
SERIES = {"round/kept": [4.0, 3.0, 3.0]}
TAGS = {"method": "S", "washexp.kind": "condition"}
ARTIFACTS = {"config.yaml": "a: 1\n", "summary/g0.txt": "kept ✓\n", "raw/blob.bin": bytes(range(256))}
TABLES = {
    "retention.json": {"field": ["a", "b"], "kept": [1.0, 0.0]},
    "tables/answers.json": pd.DataFrame({"answer": ['{"x": 1}', "n/a"], "ok": [True, False]}),
}
MANIFEST = {"fixture": {"task.yaml": "0" * 64}}


def _old_path(client: MlflowClient, experiment_id: str, run_id_of_new) -> str:
    """The writer before it batched: a file upload, then ``log_table`` per table, then the batch."""
    new = client.get_run(run_id_of_new)
    run = client.create_run(experiment_id, run_name=new.info.run_name, tags={**TAGS, HASH_TAG: "old"})
    manifest = {"artifacts": {}, **MANIFEST}
    with tempfile.TemporaryDirectory() as tmp:
        for rel, content in sorted(ARTIFACTS.items()):
            data = content.encode() if isinstance(content, str) else content
            Path(tmp, rel).parent.mkdir(parents=True, exist_ok=True)
            Path(tmp, rel).write_bytes(data)
            manifest["artifacts"][rel] = hashlib.sha256(data).hexdigest()
        for rel, table in sorted(TABLES.items()):
            frame = table if isinstance(table, pd.DataFrame) else pd.DataFrame(table)
            manifest["artifacts"][rel] = hashlib.sha256(table_json(frame).encode()).hexdigest()
        blob = (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode()
        Path(tmp, "manifest.json").write_bytes(blob)
        client.log_artifacts(run.info.run_id, tmp)
    for rel, table in sorted(TABLES.items()):
        client.log_table(run.info.run_id, data=table, artifact_file=rel)
    wanted = {k: v for k, v in new.data.tags.items() if k.startswith("washexp.sha256.")}
    params = [Param(k, v) for k, v in new.data.params.items()]
    metrics = [Metric(k, v, 0, 0) for k, v in METRICS.items()]
    metrics += [Metric(k, v, 0, i) for k, vs in SERIES.items() for i, v in enumerate(vs, 1)]
    client.log_batch(run.info.run_id, metrics=metrics, params=params, tags=[RunTag(k, v) for k, v in wanted.items()])
    client.set_terminated(run.info.run_id, "FINISHED")
    return run.info.run_id


def _seen(client: MlflowClient, run_id: str) -> dict:
    """Everything a reader of the store sees of one run, minus what names the run itself."""
    run = client.get_run(run_id)
    root = Path(client.download_artifacts(run_id, "", tempfile.mkdtemp()))
    files = {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
    skip = {HASH_TAG, OWNER_TAG, "mlflow.user", "mlflow.source.name", "mlflow.source.type"}
    info = run.info
    assert info.artifact_uri.endswith(f"/{run_id}/artifacts") and 0 < info.start_time <= info.end_time
    return {
        "name": info.run_name,
        "status": info.status,
        "stage": info.lifecycle_stage,
        "user": info.user_id,
        "artifact_root": info.artifact_uri.removesuffix(f"/{run_id}/artifacts"),
        "params": run.data.params,
        "metrics": run.data.metrics,
        "history": {k: [m.value for m in client.get_metric_history(run_id, k)] for k in SERIES},
        "tags": {k: v for k, v in run.data.tags.items() if k not in skip},
        "artifacts": {rel: hashlib.sha256(data).hexdigest() for rel, data in files.items()},
    }


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def database(request):
    """The SQL stores: SQLite (the default), and PostgreSQL, one cluster for the module (skipped,
    with the reason, where the machine has none)."""
    if request.param == "sqlite":
        yield None
    else:
        with postgres_cluster() as uri:
            yield uri


def _open(database: str | None, tmp_path: Path, artifacts: str | None = None, premade: bool = False):
    """A tracker on ``database`` (None: a SQLite file in ``tmp_path``), in an experiment of its own.
    ``premade``: the SQLite file starts as a copy of an empty store (where its making is not what
    the test checks: it saves a child process that migrates a new one)."""
    if database is None and premade and not (tmp_path / "mlflow.db").exists():
        new_store_copy(tmp_path / "mlflow.db")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}" if database is None else database
    return open_tracker(True, uri, artifacts, f"t-{tmp_path.name}", tmp_path)


def _fresh_client(tracker) -> MlflowClient:
    """A client of MLflow's own on the tracker's store: what a user's reader sees."""
    return MlflowClient(tracker.uri)


@pytest.fixture
def stored(tmp_path, database):
    """A run written by the tracker, and the same run by MLflow's per-file calls."""
    tracker = _open(database, tmp_path, str(tmp_path / "mlruns"), premade=True)
    with tracker.open("S top2 · backup", "new", PARAMS, TAGS) as run:
        run.finish(METRICS, ARTIFACTS, MANIFEST, tables=TABLES, series=SERIES)
    tracker.close()  # the writer thread has stored it
    old = _old_path(_fresh_client(tracker), tracker.experiment_id, run.run_id)
    return tracker, run.run_id, old


def test_a_run_stores_what_mlflow_per_file_calls_store(stored):
    tracker, new, old = stored
    client = _fresh_client(tracker)
    seen_new, seen_old = _seen(client, new), _seen(client, old)
    assert seen_new == seen_old
    # the documented set, so the comparison above cannot pass on two empty runs
    assert set(seen_new["artifacts"]) == {"manifest.json", *ARTIFACTS, *TABLES}
    assert json.loads(seen_new["tags"]["mlflow.loggedArtifacts"]) == [
        {"path": "retention.json", "type": "table"},
        {"path": "tables/answers.json", "type": "table"},
    ]
    for rel, digest in seen_new["artifacts"].items():
        tag = "washexp.sha256.manifest" if rel == "manifest.json" else f"washexp.sha256.{rel}"
        assert seen_new["tags"][tag] == digest
    assert seen_new["history"] == SERIES and seen_new["metrics"]["retention"] == 0.75
    assert seen_new["stage"] == "active" and seen_new["status"] == "FINISHED"


def test_a_search_finds_both_runs_by_param_metric_and_tag(stored):
    tracker, new, old = stored
    query = "params.model = 'reference' and metrics.retention > 0.5 and tags.method = 'S' and status = 'FINISHED'"
    found = tracker.client.search_runs([tracker.experiment_id], query)
    assert {r.info.run_id for r in found} == {new, old}


def test_the_runners_lookup_finds_what_a_fresh_client_finds(tmp_path, database):
    """The runner's lookup (newest FINISHED run of an identity, and any left RUNNING) answers what
    MLflow's own ``search_runs`` on the store says: metrics (nan and inf too), parent, owner."""
    tracker = _open(database, tmp_path, str(tmp_path / "mlruns"), premade=True)
    with tracker.open("parent", "p", PARAMS, TAGS) as parent:
        with tracker.open("done", "h", PARAMS, TAGS) as older:
            older.finish({"retention": 0.5}, {})
        time.sleep(0.01)  # start times are in ms: the newest FINISHED run is the one reused
        with tracker.open("redone", "h", PARAMS, TAGS, parent_id=parent.run_id) as run:
            run.finish({**METRICS, "nan": float("nan"), "inf": float("inf"), "-inf": -float("inf")}, {}, series=SERIES)
        running = tracker.open("again", "h", PARAMS, TAGS)
        parent.finish({}, {})
    tracker.close()
    found = tracker.find("h")
    client = _fresh_client(tracker)
    runs = client.search_runs(
        [client.get_experiment_by_name(f"t-{tmp_path.name}").experiment_id],
        f"tags.`{HASH_TAG}` = 'h'",
        order_by=["attributes.start_time DESC"],
    )
    seen = [
        FoundRun(r.info.run_id, r.info.status, r.data.metrics, r.data.tags.get(PARENT_TAG), r.data.tags.get(OWNER_TAG))
        for r in runs
    ]
    assert repr(found.finished) == repr(next(f for f in seen if f.finished))  # repr: nan != nan
    assert found.finished.run_id == run.run_id and found.finished.parent_id == parent.run_id
    assert found.finished.metrics["retention"] == 0.75 and found.finished.metrics["round/kept"] == 3.0
    assert found.finished.metrics["inf"] > 1e308 and found.finished.metrics["-inf"] < -1e308  # MLflow: +-max
    assert [r.run_id for r in found.running] == [running.run_id] and found.running[0].owner
    assert len(seen) == 3


def test_a_run_opened_while_the_store_is_set_up_waits_for_it(tmp_path):
    """While the store is set up (here held up by its lock, as another process opening it would),
    a lookup waits for it: a store is only ever read through MLflow, never half-made."""
    import threading

    from filelock import FileLock

    first = _open(None, tmp_path)
    with first.open("done", "h", PARAMS, TAGS) as done:
        done.finish(METRICS, ARTIFACTS)
    first.close()
    lock = FileLock(str(tmp_path / "mlflow.db.washexp.lock"))
    lock.acquire()
    tracker = _open(None, tmp_path)
    answers: list = []
    looking = threading.Thread(target=lambda: answers.append(tracker.find("h")))
    looking.start()
    looking.join(0.5)
    assert not answers and not tracker.ready  # held up by the lock: no answer read around MLflow
    lock.release()
    looking.join()
    assert answers[0].finished.run_id == done.run_id and answers[0].finished.metrics == METRICS
    run = tracker.open("child", "new", PARAMS, TAGS, parent_id=done.run_id)
    run.finish({"retention": 0.5}, {"a.txt": "x\n"})
    tracker.close()
    stored = _fresh_client(tracker).get_run(run.run_id)
    assert stored.info.status == "FINISHED" and stored.data.tags[PARENT_TAG] == done.run_id
    assert stored.data.metrics == {"retention": 0.5} and tracker.find("new").finished.run_id == run.run_id


def test_a_wait_for_the_set_up_cut_short_by_a_signal_waits_again_the_next_time(tmp_path):
    """SIGTERM while the main thread waits for the store's set-up (a sweep stopped as it starts):
    the wait ends with the signal's exception, and the sweep's close waits again for the set-up
    and ends normally. (Python 3.11 leaves a thread whose join a signal cut short looking
    finished: the close then read a store not yet set up, an AssertionError, exit 1 for 143.)"""
    import signal

    from filelock import FileLock

    lock = FileLock(str(tmp_path / "mlflow.db.washexp.lock"))
    lock.acquire()  # the set-up is held up, as by another process opening the store
    tracker = _open(None, tmp_path)
    previous = signal.signal(signal.SIGUSR1, lambda *_: sys.exit(143))
    timer = threading.Timer(0.3, signal.pthread_kill, (threading.main_thread().ident, signal.SIGUSR1))
    try:
        timer.start()
        with pytest.raises(SystemExit):
            tracker.wait_set_up()
    finally:
        timer.cancel()
        signal.signal(signal.SIGUSR1, previous)
    assert not tracker.ready
    lock.release()
    tracker.close()  # waits for the set-up again, then finds nothing left to write
    assert tracker.ready and tracker.experiment_id


def test_a_fresh_store_holds_no_run(tmp_path):
    tracker = _open(None, tmp_path)
    assert tracker.find("h") == Found() and tracker.ready
    tracker.close()


def test_tables_load_across_runs_as_mlflow_logged_them(stored):
    tracker, new, old = stored
    table = tracker.client.load_table(tracker.experiment_id, "retention.json", [new, old], extra_columns=["run_id"])
    assert len(table) == 4
    rows = {r: table[table.run_id == r].drop(columns="run_id").reset_index(drop=True) for r in (new, old)}
    assert rows[new].equals(rows[old]) and rows[new]["field"].tolist() == ["a", "b"]


def test_a_tables_trace_placeholders_become_the_stored_ids_and_nothing_else_moves():
    ids = {"washexp-trace-a": "tr-1", "washexp-trace-b": "tr-2"}
    frame = pd.DataFrame(
        {"g": [0, 1, 2], "trace_id": ["washexp-trace-b", "washexp-trace-a", "washexp-trace-c"], "x": ["a", "b", None]}
    )
    named = with_ids(frame, ids)
    assert named["trace_id"].tolist() == ["tr-2", "tr-1", "washexp-trace-c"]  # an unknown one stays as it is
    assert named[["g", "x"]].equals(frame[["g", "x"]]) and frame["trace_id"][0] == "washexp-trace-b"  # a copy
    assert with_ids(frame, {}) is frame and with_ids(frame, {"no": "such"}) is frame


def test_a_failed_run_keeps_its_error_and_manifest(tmp_path, database):
    tracker = _open(database, tmp_path, premade=True)
    with pytest.raises(ValueError), tracker.open("broken", "h", PARAMS, TAGS):
        raise ValueError("scripted failure")
    tracker.close()
    run = tracker.client.search_runs([tracker.experiment_id])[0]
    assert run.info.status == "FAILED" and run.data.tags["washexp.error"] == "ValueError: scripted failure"
    seen = _seen(tracker.client, run.info.run_id)
    assert set(seen["artifacts"]) == {"error.txt", "manifest.json"}
    assert seen["tags"]["washexp.sha256.error.txt"] == seen["artifacts"]["error.txt"]


def test_the_sqlite_store_commits_through_a_write_ahead_log(tmp_path):
    """Each run commits several transactions; with the rollback journal each waited on the disk."""
    import sqlite3

    open_tracker(True, f"sqlite:///{tmp_path / 'mlflow.db'}", None, "t", tmp_path).close()  # set up
    with sqlite3.connect(tmp_path / "mlflow.db") as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_write_that_fails_on_the_writer_thread_is_raised_at_the_next_tracking_call(tmp_path, database):
    """Runs are written on the tracker's writer thread: its failure must reach the sweep, and the
    run must not read FINISHED: it ends FAILED (a later start redoes it), naming why."""
    from urllib.parse import urlparse

    tracker = _open(database, tmp_path, str(tmp_path / "mlruns"), premade=True)
    tracker.wait_set_up()  # the run is created as it opens, so its artifact folder is known
    run = tracker.open("S top2 · backup", "h", PARAMS, TAGS)
    artifacts = Path(urlparse(run.artifact_uri).path)
    artifacts.parent.mkdir(parents=True, exist_ok=True)
    artifacts.write_text("a file where the run's artifact folder goes")
    run.finish(METRICS, ARTIFACTS)  # handed over: the failure comes later, on the writer thread
    from washexp.tracking.failures import StoreError

    with pytest.raises(StoreError, match="the tracking store failed mid-run"):  # one line, not a traceback
        tracker.close()
    stored = tracker.client.get_run(run.run_id)
    assert stored.info.status == "FAILED"
    assert stored.data.tags["washexp.error"].startswith("its artifacts could not be stored: ")
    tracker.close()  # reported once; the writer goes on


def test_a_full_disk_mid_sweep_ends_the_runs_in_progress_failed_not_running(tmp_path, database):
    """The artifact folder cannot take a run's files (a real file-system limit: RLIMIT_FSIZE, as a
    full disk's ENOSPC): that run and the runs still open end FAILED while the database can be
    written, and the failure is one StoreError (issue 37: they were left RUNNING)."""
    import resource

    from washexp.tracking.failures import StoreError

    tracker = _open(database, tmp_path, str(tmp_path / "mlruns"), premade=True)
    tracker.wait_set_up()
    arm = tracker.open("S top2", "arm", PARAMS, TAGS)
    full = tracker.open("S top2 · backup", "h1", PARAMS, TAGS, parent_id=arm.run_id)
    open_ = tracker.open("S top2 · payment", "h2", PARAMS, TAGS, parent_id=arm.run_id)
    sizes = [f.stat().st_size for f in tmp_path.rglob("*") if f.is_file()]  # a SQLite store's files
    limit = max([0, *sizes]) + (1 << 20)  # room for the database's rows
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        full.finish(METRICS, {"context.txt": b"x" * (2 * limit)})  # larger than the file system takes
        tracker._writer._queue.join()  # its write has failed on the writer thread
        with pytest.raises(StoreError, match="the tracking store failed mid-run"):
            open_.end_by(StoreError("stopped"))  # what the sweep does to the runs still open
        arm.end_by(StoreError("stopped"))
        tracker.close()  # reported once
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    status = {r.info.run_name: r.info.status for r in tracker.client.search_runs([tracker.experiment_id])}
    assert status == {"S top2": "FAILED", "S top2 · backup": "FAILED", "S top2 · payment": "FAILED"}
    error = tracker.client.get_run(full.run_id).data.tags["washexp.error"]
    assert error == "its artifacts could not be stored: OSError: [Errno 27] File too large"


@pytest.mark.parametrize("stop", [KeyboardInterrupt, SystemExit])
def test_a_run_stopped_mid_block_ends_killed_with_its_reason(tmp_path, database, stop):
    """Ctrl-C (KeyboardInterrupt) or SIGTERM (SystemExit, washexp's handler) inside a run's block:
    the run is stopped, not broken, and never left RUNNING, even though the writer thread stores it."""
    tracker = _open(database, tmp_path, premade=True)
    with pytest.raises(stop), tracker.open("S top2 · backup", "h", PARAMS, TAGS):
        raise stop()
    tracker.close()
    run = tracker.client.search_runs([tracker.experiment_id])[0]
    assert run.info.status == "KILLED"
    assert run.data.tags["washexp.error"].startswith(stop.__name__)


def test_a_run_ends_when_it_was_closed_not_when_the_writer_thread_got_to_it(tmp_path, database):
    """The writer thread may lag behind (a sweep's runs queue up): a run's end time and its
    metrics' timestamps are when it was closed, so the UI's durations and overlaps are true."""
    tracker = _open(database, tmp_path, premade=True)
    busy = threading.Event()
    tracker._writer.submit("busy", lambda: busy.wait(120))  # the writer thread is busy until released
    with tracker.open("S top2 · backup", "h", PARAMS, TAGS) as run:
        closed = int(time.time() * 1000)
        run.finish(METRICS, ARTIFACTS)
    returned = int(time.time() * 1000)
    time.sleep(0.05)  # the writer's clock, once released, is past ``returned`` (only a wrong end is moved)
    busy.set()
    tracker.close()
    stored = tracker.client.get_run(run.run_id)
    assert stored.info.status == "FINISHED"
    assert closed <= stored.info.end_time <= returned  # ordered by events, not by a bound in ms
    history = tracker.client.get_metric_history(run.run_id, "retention")
    assert [closed <= m.timestamp <= returned for m in history] == [True]


def test_a_param_too_long_for_mlflow_is_stored_whole_as_the_artifact_it_names(tmp_path):
    """The trap: MLflow refuses a param over 6,000 characters, and the writer used to cut it there
    silently. The whole value is now an artifact in the run's manifest; the param names it."""
    long = {"roles": {"read": "x" * 7000}}
    tracker = _open(None, tmp_path, premade=True)
    with tracker.open("long", "long", {"model": "reference", **long, "short": "y" * 6000}, TAGS) as run:
        run.finish(METRICS, ARTIFACTS)
    tracker.close()
    client = _fresh_client(tracker)
    seen = _seen(client, run.run_id)
    whole = json.dumps(long["roles"], sort_keys=True, separators=(",", ":")).encode()
    digest = hashlib.sha256(whole).hexdigest()
    root = Path(client.download_artifacts(run.run_id, "", tempfile.mkdtemp()))
    assert (root / "params" / "roles.txt").read_bytes() == whole  # whole, not cut
    assert seen["artifacts"]["params/roles.txt"] == digest == seen["tags"]["washexp.sha256.params/roles.txt"]
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["artifacts"]["params/roles.txt"] == digest
    assert seen["params"]["roles"] == f"see artifact params/roles.txt (sha256 {digest}, {len(whole)} bytes)"
    assert seen["params"]["short"] == "y" * 6000 and seen["params"]["model"] == "reference"  # at the limit: a param


def test_a_secret_in_a_table_is_masked_before_mlflow_writes_it(tmp_path, monkeypatch):
    """MLflow's ``log_table`` writes the table: a secret in a column name or a cell (nested too)
    is masked before, and the manifest names the bytes MLflow wrote."""
    secret = "sk-table-secret-1234"
    monkeypatch.setenv("WASHEXP_TEST_API_KEY", secret)
    tracker = _open(None, tmp_path, premade=True)
    table = {"answer": [f"key {secret}", "n/a"], secret: [["a", secret], {"k": secret}], "n": [1, 2]}
    with tracker.open("secret", "s", {}, {}) as run:
        run.finish({}, {}, tables={"t.json": table})
    tracker.close()
    client = _fresh_client(tracker)
    path = Path(client.download_artifacts(run.run_id, "t.json", tempfile.mkdtemp()))
    data = path.read_bytes()
    assert secret.encode() not in data and data.count(b"***") == 4
    assert client.get_run(run.run_id).data.tags["washexp.sha256.t.json"] == hashlib.sha256(data).hexdigest()
    assert table["answer"][0] == f"key {secret}"  # the caller's table is left as it was


def test_a_store_refusing_through_mlflow_s_client_is_one_store_error(tmp_path):
    """What MLflow's public client raises for a failing store (``MlflowException``: its SQL store
    wraps every database error in one) is the tracker's one line, not a traceback. Here the store
    refuses a run because the experiment was deleted under the sweep."""
    from washexp.tracking.failures import StoreError

    tracker = _open(None, tmp_path, premade=True)
    tracker.wait_set_up()
    _fresh_client(tracker).delete_experiment(tracker.experiment_id)
    with pytest.raises(StoreError, match=r"the tracking store failed mid-run \(The experiment .* deleted\.\)$"):
        with tracker.open("r", "h1", {"a": "1"}, {}) as run:
            run.finish({"m": 1.0}, {})
        tracker.close()


def test_a_run_past_mlflow_s_batch_limits_is_stored_whole(tmp_path):
    """MLflow's store takes at most 100 params, 100 tags and 1,000 values a call: a run with more
    of each (one ``log_batch`` that MLflow's client splits) is stored whole, at both ends of the
    pinned range."""
    tracker = _open(None, tmp_path, premade=True)
    params = {f"p{i:03d}": i for i in range(250)}
    tags = {f"t{i:03d}": str(i) for i in range(250)}
    metrics = {f"m{i:04d}": float(i) for i in range(1_700)}
    with tracker.open("many", "h-many", params, tags) as run:
        run.finish(metrics, {})
    tracker.close()
    data = _fresh_client(tracker).get_run(run.run_id).data
    assert {k: v for k, v in data.params.items() if k.startswith("p")} == {k: str(v) for k, v in params.items()}
    assert {k: v for k, v in data.tags.items() if k in tags} == tags
    assert {k: v for k, v in data.metrics.items() if k.startswith("m")} == metrics
