"""Tracking off (``tracking.enabled=false``): nothing stored, finished runs still found in-process."""

from __future__ import annotations

import itertools
from typing import Any

from washexp.tracking.runs import Found, FoundRun, Run


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

    def flush(self) -> None:
        """Nothing is stored: nothing to wait for (a Tracker's, so either answers)."""

    close = flush

    def find(self, identity_hash: str) -> Found:
        return Found(self._finished.get(identity_hash))

    def claim(self, identity_hash: str):
        return _NO_CLAIM  # nothing is stored: nothing to share with another process

    def open(
        self,
        name: str,
        identity_hash: str,
        params: dict[str, Any],
        tags: dict[str, str],
        parent_id: str | None = None,
        claim: Any = None,
    ) -> Run:
        run_id = f"untracked-{next(self._ids)}"
        self._open[run_id] = identity_hash
        return Run(self, run_id, params)

    def mark_killed(self, run: FoundRun, reason: str) -> None:
        pass

    def link(self, name: str, target: FoundRun, tags: dict[str, str], parent_id: str | None) -> None:
        pass

    def close_run(self, run: Run, metrics, artifacts, manifest_extra, tags, tables, status: str) -> None:
        run.closed = True
        identity = self._open.pop(run.run_id)
        if status == "FINISHED":
            self._finished[identity] = FoundRun(run.run_id, status, dict(metrics), None)
