"""One shape for both benchmarks: a family plans a :class:`Group`, this module runs it.

A family (``washexp.compaction.study``, ``washexp.wash.measure.study``) checks its config, plans
the parent run (an arm, a measurement) and its children (conditions, stores, sawtooth arms) with
their identities, and says how to compute one child, summarise the parent and headline the
result. Everything around that is the same for every family and lives here: the tags every run
carries (:func:`common_tags`), the sweep's tracker, the progress bar and log line per computed
run, the ledger entry and the result line; :mod:`washexp.engine.runner` owns the runs' lifecycle
(identity, reuse, kill recovery, resume). A new benchmark is a new family and a line in
:mod:`washexp.benchmarks`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from washexp import console, machine
from washexp.engine.ledger import Entry, plural
from washexp.engine.runner import GroupOutcome, Result, Work, run_group, start_group
from washexp.hashing import tree_digest
from washexp.provenance import git_commit, package_source
from washexp.tracking.runs import SWEEP_TAG

log = logging.getLogger("washexp")


@dataclass(frozen=True)
class Group:
    """What a family plans for one Hydra job."""

    label: str
    """The arm or measurement, as its bar and result line name it."""
    unit: str
    """What one child is, in words: ``condition``, ``store run``, ``arm``."""
    parent: Work
    children: list[Work]
    compute: Callable[[Work], Result]
    summarize: Callable[[dict[Hashable, dict[str, float] | None]], Result]
    headline: Callable[[dict[str, float]], str]
    """The result line's last part, from the parent's metrics."""
    detail: Callable[[], str] | None = None
    """What each progress line adds (the model calls so far), if anything."""
    concurrency: int = 1
    lane: Hashable = None
    """Groups of one lane (one endpoint) share its ``concurrency``."""


def common_tags(cfg, job, sweep) -> dict[str, str]:
    """The tags every run of every family carries: what the model is, the sweep and its
    overrides, the source tree, the commit and the machine."""
    return {
        "model": cfg.model.name,
        "tier": cfg.model.tier,
        "platform": cfg.model.platform,
        SWEEP_TAG: job.sweep,
        "washexp.overrides": job.overrides,
        "washexp.source": tree_digest(sweep.shared("package_source", package_source)),
        "mlflow.source.git.commit": sweep.shared("git_commit", lambda: git_commit(sweep.root)) or "unknown",
        "washexp.machine": sweep.shared("machine", machine.describe),
    }


def tracker(cfg, sweep):
    """The sweep's one tracker per store and experiment; opened only once a job's config and
    inputs are valid (a family calls this after planning)."""
    from washexp.tracking import open_tracker

    t = cfg.tracking
    name = t.experiment or cfg.benchmark.name
    return sweep.shared(
        ("tracker", t.enabled, t.uri, t.artifacts, name),
        lambda: open_tracker(t.enabled, t.uri, t.artifacts, name, sweep.root),
    )


def run(cfg, job, sweep, group: Group, *, tracked, fatal: tuple[type[BaseException], ...] = (), wait: bool) -> None:
    """Run ``group`` against ``tracked`` (the tracker); ``wait``: to its end here, else on the
    sweep's schedule, the next job starting beside its last children (a served model is not left
    idle at every arm's tail)."""
    total = len(group.children)
    # the sweep's first line, once its config and inputs are valid: the first arm's own line may be
    # minutes away, and a silent command looks hung
    sweep.shared("started", lambda: console.result(log, "started %s (%s); a line follows as each arm ends",
                                                   group.label, plural(total, group.unit)))  # fmt: skip
    bar = sweep.shared(("bar", group.parent.hash), lambda: console.ArmBar(group.label, total, group.unit, log))

    def progress(work: Work, state: str, counts: dict[str, int]) -> None:
        """Each computed child: the bar moves (on a terminal), its line goes to the log."""
        done = sum(counts.values())
        detail = f", {group.detail()}" if group.detail else ""
        bar.step(
            done,
            f"  {work.name}: {state} ({done}/{plural(total, group.unit)},"
            f" {counts['reused']} reused, {counts['failed']} failed{detail})",
        )

    def report(outcome: GroupOutcome) -> None:
        bar.close()  # the result line takes its place
        sweep.ledger.append(Entry.of(job.sweep, cfg.benchmark.name, cfg.tracking, total, outcome))
        if outcome.reused:  # its numbers all the same: the sweep covers it
            where = f"sweep {outcome.reused_from}" if outcome.reused_from else "this sweep"
            console.result(
                log,
                "%s: finished already; rerun=true runs it again · %s reused from %s · %s",
                group.label,
                plural(total, group.unit),
                where,
                group.headline(outcome.metrics),
            )
            return
        n = outcome.counts
        console.result(
            log,
            "%s: %s (%d run, %d reused, %d failed) · %s",
            group.label,
            plural(total, group.unit),
            n["run"],
            n["reused"],
            n["failed"],
            group.headline(outcome.metrics),
        )

    options: dict[str, Any] = {"rerun": cfg.rerun, "fatal": fatal, "on_done": progress}
    options |= {"concurrency": group.concurrency, "lane": group.lane}
    if not wait:
        start_group(
            sweep.schedule, tracked, group.parent, group.children, group.compute, group.summarize, report, **options
        )
        return
    try:
        outcome = run_group(tracked, group.parent, group.children, group.compute, group.summarize, **options)
    finally:
        bar.close()
    report(outcome)
