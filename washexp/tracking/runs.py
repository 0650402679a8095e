"""A run's record: the tags washexp sets, a run found again by its identity, and an open run.

An open :class:`Run` is a context manager: leaving its block by an exception ends it FAILED, by
Ctrl-C or SIGTERM (``KeyboardInterrupt``/``SystemExit``) KILLED; its tracker (:class:`Closer`:
the store's :class:`~washexp.tracking.writer.Tracker`, or the untracked
:class:`~washexp.tracking.null.NullTracker`) stores how it closed.
"""

from __future__ import annotations

import os
import socket
import traceback
from dataclasses import dataclass, field
from typing import Any, Protocol

from washexp.tracking.traces import ModelCall

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
DECISIONS_KIND = "decisions"
"""The kind of a compaction sweep's decisions run (:mod:`washexp.compaction.sweep_decisions`): a
top-level run that is no arm and no unit, which every selection of runs by kind leaves out."""
SWEEP_TAG = "sweep"
"""The id of the sweep (one ``run.py`` command) a run was made in."""
OWNER = f"{socket.gethostname()}:{os.getpid()}"


class Closer(Protocol):
    """What a run closes through: a tracker (tracked or not)."""

    def _close(self, run: Run, metrics, artifacts, manifest_extra, tags, tables, status) -> None: ...


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

    tracker: Closer
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
