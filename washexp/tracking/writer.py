"""Writing runs: one unit of work = one MLflow run, found again by its identity hash.

A run is a context manager: leaving its block by an exception ends it FAILED, by Ctrl-C or
SIGTERM (``KeyboardInterrupt``/``SystemExit``) KILLED, so no run is ever left RUNNING by this
process. A process killed outright (SIGKILL) does leave one: every run carries its owner
(``host:pid``), and the next start for the same identity marks a run whose owner is gone KILLED.

Every finished run carries a ``manifest.json`` of sha256 digests (its artifacts and tables, its
fixture files, the source that produced it), mirrored as tags.

Every store (a SQLite file, any other database, a tracking server) is written and read through
MLflow's public client only (``MlflowClient``: ``create_run``, ``log_batch``, ``log_artifacts``,
``set_terminated``, ``search_runs``; the experiment by id once found by name): no SQL of ours on
MLflow's tables, no private attribute, no ``mlflow.store`` import, so what MLflow's UI and server
read is what MLflow wrote. Closing a run hands its write (artifacts, params, metrics, tags, the status) to
one writer thread, so the next unit computes while the last one is stored. Runs are written in
the order they closed (a few at most wait), and a run turns FINISHED only once all of it is
stored. ``find`` waits for the writes if its own identity is among them (a sweep reuses what it
just finished), ``close`` for all of them (the sweep's end, also on Ctrl-C or SIGTERM); a write
that fails is raised on the calling thread at the next tracking call. A process killed outright
loses the writes still queued: their runs stay RUNNING under a dead owner, and the next start
marks them KILLED.

Opening the store and creating the experiment are guarded by a file lock (parallel jobs racing
to create one experiment, or to migrate a fresh SQLite schema, is a known MLflow failure).
Writers of one SQLite store in several processes need nothing more: MLflow's SQLAlchemy store
waits out another writer's lock (a 4-process stress run and a 20 s exclusive lock held by
another process both passed without a retry of ours).
"""

from __future__ import annotations

import atexit
import itertools
import json
import logging
import os
import queue
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from washexp.errors import WashexpError
from washexp.hashing import canonical_json, sha256_bytes, tree_digest
from washexp.masking import mask, mask_bytes, secret_values
from washexp.tracking.sqlite import check_store, ensure_store, store_path, write_ahead_log
from washexp.tracking.traces import ModelCall, TraceStore

HASH_TAG = "washexp.hash"
OWNER_TAG = "washexp.owner"
ERROR_TAG = "washexp.error"
ERROR_TYPE_TAG = "washexp.error_type"
"""The class name of the exception that failed a run (``OverWindow``): read as is, never parsed
out of the message."""
PARENT_TAG = "mlflow.parentRunId"
LINK_TAG = "washexp.link"
"""On a link run: the id of the finished run it stands for (see :meth:`Tracker.link`)."""
KIND_TAG = "washexp.kind"
LOGGED_ARTIFACTS_TAG = "mlflow.loggedArtifacts"  # what MlflowClient.log_table sets; the UI lists tables by it
_BATCH = 100  # MLflow accepts at most 100 params or tags per batch call
_METRICS_BATCH = 800  # and 1,000 values in all: 800 metrics beside 100 params and 100 tags
OWNER = f"{socket.gethostname()}:{os.getpid()}"


class StoreError(WashexpError):
    """The tracking store failed mid-run (full, gone read-only, damaged): one line, exit 1. The runs
    in progress end FAILED where the database can still be written (a full artifact folder); those
    it could not end stay RUNNING under this process, and the next start marks them KILLED."""


