"""Writing runs: one unit of work = one MLflow run, found again by its identity hash.

A run is a context manager: leaving its block by an exception ends it FAILED, by Ctrl-C or
SIGTERM (``KeyboardInterrupt``/``SystemExit``) KILLED, so no run is ever left RUNNING by this
process. A process killed outright (SIGKILL) does leave one: every run carries its owner
(``host:pid``), and the next start for the same identity marks a run whose owner is gone KILLED.

Every finished run carries a ``manifest.json`` of sha256 digests (its artifacts and tables, its
fixture files, the source that produced it), mirrored as tags.

Every store (a SQLite file, any other database, a tracking server) is written and read through
MLflow's public client only (``MlflowClient``: ``create_run``, ``log_batch``, ``log_artifacts``,
``log_table``, ``set_terminated``, ``search_runs``; the experiment by id once found by name) and
nothing beneath it, so what MLflow's UI and server read is what MLflow wrote. Closing a run hands
its write (artifacts, params, metrics, tags, the status) to one writer thread
(:mod:`~washexp.tracking.write_queue`), so the next unit computes
while the last one is stored. Runs are written in the order they closed (a few at most wait), and a
run turns FINISHED only once all of it is stored. ``find`` waits for the writes if its own identity
is among them (a sweep reuses what it just finished), ``close`` for all of them (the sweep's end,
also on Ctrl-C or SIGTERM); a write that fails is raised on the calling thread at the next tracking
call. A process killed outright loses the writes still queued: their runs stay RUNNING under a dead
owner, and the next start marks them KILLED.

Opening the store and creating the experiment (:mod:`~washexp.tracking.setup`) are guarded by a
file lock (parallel jobs racing
to create one experiment, or to migrate a fresh SQLite schema, is a known MLflow failure).
Writers of one SQLite store in several processes need nothing more: MLflow's SQLAlchemy store
waits out another writer's lock (a 4-process stress run and a 20 s exclusive lock held by
another process both passed without a retry of ours).
"""

from __future__ import annotations

import atexit
import json
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from washexp.hashing import sha256_bytes, tree_digest
from washexp.masking import mask, mask_bytes, secret_values
from washexp.tracking.failures import StoreError, store_failure
from washexp.tracking.kinds import KIND_TAG, Kind
from washexp.tracking.reader import refuse_file_store
from washexp.tracking.runs import (
    ERROR_TAG,
    ERROR_TYPE_TAG,
    HASH_TAG,
    LINK_TAG,
    OWNER,
    OWNER_TAG,
    PARENT_TAG,
    SWEEP_TAG,
    Found,
    FoundRun,
    Run,
)
from washexp.tracking.serialise import (
    MAX_PARAM_CHARS,
    frame_of,
    masked_frame,
    param_artifact,
    param_texts,
    pointer,
    table_digest,
    unstored,
    with_ids,
    write_tree,
)
from washexp.tracking.setup import SetUp, lock_path, set_up_store
from washexp.tracking.signals import deliver, holding
from washexp.tracking.sqlite import check_store, store_path
from washexp.tracking.traces import TraceStore
from washexp.tracking.write_queue import WriteQueue


