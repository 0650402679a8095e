"""The run lifecycle both families share: identity, reuse, kill recovery, finish or fail.

A family hands the runner a *group*: a parent unit of work (an arm, a measurement) and its
children (conditions, stores), each with the identity that determines its result, plus a
``compute`` function per child and a ``summarize`` function for the parent.

- A parent whose identity already has a FINISHED run is reused whole unless ``rerun``.
- Otherwise the parent opens a new run; a RUNNING run of the same identity left by a process
  that is gone (SIGKILL) is marked KILLED first. Each child with a FINISHED run is reused and
  hung under the new parent (never computed twice); the others are computed.
- Every run is a context manager: an exception ends it FAILED, Ctrl-C or SIGTERM KILLED.
- A failed child is recorded (FAILED run, ``None`` result) and the group goes on; an exception in
  ``fatal`` (an endpoint that is gone) stops the group: no later child starts.

Children compute ``concurrency`` at a time in threads; every tracking call stays on the
calling thread (the tracker then stores closed runs on its own writer thread, in order).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from washexp.hashing import canonical_hash

log = logging.getLogger("washexp")


@dataclass(frozen=True)
class Work:
    """One unit of work: one run."""

    name: str
    identity: dict[str, Any]
    """Everything that determines the result, hashed into the run's identity tag."""
    params: dict[str, Any] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    key: str = ""
    """The family's own handle on the unit (a task id, a store name)."""

    @cached_property
    def hash(self) -> str:
        return canonical_hash(self.identity)


@dataclass(frozen=True)
class Result:
    """What a computed unit logs."""

    metrics: dict[str, float]
    artifacts: dict[str, str | bytes] = field(default_factory=dict)
    tables: dict[str, Any] = field(default_factory=dict)
    manifest: dict[str, dict[str, str]] = field(default_factory=dict)
    """Extra sha256 maps for the manifest (fixture files, source)."""
    series: dict[str, list[float]] = field(default_factory=dict)
    """Step metrics: key -> one value per step (a wash round, a session), charted by the UI."""


@dataclass
class GroupOutcome:
    metrics: dict[str, float]
    reused: bool = False
    """The whole group was finished already."""
    counts: dict[str, int] = field(default_factory=lambda: {"run": 0, "reused": 0, "failed": 0})


def _recover(tracker, work: Work):
    """The identity's FINISHED run, after ending any run a killed process left RUNNING."""
    found = tracker.find(work.hash)
    for stale in found.running:
        if stale.orphaned:
            tracker.mark_killed(stale, "its process was killed; redone")
    return found.finished


def run_group(
    tracker,
    parent: Work,
    children: list[Work],
    compute: Callable[[Work], Result],
    summarize: Callable[[dict[str, dict[str, float] | None]], Result],
    *,
    rerun: bool = False,
    concurrency: int = 1,
    fatal: tuple[type[BaseException], ...] = (),
    on_done: Callable[[Work, str, dict[str, int]], None] | None = None,
) -> GroupOutcome:
    """Run ``parent`` and its ``children`` (see the module doc). ``summarize`` gets each child's
    metrics by ``Work.key`` (None for a failed child)."""
    finished = None if rerun else _recover(tracker, parent)
    if finished is not None:
        return GroupOutcome(finished.metrics, reused=True)
    if rerun:
        _recover(tracker, parent)
    outcome = GroupOutcome({})
    results: dict[str, dict[str, float] | None] = {}
    with tracker.open(parent.name, parent.hash, parent.params, parent.tags) as group_run:
        todo = []
        for child in children:
            found = _recover(tracker, child)
            if found is not None and not rerun:
                if found.parent_id != group_run.run_id:
                    tracker.adopt(found.run_id, group_run.run_id)
                results[child.key] = found.metrics
                outcome.counts["reused"] += 1
            else:
                todo.append(child)
        _compute_all(tracker, group_run.run_id, todo, compute, results, outcome, concurrency, fatal, on_done)
        summary = summarize(results)
        group_run.finish(summary.metrics, summary.artifacts, summary.manifest, tables=summary.tables)
    outcome.metrics = summary.metrics
    return outcome


def _compute_all(tracker, parent_id, todo, compute, results, outcome, concurrency, fatal, on_done) -> None:
    open_runs: dict[Future, tuple[Work, Any]] = {}
    pool = ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="washexp-unit")
    queue = list(todo)
    try:
        while queue or open_runs:
            while queue and len(open_runs) < max(1, concurrency):
                child = queue.pop(0)
                run = tracker.open(child.name, child.hash, child.params, child.tags, parent_id=parent_id)
                try:
                    open_runs[pool.submit(compute, child)] = (child, run)
                except BaseException as err:  # stopped between opening the run and handing it over
                    run.fail(err, status="FAILED" if isinstance(err, Exception) else "KILLED")
                    raise
            done, _ = wait(open_runs, return_when=FIRST_COMPLETED)
            for future in done:
                child, run = open_runs.pop(future)
                error = future.exception()
                if error is None:
                    result = future.result()
                    run.finish(
                        result.metrics, result.artifacts, result.manifest, tables=result.tables, series=result.series
                    )
                    results[child.key] = result.metrics
                    outcome.counts["run"] += 1
                    state = "done"
                else:
                    run.fail(error)
                    if isinstance(error, fatal):
                        raise error
                    log.error("%s: FAILED: %s", child.name, error)
                    results[child.key] = None
                    outcome.counts["failed"] += 1
                    state = "FAILED"
                if on_done:
                    on_done(child, state, outcome.counts)
    except BaseException as err:
        for _child, run in open_runs.values():  # stopped mid-compute: never left RUNNING
            run.fail(err, status="FAILED" if isinstance(err, Exception) else "KILLED")
        raise
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
