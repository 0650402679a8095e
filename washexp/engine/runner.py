"""The run lifecycle both families share: identity, reuse, kill recovery, finish or fail.

A family hands the runner a *group*: a parent unit of work (an arm, a measurement) and its
children (conditions, stores), each with the identity that determines its result, plus a
``compute`` function per child and a ``summarize`` function for the parent.

- A parent whose identity already has a FINISHED run is reused whole unless ``rerun``; when another
  sweep made it, this sweep gets a top-level *link* run naming it (``Tracker.link`` with no
  parent), so the sweep covers it: export, compare and ``washexp runs`` of this sweep see it.
- Otherwise the parent opens a new run; a RUNNING run of the same identity left by a process
  that is gone (SIGKILL) is marked KILLED first. Each child with a FINISHED run is reused, never
  computed twice and never moved: the run stays under the parent that planned it, and the new
  parent gets a *link* run naming it (``Tracker.link``; MLflow allows one parent per run). The
  others are computed.
- Before an identity is looked up and computed it is *claimed* (``Tracker.claim``, a lock file
  beside the store, held until the run's close is stored): a second process that reaches the
  same identity waits, taking in its own results meanwhile, and then reuses the finished run, so
  two identical sweeps started together compute each identity once.
- Every run is a context manager: an exception ends it FAILED, Ctrl-C or SIGTERM KILLED.
- A failed child is recorded (FAILED run, ``None`` result) and the group goes on; an exception in
  ``fatal`` (an endpoint that is gone) stops every open group: no later child starts.

Children compute ``concurrency`` at a time in threads, on a :class:`Schedule`. :func:`run_group`
runs one group to its end. A sweep hands its groups to one schedule with :func:`start_group`,
which returns as soon as every child of the group has *started*: the next Hydra job then
composes, plans and starts its first children while this group's last ones still compute, so a
served model is not left idle at every arm's tail (at most two groups are open at once, the one
ending and the one starting). Every tracking call stays on the thread that drives the schedule
(the tracker then stores closed runs on its own writer thread, in order).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from washexp.hashing import canonical_hash
from washexp.tracking.runs import SWEEP_TAG, Tracker

log = logging.getLogger("washexp")

POLL = 0.2
"""Seconds between looks at an identity another process has claimed (:meth:`Tracker.claim`)."""


@dataclass(frozen=True)
class Work:
    """One unit of work: one run."""

    name: str
    identity: dict[str, Any]
    """Everything that determines the result, hashed into the run's identity tag."""
    params: dict[str, Any] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    key: Hashable = ""
    """The family's own handle on the unit (a task id, a (store, gauge arm) pair), typed."""

    @cached_property
    def hash(self) -> str:
        return canonical_hash(self.identity)


@dataclass(frozen=True)
class Result:
    """What a computed unit logs."""

    metrics: dict[str, float]
    artifacts: Mapping[str, str | bytes] = field(default_factory=dict)
    tables: dict[str, Any] = field(default_factory=dict)
    manifest: dict[str, dict[str, str]] = field(default_factory=dict)
    """Extra sha256 maps for the manifest (fixture files, source)."""
    series: dict[str, list[float]] = field(default_factory=dict)
    """Step metrics: key -> one value per step (a wash round, a session), charted by the UI."""
    traces: tuple = ()
    """The model calls behind the unit (``tracking.traces.ModelCall``), each a trace of its run."""


@dataclass
class GroupOutcome:
    metrics: dict[str, float]
    reused: bool = False
    """The whole group was finished already."""
    reused_from: str | None = None
    """Reused whole from another sweep: that sweep's id (None: made in this sweep, or untracked)."""
    counts: dict[str, int] = field(default_factory=lambda: {"run": 0, "reused": 0, "failed": 0})


def _recover(tracker: Tracker, work: Work):
    """The identity's FINISHED run, after ending any run a killed process left RUNNING."""
    found = tracker.find(work.hash)
    for stale in found.running:
        if stale.orphaned:
            tracker.mark_killed(stale, "its process was killed; redone")
    return found.finished