class MlflowTracker:
    def __init__(self, uri: str, experiment: str, artifact_root: Path | None, lock_dir: Path):
        """``artifact_root``: where a new experiment keeps its artifacts; None leaves it to the
        tracking server. ``lock_dir`` holds the lock on experiment creation.

        The checks a user acts on (an empty, damaged or read-only SQLite file) run here, before
        any work. Importing MLflow and setting the store up (a fresh SQLite schema, the
        experiment) run on a thread of their own, so they overlap what a sweep does before its
        first lookup (composing, planning, loading fixtures); anything that needs the store waits
        for it. A set-up that fails raises at the next tracking call, as a store failure would."""
        # MLflow's telemetry thread (a network call at import) sets and pops a variable of
        # os.environ while this thread may be copying it: a copy then raised KeyError (on its
        # telemetry session variable), 1 next run in 24 of bench/bench_first_run_kills.py.
        # Set here, on the calling thread, before any thread imports MLflow; a sweep never phones home.
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
        # Traces are exported on our writer thread already; MLflow's own queue for them waits up to
        # 1 s on each flush (a run's traces are flushed before its status): 1.3 s a traced run.
        os.environ["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] = "false"
        refuse_file_store(uri)  # else MLflow refuses it at the first run, after the sweep started
        self._db = store_path(uri)
        if self._db is not None:
            check_store(uri, write=True)  # one line for an empty, damaged or read-only file, before any work
        self.uri = uri
        self.failed: StoreError | None = None
        self._writer = WriteQueue()
        self._experiment = experiment
        self._claims = lock_path(uri, lock_dir).with_suffix(".claims")
        self._store_lock = lock_path(uri, lock_dir)
        self._set_up: SetUp | None = None
        self._set_up_error: BaseException | None = None
        # Waited on rather than the thread joined: on Python 3.11 a join cut short by a signal
        # leaves the thread looking finished, and the next join returns while it still runs.
        self._set_up_done = threading.Event()
        threading.Thread(  # the one thread that imports MLflow: two at once can deadlock
            target=self._set_up_store, args=(artifact_root,), name="washexp-tracking-setup", daemon=True
        ).start()
        self.traces = TraceStore(lambda: (self.client, self.experiment_id))  # asked at its first write
        atexit.register(self.close)

    def _set_up_store(self, artifact_root: Path | None) -> None:
        try:
            self._set_up = set_up_store(self.uri, self._db, self._experiment, artifact_root, self._store_lock)
        except BaseException as err:  # raised on the calling thread at its next tracking call
            self._set_up_error = err
        finally:
            self._set_up_done.set()

    def _store(self) -> SetUp:
        """The store, once its set-up has ended (waited for); its failure raised again."""
        if self._set_up is None:
            self._set_up_done.wait()
            if self._set_up_error is not None:
                raise self._set_up_error
        assert self._set_up is not None  # a set-up that ended without an error set the store
        return self._set_up

    def wait_set_up(self) -> None:
        """Wait for the store's set-up; raise its failure."""
        with self._guard():
            self._store()

    def _store_errors(self) -> tuple[type, ...]:
        """What MLflow's public client raises for a failing store: ``MlflowException`` (its SQL
        store wraps every database error in one). Only once the set-up thread is done with
        MLflow's import (two threads importing it at once can deadlock); before, no MLflow call
        was made, so none of its errors can be here."""
        if not self._set_up_done.is_set():
            return ()
        from mlflow.exceptions import MlflowException

        return (MlflowException,)

    @property
    def ready(self) -> bool:
        """The store is set up (or its set-up failed): asking for it waits no more."""
        return self._set_up_done.is_set()

    @property
    def client(self):
        """MLflow's client on the store (once set up)."""
        return self._store().client

    @property
    def experiment_id(self) -> str:
        return self._store().experiment_id

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """A store failure (:func:`~washexp.tracking.failures.store_failure`) becomes the one
        :class:`StoreError` of this tracker; any other exception passes as it is."""
        try:
            yield
        except StoreError:
            raise
        except BaseException as err:
            failure = store_failure(self.uri, err, self._store_errors())
            if failure is None:
                raise
            self.failed = self.failed or failure
            raise self.failed from None

    def flush(self) -> None:
        """Wait for every run handed to the writer (a job's end in a worker, the sweep's end). A
        store that already failed was reported once: the writes it refuses after that (the open
        runs' FAILED) raise nothing."""
        reported = self.failed is not None
        try:
            with self._guard():
                self._writer.drain()
                self._store()  # a set-up no write needed still ends here (and a failed one is said)
        except StoreError:
            if not reported:
                raise

    close = flush  # the sweep's end: nothing of the tracker is left to release

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
        matches = self.client.search_runs(
            [self.experiment_id], filter_string=f"tags.`{HASH_TAG}` = '{identity_hash}'", max_results=50
        )
        # newest first, sorted here: MLflow parsing an order_by cost a tenth of each lookup
        matches = sorted(matches, key=lambda r: r.info.start_time, reverse=True)
        runs = [(r.info.run_id, r.info.status, dict(r.data.metrics), r.data.tags) for r in matches]
        found = [
            FoundRun(i, status, m, t.get(PARENT_TAG), t.get(OWNER_TAG), t.get(SWEEP_TAG)) for i, status, m, t in runs
        ]
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
        with holding(held):
            created = client.create_run(experiment_id, run_name=name, tags=tags)
            run_id, artifact_uri = created.info.run_id, created.info.artifact_uri
        run = Run(self, run_id, params, artifact_uri, identity=identity_hash, claim=claim)
        if held:  # stopped while it was being created: it ends KILLED, never RUNNING
            run.end_by(KeyboardInterrupt("stopped as the run started"))
            deliver(held)
        return run

    def mark_killed(self, run: FoundRun, reason: str) -> None:
        """End a run whose process is gone: KILLED, never RUNNING forever."""
        with self._guard():
            self.client.set_tag(run.run_id, ERROR_TAG, mask(reason))
            self.client.set_terminated(run.run_id, "KILLED")

    def link(self, name: str, target: FoundRun, tags: dict[str, str], parent_id: str | None) -> None:
        """A reused finished run, listed under one more parent without leaving its own: a small
        FINISHED run of kind ``link`` under ``parent_id`` that names ``target`` (its metrics are
        copied for the UI; its artifacts stay with ``target``). It carries no identity, so it is
        never found, reused or linked itself; a record reads ``target`` through it. With no
        ``parent_id`` it is a top-level link: a whole arm (or measurement) another sweep finished,
        reused by the sweep its ``tags`` name."""
        tags = {**tags, KIND_TAG: Kind.LINK.value, LINK_TAG: target.run_id}
        run = self.open(name, "", {}, tags, parent_id=parent_id)
        run.finish(target.metrics, {})

    def _log(
        self, run: Run, metrics, tags, status: str, ended: int, secrets: list[str] | None = None, params=None
    ) -> None:
        """Params, metrics (and step series), tags in one ``log_batch`` (MLflow's client splits it
        into as many calls as its store takes: 100 params and 100 tags, 1,000 values a call), then
        the status. ``ended``: when the run was closed (ms), not when the writer thread got to it."""
        secrets = secret_values() if secrets is None else secrets  # read once for the whole run
        if params is None:  # no artifacts to point to: a long value says it was not stored, never cut
            params = {k: unstored(t) for k, t in param_texts(run.params).items()}
        params = {k: mask(v, secrets) for k, v in params.items()}
        points = [(k, float(v), ended, 0) for k, v in metrics.items() if v is not None]
        points += [(k, float(v), ended, i) for k, vs in run.series.items() for i, v in enumerate(vs, 1)]
        tagged = {k: mask(str(v), secrets) for k, v in tags.items()}
        from mlflow.entities import Metric, Param, RunTag

        ps = [Param(k, v) for k, v in params.items()]
        ms = [Metric(*point) for point in dict.fromkeys(points)]  # a repeated point is one value
        ts = [RunTag(k, v) for k, v in tagged.items()]
        self.client.log_batch(run.run_id, metrics=ms, params=ps, tags=ts)
        self.client.set_terminated(run.run_id, status, end_time=ended)

    def _store_files(self, run: Run, files: dict[str, bytes]) -> None:
        """The run's artifacts, in one ``log_artifacts`` call from a temporary folder (MLflow's
        artifact repository for the run's URI copies or uploads them)."""
        with tempfile.TemporaryDirectory(prefix="washexp-") as tmp:
            write_tree(Path(tmp), files)
            self.client.log_artifacts(run.run_id, tmp)

    def close_run(self, run: Run, metrics, artifacts, manifest_extra, tags, tables, status: str) -> None:
        ended = int(time.time() * 1000)
        args = (run, dict(metrics), dict(artifacts), dict(manifest_extra), dict(tags), dict(tables), status, ended)
        held: list = []
        with holding(held), self._guard():  # a Ctrl-C while the write is handed over waits: closed once
            run.closed = True
            self._writer.submit(run.identity, lambda: _released(run.claim, lambda: self._write(*args)), closing=True)
        deliver(held)

    def _write(self, run: Run, metrics, artifacts, manifest_extra, tags, tables, status, ended: int) -> None:
        """The traces, each table by MLflow's own ``log_table`` (the file and the tag MLflow's table
        view and ``load_table`` read, written by MLflow), one artifact upload (files and the
        manifest, which names each table by the digest of the file MLflow wrote), then the rows and
        the status."""
        frames = {rel: frame_of(data) for rel, data in tables.items()}
        if run.traces:  # first: MLflow names each trace as it stores it, and a table may name one
            self.traces.write(run.run_id, run.traces)
            stored = self.traces.stored_ids(run.traces)
            frames = {rel: with_ids(frame, stored) for rel, frame in frames.items()}
        secrets = secret_values()  # once for the run's files, tables, params and tags
        frames = {rel: masked_frame(frame, secrets) for rel, frame in sorted(frames.items())}
        # a table replaces a file of its name, as it always did (log_table would append to one)
        kept = {rel: c for rel, c in artifacts.items() if rel not in frames}
        files = {rel: c.encode("utf-8") if isinstance(c, str) else c for rel, c in kept.items()}
        texts = param_texts(run.params)
        long = {k: t for k, t in texts.items() if len(t) > MAX_PARAM_CHARS}  # stored whole, never cut
        files |= {param_artifact(k): t.encode("utf-8") for k, t in long.items()}
        files = {rel: mask_bytes(data, secrets) for rel, data in files.items()}  # before the digests: they name it
        params = {k: pointer(k, files[param_artifact(k)]) if k in long else t for k, t in texts.items()}
        digests = {rel: sha256_bytes(data) for rel, data in files.items()}
        try:
            for rel, frame in frames.items():  # sorted: the tag lists them in that order
                self.client.log_table(run.run_id, data=frame, artifact_file=rel)
            digests |= {rel: table_digest(run.artifact_uri, rel, frame) for rel, frame in frames.items()}
            manifest = {"artifacts": dict(sorted(digests.items())), **manifest_extra}
            blob = (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode()
            files["manifest.json"] = blob
            self._store_files(run, files)  # the manifest last: it names the tables as stored
        except Exception as err:
            if store_failure(self.uri, err, self._store_errors()) is None:
                raise
            self._end_without_files(run, status, ended, secrets, err)
            raise
        mirrored = {f"washexp.sha256.{rel}": digest for rel, digest in manifest["artifacts"].items()}
        mirrored["washexp.sha256.manifest"] = sha256_bytes(blob)
        for name, digests_of in manifest_extra.items():
            mirrored[f"washexp.sha256.{name}"] = tree_digest(digests_of)
        self._log(run, metrics, {**tags, **mirrored}, status, ended, secrets, params)

    def _end_without_files(self, run: Run, status: str, ended: int, secrets: list[str], err: Exception) -> None:
        """The run's files could not be stored (a full disk, a folder gone read-only): it still
        ends, FAILED (KILLED stays KILLED), where its rows can be written; else it stays RUNNING
        and the next start marks it KILLED."""
        reason = f"its artifacts could not be stored: {type(err).__name__}: {err}"
        tags = {ERROR_TAG: reason[:5000], ERROR_TYPE_TAG: type(err).__name__}
        with suppress(Exception):  # the store's own failure is the one reported
            self._log(run, {}, tags, "KILLED" if status == "KILLED" else "FAILED", ended, secrets)


def _released(claim, write) -> None:
    """``write``, then the claim it was holding is released (whatever the write did)."""
    try:
        write()
    finally:
        if claim is not None:
            claim.release()
