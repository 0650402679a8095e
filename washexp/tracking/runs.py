"""A run's record: the tags washexp sets, a run found again by its identity, an open run, and
the :class:`Tracker` protocol runs are opened, found and closed through.

An open :class:`Run` is a context manager: leaving its block by an exception ends it FAILED, by
Ctrl-C or SIGTERM (``KeyboardInterrupt``/``SystemExit``) KILLED; its tracker (a :class:`Tracker`:
the store's :class:`~washexp.tracking.writer.MlflowTracker`, or the untracked
:class:`~washexp.tracking.null.NullTracker`) stores how it closed.
"""

from __future__ import annotations

import os
import socket
import traceback
from dataclasses import dataclass, field
from typing import Any, Protocol

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
SWEEP_TAG = "sweep"
"""The id of the sweep (one ``run.py`` command) a run was made in."""
OWNER = f"{socket.gethostname()}:{os.getpid()}"


class Claim(Protocol):
    """The right to compute one identity (:meth:`Tracker.claim`), held until released."""

    def release(self) -> None: ...


class Tracker(Protocol):
    """What the runner and the studies use of a tracker: the store's
    :class:`~washexp.tracking.writer.MlflowTracker`, or :class:`~washexp.tracking.null.NullTracker`
    when tracking is off."""

    @property
    def traces(self) -> TraceStore | None:
        """Where a run's model calls go as traces (None: not stored)."""

    def find(self, identity_hash: str) -> Found:
        """The runs with this identity: the newest finished one, and any left RUNNING."""

    def claim(self, identity_hash: str) -> Claim | None:
        """The right to compute this identity, or None while another process holds it."""

    def open(
        self,
        name: str,
        identity_hash: str,
        params: dict[str, Any],
        tags: dict[str, str],
        parent_id: str | None = None,
        claim: Any = None,
    ) -> Run:
        """A new run, RUNNING until it is closed (:meth:`close_run`)."""

    def close_run(self, run: Run, metrics, artifacts, manifest_extra, tags, tables, status: str) -> None:
        """Store how ``run`` ended (what :meth:`Run.finish` and :meth:`Run.fail` hand over)."""

    def mark_killed(self, run: FoundRun, reason: str) -> None:
        """End a run whose process is gone: KILLED."""

    def link(self, name: str, target: FoundRun, tags: dict[str, str], parent_id: str | None) -> None:
        """A finished run listed under one more parent (or reused by another sweep)."""

    def flush(self) -> None:
        """Wait until every closed run is stored."""

    def close(self) -> None:
        """The sweep's end: flush, and release what the tracker holds."""


@dataclass(frozen=True)
class FoundRun:
    run_id: str
    status: str
    metrics: dict[str, float]
    parent_id: str | None
    owner: str | None = None
    sweep: str | None = None
    """The sweep that made it (its ``sweep`` tag)."""

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

    tracker: Tracker
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
        self.tracker.close_run(self, metrics, artifacts, manifest_extra or {}, tags or {}, tables or {}, "FINISHED")

    def fail(self, error: BaseException, status: str = "FAILED") -> None:
        text = "".join(traceback.format_exception(error))
        tags = {ERROR_TAG: f"{type(error).__name__}: {error}"[:5000], ERROR_TYPE_TAG: type(error).__name__}
        tags |= getattr(error, "tags", None) or {}  # what the error says of the runs it ends (stopped=budget)
        self.tracker.close_run(self, {}, {"error.txt": text}, {}, tags, {}, status)

    def end_by(self, error: BaseException) -> None:
        """End the run by ``error``: FAILED, or KILLED for KeyboardInterrupt and SystemExit
        (Ctrl-C, SIGTERM: stopped, not broken)."""
        self.fail(error, status="FAILED" if isinstance(error, Exception) else "KILLED")

    def __enter__(self) -> Run:
        return self

    def __exit__(self, kind, error, tb) -> None:
        if not self.closed:
            self.end_by(error or RuntimeError("the run's block ended without a result"))