@dataclass(eq=False)
class _Group:
    """A group on a schedule: its open parent run, the children not yet started, what is known."""

    tracker: Tracker
    parent: Work
    run: Any
    queue: list[Work]
    compute: Callable[[Work], Result]
    summarize: Callable[[dict[Hashable, dict[str, float] | None]], Result]
    fatal: tuple[type[BaseException], ...]
    on_done: Callable[[Work, str, dict[str, int]], None] | None
    lane: Hashable
    slots: int
    thens: list[Callable[[GroupOutcome], None]]
    rerun: bool = False
    results: dict[Hashable, dict[str, float] | None] = field(default_factory=dict)
    outcome: GroupOutcome = field(default_factory=lambda: GroupOutcome({}))
    running: int = 0


class Schedule:
    """The groups of one sweep and their children's threads (see the module doc). A *lane* (one
    endpoint) runs at most its groups' ``concurrency`` children at once."""

    def __init__(self, check: Callable[[], None] = lambda: None) -> None:
        """``check``: called on every turn of the loop; what it raises stops every open group
        (the sweep's: a stop a signal asked for whose exception Python dropped)."""
        self._check = check
        self._groups: list[_Group] = []
        self._open: dict[Future, tuple[_Group, Work, Any]] = {}
        self._pools: dict[Hashable, ThreadPoolExecutor] = {}

    def group_of(self, identity_hash: str) -> _Group | None:
        return next((g for g in self._groups if g.parent.hash == identity_hash), None)

    def open_groups(self) -> int:
        return len(self._groups)

    def add(self, group: _Group) -> None:
        self._groups.append(group)

    def run(self, until: Callable[[], bool]) -> None:
        """Start children and take in their results until ``until()`` holds (or nothing is left
        to wait for). Any exception ends every open run of every group (FAILED, or KILLED for
        Ctrl-C and SIGTERM), then propagates."""
        try:
            while True:
                self._check()
                for future in [f for f in self._open if f.done()]:  # what ended while the caller was away
                    self._take(future)
                self._start_children()
                self._end_groups()
                if until():
                    return
                waiting = any(g.queue for g in self._groups)  # children another process holds
                if not self._open:
                    if not waiting:
                        return
                    time.sleep(POLL)
                    continue
                done, _ = wait(self._open, timeout=POLL if waiting else None, return_when=FIRST_COMPLETED)
                for future in done:
                    self._take(future)
        except BaseException as err:
            self._abort(err)
            raise

    def drain(self) -> None:
        """Run every open group to its end."""
        self.run(lambda: not self._groups)

    def close(self) -> None:
        """End what is still open as KILLED (the command stopped before its groups ended)."""
        self._abort(KeyboardInterrupt("the command stopped before this run ended"))
        for pool in self._pools.values():
            pool.shutdown(wait=False, cancel_futures=True)
        self._pools.clear()

    def pause(self, seconds: float) -> None:
        """Take in results for ``seconds`` (or sleep when nothing is open): a caller waiting on
        another process keeps this one's work moving, so two processes never wait on each other."""
        deadline = time.monotonic() + seconds
        self.run(lambda: time.monotonic() >= deadline)
        time.sleep(max(0.0, deadline - time.monotonic()))

    def _start_children(self) -> None:
        for group in self._groups:  # oldest first: a group ends before the next one's children start
            for child in list(group.queue):
                if sum(g.running for g in self._groups if g.lane == group.lane) >= group.slots:
                    break
                claim = group.tracker.claim(child.hash)
                if claim is None:  # another process computes it: looked at again on the next turn
                    continue
                group.queue.remove(child)
                found = _recover(group.tracker, child)  # the one lookup, under the claim: nothing races it
                if found is not None and not group.rerun:
                    claim.release()
                    _reuse(group, child, found)
                    continue
                try:
                    run = group.tracker.open(
                        child.name, child.hash, child.params, child.tags, parent_id=group.run.run_id, claim=claim
                    )
                except BaseException:
                    claim.release()
                    raise
                pool = self._pools.get(group.lane)
                if pool is None:
                    pool = self._pools[group.lane] = ThreadPoolExecutor(group.slots, thread_name_prefix="washexp-unit")
                try:
                    future = pool.submit(group.compute, child)
                except BaseException as err:  # stopped between opening the run and handing it over
                    run.end_by(err)
                    raise
                self._open[future] = (group, child, run)
                group.running += 1

    def _take(self, future: Future) -> None:
        group, child, run = self._open.pop(future)
        group.running -= 1
        counts = group.outcome.counts
        error = future.exception()
        if error is None:
            result = future.result()
            run.finish(
                result.metrics,
                result.artifacts,
                result.manifest,
                tables=result.tables,
                series=result.series,
                traces=result.traces,
            )
            group.results[child.key] = result.metrics
            counts["run"] += 1
            state = "done"
        else:
            run.fail(error)
            if isinstance(error, group.fatal):
                raise error
            log.error("%s: FAILED: %s", child.name, error)
            group.results[child.key] = None
            counts["failed"] += 1
            state = "FAILED"
        if group.on_done:
            group.on_done(child, state, counts)

    def _end_groups(self) -> None:
        for group in [g for g in self._groups if not g.queue and not g.running]:
            self._groups.remove(group)
            try:
                summary = group.summarize(group.results)
            except BaseException as err:
                group.run.end_by(err)
                raise
            group.run.finish(summary.metrics, summary.artifacts, summary.manifest, tables=summary.tables)
            group.outcome.metrics = summary.metrics
            group.thens[0](group.outcome)
            for then in group.thens[1:]:  # the same group asked for again while it ran
                then(GroupOutcome(summary.metrics, reused=True))

    def _abort(self, err: BaseException) -> None:
        runs = [run for _, _, run in self._open.values()] + [g.run for g in self._groups]
        self._open.clear()
        self._groups.clear()
        for run in runs:
            if not run.closed:
                run.end_by(err)