def _store_failure(uri: str, err: BaseException) -> StoreError | None:
    """``err`` as a :class:`StoreError` when the store (the database or the artifact folder) raised
    it; None for anything else, which is a bug and stays itself."""
    if not isinstance(err, (OSError, *_loaded_store_errors())):
        return None
    root = err
    while root.__cause__ is not None or root.__context__ is not None:
        root = root.__cause__ or root.__context__
    text = str(root).strip()
    reason = getattr(root, "strerror", None) or (text.splitlines()[0] if text else type(root).__name__)
    return StoreError(f"{uri}: the tracking store failed mid-run ({reason})")


def _loaded_store_errors() -> tuple[type, ...]:
    """MLflow's, SQLAlchemy's and SQLite's error classes, where imported: an error of a class never
    imported was never raised, and importing them here could race the store's set-up importing MLflow."""
    found = (
        getattr(sys.modules.get(module), name, None)
        for module, name in (
            ("mlflow.exceptions", "MlflowException"),
            ("sqlalchemy.exc", "SQLAlchemyError"),
            ("sqlite3", "Error"),
        )
    )
    return tuple(kind for kind in found if isinstance(kind, type))


@contextmanager
def _holding(held: list) -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM while a run is created or closed (``held`` collects them, with the
    handlers to deliver them to): a run is never left half-written. ``_deliver(held)`` after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {s: signal.getsignal(s) for s in signals}
    for s in signals:
        signal.signal(s, lambda n, _f: held.append((n, previous[n])))
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _deliver(held: list) -> None:
    """Raise the first held signal as its handler would have (Ctrl-C: ``KeyboardInterrupt``)."""
    for n, handler in held[:1]:
        if callable(handler):
            handler(n, None)
        elif n == signal.SIGINT:
            raise KeyboardInterrupt


@dataclass(frozen=True)
class FoundRun:
    run_id: str
    status: str
    metrics: dict[str, float]
    parent_id: str | None
    owner: str | None = None

    @property
    def finished(self) -> bool:
        return self.status == "FINISHED"

    @property
    def orphaned(self) -> bool:
        """RUNNING, but its owner process on this host is gone (killed outright)."""
        if self.status != "RUNNING" or not self.owner:
            return self.status == "RUNNING"
        host, _, pid = self.owner.rpartition(":")
        if host != socket.gethostname() or not pid.isdigit():
            return False  # another machine's run: it may well be alive
        if int(pid) == os.getpid():
            return False
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


@dataclass(frozen=True)
class Found:
    """The runs with one identity: the newest FINISHED one, and any left RUNNING."""

    finished: FoundRun | None = None
    running: tuple[FoundRun, ...] = ()


@dataclass
class Run:
    """An open run: ``finish`` once, or leave the block by an exception. Params, metrics and
    tags go to the store in one batch when it closes."""

    tracker: Tracker | NullTracker
    run_id: str
    params: dict[str, Any]
    artifact_uri: str = ""
    identity: str = ""
    closed: bool = field(default=False)
    series: dict[str, list[float]] = field(default_factory=dict)
    claim: Any = None
    """The identity's claim (:meth:`Tracker.claim`), released once the run's close is stored."""
    traces: tuple[ModelCall, ...] = ()

    def finish(
        self,
        metrics: dict[str, float],
        artifacts: dict[str, str | bytes],
        manifest_extra: dict[str, dict[str, str]] | None = None,
        tags: dict[str, str] | None = None,
        tables: dict[str, Any] | None = None,
        series: dict[str, list[float]] | None = None,
        traces: tuple[ModelCall, ...] = (),
    ) -> None:
        """``tables``: artifact file (``*.json``) -> DataFrame or column dict, stored as
        MLflow's ``log_table`` stores one (``mlflow.load_table(file, extra_columns=["run_id"])`` gathers one
        across runs). ``series``: step metrics, one value per step from step 1. ``traces``: the
        model calls behind the run, each an MLflow trace attached to it (:mod:`~washexp.tracking.traces`)."""
        self.series = series or {}
        self.traces = traces
        self.tracker._close(self, metrics, artifacts, manifest_extra or {}, tags or {}, tables or {}, "FINISHED")

    def fail(self, error: BaseException, status: str = "FAILED") -> None:
        text = "".join(traceback.format_exception(error))
        tags = {ERROR_TAG: f"{type(error).__name__}: {error}"[:5000], ERROR_TYPE_TAG: type(error).__name__}
        tags |= getattr(error, "tags", None) or {}  # what the error says of the runs it ends (stopped=budget)
        self.tracker._close(self, {}, {"error.txt": text}, {}, tags, {}, status)

    def end_by(self, error: BaseException) -> None:
        """End the run by ``error``: FAILED, or KILLED for KeyboardInterrupt and SystemExit
        (Ctrl-C, SIGTERM: stopped, not broken)."""
        self.fail(error, status="FAILED" if isinstance(error, Exception) else "KILLED")

    def __enter__(self) -> Run:
        return self

    def __exit__(self, kind, error, tb) -> None:
        if not self.closed:
            self.end_by(error or RuntimeError("the run's block ended without a result"))


