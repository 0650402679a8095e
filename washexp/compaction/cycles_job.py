"""``measurement=cycles`` as MLflow runs: one parent run per arm (:class:`~washexp.tracking.kinds.CyclesRun`),
one condition run per (task, k) (:class:`~washexp.tracking.kinds.CyclesCell`).

Planned on top of the arm's own plan (:func:`washexp.compaction.study.plan_arm`: the same checks,
roles, method and identity), with the measurement added to the identity: ``cycles`` and its split
rule on the parent (with every k), k on each condition, and the code that computes a cycle
(:mod:`washexp.compaction.cycles`). A condition logs its last cycle's survival as metrics, every
cycle's as step series (``step = cycle``: ``survival``, ``facts_seen``, ``facts_kept``,
``input_tokens``), and the per-fact x per-cycle table ``cycles.json``.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from washexp.compaction.artifacts import to_json
from washexp.compaction.calls import condition_calls, recorder_of
from washexp.compaction.cycles import TABLE, check, condition_result, run_cycles
from washexp.compaction.inputs.fixtures import Task
from washexp.compaction.methods.baselines import turns
from washexp.compaction.study import CODE, CODE_DATA, ArmPlan, plan_arm
from washexp.engine import family
from washexp.engine.runner import Result, Work
from washexp.errors import ConfigError, ModelError
from washexp.provenance import code_digest
from washexp.tracking.kinds import CyclesCell, CyclesRun

CYCLES_CODE = (*CODE, "washexp.compaction.cycles")


@dataclass(frozen=True)
class CyclesPlan:
    arm: ArmPlan
    parent: Work
    children: list[Work]


def plan_cycles(cfg, job, sweep) -> CyclesPlan:
    """The arm's plan with the measurement in every identity; raises before anything is written."""
    m = cfg.compaction.measurement
    ks = check(list(m.k), m.split)
    plan = plan_arm(cfg, job, sweep)
    # a task with fewer turns than k has no k-segment split: that (task, k) is not planned (the
    # record counts the tasks of each k); a selection where nothing splits is a usage error
    pairs = [(t, k) for t in plan.tasks for k in ks if k <= len(turns(t))]
    if not pairs:
        raise ConfigError(f"cycles.k={ks}: no chosen task has that many turns")
    code = sweep.shared(("code", CYCLES_CODE), lambda: code_digest(CYCLES_CODE, CODE_DATA))
    measured = {"name": "cycles", "split": m.split}
    base = {k: v for k, v in plan.parent.identity.items() if k != "tasks"}
    base = {**base, "code": code, "measurement": measured}
    params = {**plan.parent.params, "code": code, "measurement": "cycles", "split": m.split}
    tags = {**plan.parent.tags, **CyclesRun(m.split).tags()}  # the arm's tags, of the cycles kind
    label = f"{plan.arm.label} · cycles"
    parent = Work(
        label,
        {**base, "k": ks, "tasks": {t.id: t.digest for t in plan.tasks}},
        {**params, "k": ks, "tasks": len(plan.tasks)},
        tags,
    )
    children = [
        Work(
            f"{label} · {t.id} · k={k}",
            {**base, "k": k, "task": t.id, "fixture": t.digest},
            {**params, "k": k, "task": t.id, "cohort": t.cohort},
            {**tags, **cell.tags()},
            key=cell,
        )
        for t, k in pairs
        for cell in [CyclesCell(t.id, k, t.cohort)]
    ]
    return CyclesPlan(plan, parent, children)


def run_job(cfg, job, sweep) -> None:
    """Start one arm's cycles conditions on the sweep's schedule."""
    plan = plan_cycles(cfg, job, sweep)
    arm = plan.arm
    tracker = family.tracker(cfg, sweep)
    tasks: dict[Hashable, Task] = {t.id: t for t in arm.tasks}
    generations, split = cfg.model.generations, cfg.compaction.measurement.split
    recorder = recorder_of(arm.cache.roles)
    traced = recorder if cfg.tracking.traces and tracker.traces is not None else None

    def compute(work: Work) -> Result:
        assert isinstance(work.key, CyclesCell)
        task, k = tasks[work.key.task], work.key.k
        run = run_cycles(task, k, arm.arm, arm.cache, arm.method, generations, split)
        metrics, series, table = condition_result(run)
        if recorder is not None:  # the calls behind its parts: cost_usd, calls_live, calls_replayed
            metrics = {**metrics, **recorder.charge(list(run.keys)).metrics()}
        # every call behind its cycles a trace of its run (no reader: no grade names one)
        calls = condition_calls(traced, list(run.keys), task.id) if traced is not None else ()
        artifacts = {"config.yaml": arm.config_yaml}
        failed = {str(c): why for c, why in enumerate(run.failures, 1) if why}
        if failed:
            artifacts["failures.json"] = to_json(failed)
        manifest = {"fixture": task.files, "source": arm.source}
        return Result(metrics, artifacts, {TABLE: table}, manifest, series=series, traces=calls)

    def summarize(found: dict[Hashable, dict[str, float] | None]) -> Result:
        rows = {key.cell: m for key, m in found.items() if isinstance(key, CyclesCell)}
        failed = sum(m is None for m in found.values())
        metrics = {"conditions": float(len(found)), "failed": float(failed)}
        done = [m["survival_last"] for m in found.values() if m is not None and "survival_last" in m]
        if done:
            metrics["mean_survival"] = sum(done) / len(done)
        artifacts = {"conditions.json": to_json(rows), "config.yaml": arm.config_yaml}
        return Result(metrics, artifacts, manifest={"source": arm.source})

    def headline(m: dict[str, float]) -> str:
        v = m.get("mean_survival")
        return "survival after the last cycle " + ("n/a" if v is None else f"{v:.3f}") + " (mean over conditions)"

    group = family.Group(
        plan.parent.name,
        "condition",
        plan.parent,
        plan.children,
        compute,
        summarize,
        headline,
        detail=arm.cache.roles.calls,
        concurrency=arm.cache.roles.concurrency,
        lane=id(arm.cache.roles),
    )
    family.run(cfg, job, sweep, group, tracked=tracker, fatal=(ModelError,), wait=False)