def start_group(
    schedule: Schedule,
    tracker: Tracker,
    parent: Work,
    children: list[Work],
    compute: Callable[[Work], Result],
    summarize: Callable[[dict[Hashable, dict[str, float] | None]], Result],
    then: Callable[[GroupOutcome], None],
    *,
    rerun: bool = False,
    concurrency: int = 1,
    lane: Hashable = None,
    fatal: tuple[type[BaseException], ...] = (),
    on_done: Callable[[Work, str, dict[str, int]], None] | None = None,
) -> None:
    """Hand ``parent`` and its ``children`` to ``schedule`` (see the module doc) and return once
    every child has started. ``then(outcome)`` is called when the group ends, on the thread that
    drives the schedule; ``summarize`` gets each child's metrics by ``Work.key`` (None for a
    failed child)."""
    same = schedule.group_of(parent.hash)
    if same is not None:  # asked for again while it runs (Full under a top-N sweep): its outcome, once
        same.thens.append(then)
        return
    schedule.run(lambda: schedule.open_groups() <= 1)  # one group ahead at most
    claim = tracker.claim(parent.hash)
    while claim is None:  # the same group is open in another process: its outcome, once it ends
        schedule.pause(POLL)
        claim = tracker.claim(parent.hash)
    try:
        finished = _recover(tracker, parent)
        if finished is not None and not rerun:
            claim.release()
            source = finished.sweep if finished.sweep != parent.tags.get(SWEEP_TAG) else None
            if source is not None:  # this sweep covers it too: a link it owns names the run
                tracker.link(parent.name, finished, parent.tags, None)
            then(GroupOutcome(finished.metrics, reused=True, reused_from=source))
            return
        group_run = tracker.open(parent.name, parent.hash, parent.params, parent.tags, claim=claim)
    except BaseException:
        claim.release()
        raise
    group = _Group(
        tracker, parent, group_run, [], compute, summarize, fatal, on_done, lane, max(1, concurrency), [then], rerun
    )
    group.queue.extend(children)  # each looked up once, when claimed (_start_children)
    schedule.add(group)
    schedule.run(lambda: not group.queue)


def _reuse(group: _Group, child: Work, found) -> None:
    """A finished run of ``child``'s identity counts for ``group``: linked, never moved or redone."""
    group.tracker.link(child.name, found, child.tags, group.run.run_id)
    group.results[child.key] = found.metrics
    group.outcome.counts["reused"] += 1


def run_group(tracker: Tracker, parent: Work, children: list[Work], compute, summarize, **options) -> GroupOutcome:
    """:func:`start_group` on a schedule of its own, run to the group's end."""
    schedule, outcomes = Schedule(), list[GroupOutcome]()
    try:
        start_group(schedule, tracker, parent, children, compute, summarize, outcomes.append, **options)
        schedule.drain()
    finally:
        schedule.close()
    return outcomes[0]