class _Writer:
    """One daemon thread running writes in the order they were handed over. At most ``BACKLOG``
    closes wait: a sweep that computes faster than its store writes waits for the store, so a
    stop never waits on a long queue and a kill loses little (a run's creation, handed over while
    the store is still being set up, is small and never waits). Each write names the identity it
    stores, so a lookup waits only when its own identity is still on the way."""

    BACKLOG = 4

    def __init__(self) -> None:
        self._queue: queue.Queue = queue.Queue()
        self._room = threading.BoundedSemaphore(self.BACKLOG)
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._pending: dict[str, int] = {}

    def submit(self, key: str, write, bounded: bool = True, closing: bool = False) -> None:
        """Hand ``write`` over; raise an earlier write's failure. A ``closing`` write (a run's end)
        is handed over first and the failure raised after: a run whose store failed (a full disk)
        still ends FAILED where the store can still be written, never left RUNNING."""
        if not closing:
            self._raise()
        self._put(key, write, bounded)
        if closing:
            self._raise()

    def _put(self, key: str, write, bounded: bool) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="washexp-tracking-writer", daemon=True)
            self._thread.start()
        if bounded:
            self._room.acquire()
        with self._lock:
            self._pending[key] = self._pending.get(key, 0) + 1
        self._queue.put((key, write, bounded))

    def drain(self) -> None:
        """Wait until every write handed over is stored; raise the first that failed."""
        self._queue.join()
        self._raise()

    def wait_for(self, key: str) -> None:
        """Wait for the writes before and of ``key`` if one is still queued; raise a failure."""
        with self._lock:
            queued = key in self._pending
        if queued:
            self._queue.join()
        self._raise()

    def _raise(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise error

    def _loop(self) -> None:
        while True:
            key, write, bounded = self._queue.get()
            try:
                write()
            except BaseException as err:  # reported to the calling thread, never lost
                self._error = self._error or err
            finally:
                with self._lock:
                    self._pending[key] -= 1
                    if not self._pending[key]:
                        del self._pending[key]
                if bounded:
                    self._room.release()
                self._queue.task_done()


class _Store(NamedTuple):
    """The store once it is set up: the experiment's id and MLflow's client on the store."""

    experiment_id: str
    client: Any


class Tracker:
    def __init__(self, uri: str, experiment: str, artifact_root: Path | None, lock_dir: Path):
        """``artifact_root``: where a new experiment keeps its artifacts; None leaves it to the
        tracking server. ``lock_dir`` holds the lock on experiment creation.

        The checks a user acts on (an empty, damaged or read-only SQLite file) run here, before
        any work. Importing MLflow and setting the store up (a fresh SQLite schema, the
        experiment) run on a thread of their own, so they overlap what a sweep does before its
        first lookup (composing, planning, loading fixtures); anything that needs the store waits
        for it. A set-up that fails raises at the next tracking call, as a store failure would."""
        # MLflow's telemetry thread (a network call at import) sets and pops a variable of
        # os.environ while this thread may be copying it: a copy then raised KeyError
        # ('_MLFLOW_TELEMETRY_SESSION_ID'), 1 next run in 24 of bench/bench_first_run_kills.py.
        # Set here, on the calling thread, before any thread imports MLflow; a sweep never phones home.
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
        # Traces are exported on our writer thread already; MLflow's own queue for them waits up to
        # 1 s on each flush (a run's traces are flushed before its status): 1.3 s a traced run.
        os.environ["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] = "false"
        self._db = store_path(uri)
        if self._db is not None:
            check_store(uri, write=True)  # one line for an empty, damaged or read-only file, before any work
        self.uri = uri
        self.failed: StoreError | None = None
        self._writer = _Writer()
        self._experiment = experiment
        self._claims = _lock_path(uri, lock_dir).with_suffix(".claims")
        self._store_lock = _lock_path(uri, lock_dir)
        self._set_up: _Store | None = None
        self._set_up_error: BaseException | None = None
        self._setting_up = threading.Thread(  # the one thread that imports MLflow: two at once can deadlock
            target=self._set_up_store, args=(artifact_root,), name="washexp-tracking-setup", daemon=True
        )
        self._setting_up.start()
        self.traces = TraceStore(lambda: (self.client, self.experiment_id))  # asked at its first write
        atexit.register(self.close)

    def _set_up_store(self, artifact_root: Path | None) -> None:
        try:
            import mlflow
            from filelock import FileLock
            from mlflow.tracking import MlflowClient

            from washexp.tracking.reader import quiet_mlflow

            with quiet_mlflow():
                if self._db is not None:
                    write_ahead_log()  # before MLflow's first connection to the store
                mlflow.set_tracking_uri(self.uri)
                logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)  # its tracebacks: our one line
                with FileLock(str(self._store_lock)):
                    if self._db is not None:
                        ensure_store(self._db)  # a new store whole or not at all, never half-made
                    client = MlflowClient(self.uri)  # opens (on first use migrates) the store: one process at a time
                    found = client.get_experiment_by_name(self._experiment)
                    experiment_id = (
                        found.experiment_id
                        if found
                        else client.create_experiment(
                            self._experiment, artifact_location=artifact_root.as_uri() if artifact_root else None
                        )
                    )
                self._set_up = _Store(experiment_id, client)
        except BaseException as err:  # raised on the calling thread at its next tracking call
            self._set_up_error = err

    def _store(self) -> _Store:
        """The store, once its set-up has ended (waited for); its failure raised again."""
        if self._set_up is None:
            self._setting_up.join()
            if self._set_up_error is not None:
                raise self._set_up_error
        return self._set_up

    def wait_set_up(self) -> None:
        """Wait for the store's set-up; raise its failure."""
        with self._guard():
            self._store()

    @property
    def ready(self) -> bool:
        """The store is set up (or its set-up failed): asking for it waits no more."""
        return not self._setting_up.is_alive()

    @property
    def client(self):
        """MLflow's client on the store (once set up)."""
        return self._store().client

    @property
    def experiment_id(self) -> str:
        return self._store().experiment_id

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """A store failure (:func:`_store_failure`) becomes the one :class:`StoreError` of this
        tracker; any other exception passes as it is."""
        try:
            yield
        except StoreError:
            raise
        except BaseException as err:
            failure = _store_failure(self.uri, err)
            if failure is None:
                raise
            self.failed = self.failed or failure
            raise self.failed from None

    def close(self) -> None:
        """Wait for every run handed to the writer (the sweep's end). A store that already failed
        was reported once: the writes it refuses after that (the open runs' FAILED) raise nothing."""
        reported = self.failed is not None
        try:
            with self._guard():
                self._writer.drain()
                self._store()  # a set-up no write needed still ends here (and a failed one is said)
        except StoreError:
            if not reported:
                raise

    def claim(self, identity_hash: str):
        """Claim the right to compute ``identity_hash``: a lock file beside the store, held until
        the run's close is stored (or the process dies), as the recorder's lock guards a model
        call. None when another process holds it: the caller waits and looks again."""
        from filelock import FileLock, Timeout

        self._claims.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(self._claims / f"{identity_hash}.lock"), timeout=0, thread_local=False)
        try:
            lock.acquire()
        except Timeout:
            return None
        return lock

    def find(self, identity_hash: str) -> Found:
        with self._guard():
            return self._find(identity_hash)

    def _find(self, identity_hash: str) -> Found:
        self._writer.wait_for(identity_hash)  # what this process finished is in the store before it is looked for
        runs = [
            (r.info.run_id, r.info.status, dict(r.data.metrics), r.data.tags)
            for r in self.client.search_runs(
                [self.experiment_id],
                filter_string=f"tags.`{HASH_TAG}` = '{identity_hash}'",
                order_by=["attributes.start_time DESC"],
                max_results=50,
            )
        ]
        found = [FoundRun(i, status, m, t.get(PARENT_TAG), t.get(OWNER_TAG)) for i, status, m, t in runs]
        finished = next((f for f in found if f.finished), None)
        return Found(finished, tuple(f for f in found if f.status == "RUNNING"))

    def open(
        self,
        name: str,
        identity_hash: str,
        params: dict[str, Any],
        tags: dict[str, str],
        parent_id: str | None = None,
        claim: Any = None,
    ) -> Run:
        if self.failed:  # a store that failed is not asked again: no more runs left RUNNING in it
            raise self.failed
        with self._guard():
            return self._open(name, identity_hash, params, tags, parent_id, claim)

    def _open(self, name: str, identity_hash: str, params: dict[str, Any], tags: dict[str, str], parent_id, claim):
        tags = {**tags, OWNER_TAG: OWNER}
        if identity_hash:  # a link run has none
            tags[HASH_TAG] = identity_hash
        if parent_id:
            tags[PARENT_TAG] = parent_id
        client, experiment_id = self.client, self.experiment_id  # the set-up waited for outside the hold
        held: list = []
        with _holding(held):
            created = client.create_run(experiment_id, run_name=name, tags=tags)
            run_id, artifact_uri = created.info.run_id, created.info.artifact_uri
        run = Run(self, run_id, params, artifact_uri, identity=identity_hash, claim=claim)
        if held:  # stopped while it was being created: it ends KILLED, never RUNNING
            run.end_by(KeyboardInterrupt("stopped as the run started"))
            _deliver(held)
        return run

    def mark_killed(self, run: FoundRun, reason: str) -> None:
        """End a run whose process is gone: KILLED, never RUNNING forever."""
        with self._guard():
            self.client.set_tag(run.run_id, ERROR_TAG, mask(reason))
            self.client.set_terminated(run.run_id, "KILLED")

    def link(self, name: str, target: FoundRun, tags: dict[str, str], parent_id: str) -> None:
        """A reused finished run, listed under one more parent without leaving its own: a small
        FINISHED run of kind ``link`` under ``parent_id`` that names ``target`` (its metrics are
        copied for the UI; its artifacts stay with ``target``). It carries no identity, so it is
        never found, reused or linked itself; a record reads ``target`` through it."""
        tags = {**tags, KIND_TAG: "link", LINK_TAG: target.run_id}
        run = self.open(name, "", {}, tags, parent_id=parent_id)
        run.finish(target.metrics, {})

    def _log(self, run: Run, metrics, tags, status: str, ended: int, secrets: list[str] | None = None) -> None:
        """Params, metrics (and step series), tags in as few ``log_batch`` calls as MLflow takes
        (100 params and 100 tags, 1,000 values in all, a call), then the status. ``ended``: when
        the run was closed (ms), not when the writer thread got to it."""
        secrets = secret_values() if secrets is None else secrets  # read once for the whole run
        params = {k: mask(_param_value(v), secrets) for k, v in run.params.items()}
        points = [(k, float(v), ended, 0) for k, v in metrics.items() if v is not None]
        points += [(k, float(v), ended, i) for k, vs in run.series.items() for i, v in enumerate(vs, 1)]
        tagged = {k: mask(str(v), secrets) for k, v in tags.items()}
        from mlflow.entities import Metric, Param, RunTag

        ps = [Param(k, v) for k, v in params.items()]
        ms = [Metric(*point) for point in dict.fromkeys(points)]  # a repeated point is one value
        ts = [RunTag(k, v) for k, v in tagged.items()]
        batches = max(-(-len(ps) // _BATCH), -(-len(ts) // _BATCH), -(-len(ms) // _METRICS_BATCH))
        for i in range(batches):
            self.client.log_batch(
                run.run_id,
                metrics=ms[i * _METRICS_BATCH : (i + 1) * _METRICS_BATCH],
                params=ps[i * _BATCH : (i + 1) * _BATCH],
                tags=ts[i * _BATCH : (i + 1) * _BATCH],
            )
        self.client.set_terminated(run.run_id, status, end_time=ended)

    def _store_files(self, run: Run, files: dict[str, bytes]) -> None:
        """The run's artifacts, in one ``log_artifacts`` call from a temporary folder (MLflow's
        artifact repository for the run's URI copies or uploads them)."""
        with tempfile.TemporaryDirectory(prefix="washexp-") as tmp:
            _write_tree(Path(tmp), files)
            self.client.log_artifacts(run.run_id, tmp)

    def _close(self, run: Run, metrics, artifacts, manifest_extra, tags, tables, status) -> None:
        ended = int(time.time() * 1000)
        args = (run, dict(metrics), dict(artifacts), dict(manifest_extra), dict(tags), dict(tables), status, ended)
        held: list = []
        with _holding(held), self._guard():  # a Ctrl-C while the write is handed over waits: closed once
            run.closed = True
            self._writer.submit(run.identity, lambda: _released(run.claim, lambda: self._write(*args)), closing=True)
        _deliver(held)

    def _write(self, run: Run, metrics, artifacts, manifest_extra, tags, tables, status, ended: int) -> None:
        """The traces, one artifact upload (files, tables and the manifest), then the rows and the
        status. A table is the file ``log_table`` would write, plus the tag it would set (the UI's
        table view reads it): without its per-table list/get/set-tag round trips."""
        frames = {rel: _frame(data) for rel, data in tables.items()}
        if run.traces:  # first: MLflow names each trace as it stores it, and a table may name one
            self.traces.write(run.run_id, run.traces)
            stored = self.traces.stored_ids()
            frames = {rel: frame.replace(stored) for rel, frame in frames.items()}
        files = {rel: c.encode("utf-8") if isinstance(c, str) else c for rel, c in artifacts.items()}
        files |= {rel: table_json(frame).encode("utf-8") for rel, frame in frames.items()}
        secrets = secret_values()  # once for the run's files, params and tags
        files = {rel: mask_bytes(data, secrets) for rel, data in files.items()}  # before the digests: they name it
        manifest = {"artifacts": {rel: sha256_bytes(data) for rel, data in sorted(files.items())}, **manifest_extra}
        blob = (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode()
        files["manifest.json"] = blob
        try:
            self._store_files(run, files)
        except Exception as err:
            if _store_failure(self.uri, err) is None:
                raise
            self._end_without_files(run, status, ended, secrets, err)
            raise
        mirrored = {f"washexp.sha256.{rel}": digest for rel, digest in manifest["artifacts"].items()}
        mirrored["washexp.sha256.manifest"] = sha256_bytes(blob)
        for name, digests in manifest_extra.items():
            mirrored[f"washexp.sha256.{name}"] = tree_digest(digests)
        if tables:
            mirrored[LOGGED_ARTIFACTS_TAG] = json.dumps([{"path": rel, "type": "table"} for rel in sorted(tables)])
        self._log(run, metrics, {**tags, **mirrored}, status, ended, secrets)

    def _end_without_files(self, run: Run, status: str, ended: int, secrets: list[str], err: Exception) -> None:
        """The run's files could not be stored (a full disk, a folder gone read-only): it still
        ends, FAILED (KILLED stays KILLED), where its rows can be written; else it stays RUNNING
        and the next start marks it KILLED."""
        reason = f"its artifacts could not be stored: {type(err).__name__}: {err}"
        tags = {ERROR_TAG: reason[:5000], ERROR_TYPE_TAG: type(err).__name__}
        with suppress(Exception):  # the store's own failure is the one reported
            self._log(run, {}, tags, "KILLED" if status == "KILLED" else "FAILED", ended, secrets)


class _NoClaim:
    def release(self) -> None:
        pass


_NO_CLAIM = _NoClaim()


class NullTracker:
    """Tracking off (``tracking.enabled=false``): nothing is stored. Runs finished in this
    process are still found again, so one sweep never repeats identical work (Full under a
    top-N sweep runs once)."""

    traces = None
    """No store, no traces."""

    def __init__(self) -> None:
        self._ids = itertools.count()
        self._open: dict[str, str] = {}
        self._finished: dict[str, FoundRun] = {}

    def find(self, identity_hash: str) -> Found:
        return Found(self._finished.get(identity_hash))

    def claim(self, identity_hash: str):
        return _NO_CLAIM  # nothing is stored: nothing to share with another process

    def open(self, name: str, identity_hash: str, params: dict[str, Any], *args, **kwargs) -> Run:
        run_id = f"untracked-{next(self._ids)}"
        self._open[run_id] = identity_hash
        return Run(self, run_id, params)

    def mark_killed(self, run: FoundRun, reason: str) -> None:
        pass

    def link(self, name: str, target: FoundRun, tags: dict[str, str], parent_id: str) -> None:
        pass

    def _close(self, run: Run, metrics, artifacts, manifest_extra, tags, tables, status) -> None:
        run.closed = True
        identity = self._open.pop(run.run_id)
        if status == "FINISHED":
            self._finished[identity] = FoundRun(run.run_id, status, dict(metrics), None)


def _released(claim, write) -> None:
    """``write``, then the claim it was holding is released (whatever the write did)."""
    try:
        write()
    finally:
        if claim is not None:
            claim.release()


def _write_tree(folder: Path, files: dict[str, bytes]) -> None:
    made: set[str] = set()
    for rel, data in files.items():
        target = os.path.join(folder, rel)
        parent = os.path.dirname(target)
        if parent not in made:  # each folder made once (a run's requests/ holds a dozen files)
            os.makedirs(parent, exist_ok=True)
            made.add(parent)
        with open(target, "wb") as f:
            f.write(data)


def _lock_path(uri: str, lock_dir: Path) -> Path:
    """The lock that serialises opening a store: beside a SQLite file (every sweep writing it
    shares that lock, whatever its artifact root), else in ``lock_dir``."""
    db = store_path(uri)
    if db is not None:
        db.parent.mkdir(parents=True, exist_ok=True)
        return db.with_name(db.name + ".washexp.lock")
    lock_dir.mkdir(parents=True, exist_ok=True)
    return lock_dir / ".washexp.lock"


def _frame(data: Any):
    import pandas as pd

    return data if isinstance(data, pd.DataFrame) else pd.DataFrame(data)


def table_json(frame) -> str:
    """A table as ``MlflowClient.log_table`` writes a ``.json`` file (pandas ``split``, no index)."""
    return frame.to_json(orient="split", index=False, date_format="iso")


def _param_value(value: Any) -> str:
    text = value if isinstance(value, str) else canonical_json(value)
    return text[:6000]
