"""A compaction arm as MLflow runs: one arm run, one nested run per task (condition).

Identity: a condition is known by a hash of what determines its result (benchmark, model
spec, method, top-N, task id and the task's fixture digest, phase); output and tracking
settings are not part of it. A FINISHED run with the same hash is reused unless
``rerun=true``; an unfinished arm run is resumed, so a crash costs nothing already done.
Full ignores top-N: ``method=full`` under a top-N sweep is one arm, not six.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from concurrent.futures import CancelledError, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

import yaml
from omegaconf import OmegaConf

from washexp import PROJECT_ROOT
from washexp.compaction.aggregate import cohort_means
from washexp.compaction.conditions import Arm, h_impl_for, run_condition
from washexp.errors import ConfigError, ModelError
from washexp.fixtures.compaction import Task, load_tasks
from washexp.hashing import identity_hash, tree_digest
from washexp.models.base import safe_url
from washexp.roles import Roles, roles_for
from washexp.tracking import git_commit, source_files

log = logging.getLogger("washexp")

METHODS = ("full", "S", "H")
PHASES = ("final", "preflight")
"""``preflight``: a format preflight, kept as runs of its own and never counted in final metrics."""
RUNTIME_MODEL_KEYS = ("base_url", "api_key_env", "timeout_s", "max_retries", "max_concurrency", "replay", "recordings")
"""Model settings that change how a result is fetched, not what it is."""

# Per-condition metrics the arm aggregates task by task (equal weights, failed = 0).
_SCORES = ("retention", "retention_all_fields", "fact_accuracy", "all_fields_correct")
_SUMS = ("contexts", "contexts_shortened", "contexts_valid", "input_tokens_total")


@dataclass(frozen=True)
class JobInfo:
    """What Hydra knows about the job: kept as tags, never part of an identity."""

    overrides: str
    sweep: str


@dataclass(frozen=True)
class ArmPlan:
    """Everything fixed before an arm's first run: checked config, tasks, roles, identity."""

    arm: Arm
    tasks: list[Task]
    roles: Roles
    h_impl: str
    identity: dict[str, Any]
    """What determines the results (hashed with each task's id and fixture digest)."""
    params: dict[str, Any]
    tags: dict[str, str]
    source: dict[str, str]
    config_yaml: str


def plan_arm(cfg, job: JobInfo) -> ArmPlan:
    """Check the config and load the fixtures; raises before anything is written."""
    if cfg.method.name not in METHODS:
        raise ConfigError(f"method.name={cfg.method.name!r}: expected one of {', '.join(METHODS)}")
    if cfg.topn < 0:
        raise ConfigError(f"topn={cfg.topn}: must be >= 0")
    if cfg.phase not in PHASES:
        raise ConfigError(f"phase={cfg.phase!r}: expected one of {', '.join(PHASES)}")
    tasks = load_tasks(PROJECT_ROOT / cfg.benchmark.fixtures, cfg.task)
    roles = roles_for(cfg.model)
    arm = Arm(cfg.method.name, None if cfg.method.name == "full" else cfg.topn)
    h_impl = h_impl_for(roles, cfg.method.h_impl) if arm.method == "H" else None
    model = {k: v for k, v in vars(cfg.model).items() if k not in RUNTIME_MODEL_KEYS}
    identity = {
        "benchmark": cfg.benchmark.name,
        "model": model,
        "roles": roles.spec,
        "method": arm.method,
        "h_impl": h_impl,
        "topn": arm.topn,
        "phase": cfg.phase,
    }
    source = source_files()
    topn = "n/a" if arm.topn is None else str(arm.topn)
    tags = {
        "method": arm.method,
        "topn": topn,
        "model": cfg.model.name,
        "tier": cfg.model.tier,
        "platform": cfg.model.platform,
        "phase": cfg.phase,
        "sweep": job.sweep,
        "washexp.overrides": job.overrides,
        "washexp.source": tree_digest(source),
        "mlflow.source.git.commit": git_commit() or "unknown",
    }
    params = {
        "model": cfg.model.name,
        "backend": cfg.model.backend,
        "tier": cfg.model.tier,
        "platform": cfg.model.platform,
        "method": arm.method,
        "h_impl": h_impl or "n/a",
        "topn": topn,
        "generations": cfg.model.generations,
        "answers_per_context": cfg.model.answers_per_context if roles.read else 0,
        "phase": cfg.phase,
        "roles": roles.spec,
    }
    return ArmPlan(arm, tasks, roles, h_impl or "native", identity, params, tags, source, public_config(cfg))


def public_config(cfg) -> str:
    """The resolved config as YAML, as a run artifact: without the tracking settings (where
    results go is not what they are) and without credentials in the endpoint URL."""
    data = OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True)
    data.pop("tracking", None)
    if data["model"].get("base_url"):
        data["model"]["base_url"] = safe_url(data["model"]["base_url"])
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def run_arm(cfg, job: JobInfo, open_tracker) -> dict[str, float]:
    """Run one arm; ``open_tracker()`` is called only once the config and fixtures are valid."""
    plan = plan_arm(cfg, job)
    tracker = open_tracker()
    arm_hash = identity_hash({**plan.identity, "tasks": {t.id: t.digest for t in plan.tasks}})
    found = tracker.find(arm_hash)
    if found and found.finished and not cfg.rerun:
        log.info("%s: finished already (run %s); rerun=true runs it again", plan.arm.label, found.run_id)
        return found.metrics
    resume = found.run_id if found and not cfg.rerun else None
    arm_run = tracker.start(
        f"{plan.arm.label} · arm",
        arm_hash,
        {**plan.params, "tasks": len(plan.tasks)},
        {**plan.tags, "washexp.kind": "arm"},
        resume_id=resume,
    )
    try:
        per_task, counts = _run_conditions(plan, cfg, tracker, arm_run.run_id)
    except ModelError as err:
        arm_run.fail(err)
        raise
    metrics = arm_metrics(per_task, {t.id: t.cohort for t in plan.tasks})
    table = {t.id: {"cohort": t.cohort, **per_task[t.id]} for t in plan.tasks}
    arm_run.finish(
        metrics,
        {"conditions.json": json.dumps(table, indent=1) + "\n", "config.yaml": plan.config_yaml},
        manifest_extra={"source": plan.source},
    )
    log.info(
        "%s: %d conditions (%d run, %d reused, %d failed) · retention primary %s · control %s",
        plan.arm.label,
        len(plan.tasks),
        counts["run"],
        counts["reused"],
        counts["failed"],
        _fmt(metrics.get("primary/retention")),
        _fmt(metrics.get("control/retention")),
    )
    return metrics


def _run_conditions(plan: ArmPlan, cfg, tracker, arm_id: str | None):
    """Each task's condition: reused when finished, computed otherwise. Conditions compute in
    parallel (an LLM backend waits on its endpoint); every MLflow call stays on this thread."""
    per_task: dict[str, dict[str, float]] = {}
    counts = {"run": 0, "reused": 0, "failed": 0}
    generations = cfg.model.generations
    with ThreadPoolExecutor(max_workers=plan.roles.concurrency) as pool:
        futures = {}
        for task in plan.tasks:
            identity = identity_hash({**plan.identity, "task": task.id, "fixture": task.digest})
            found = tracker.find(identity)
            if found and found.finished and not cfg.rerun:
                if arm_id and found.parent_id != arm_id:
                    tracker.adopt(found.run_id, arm_id)
                per_task[task.id] = found.metrics
                counts["reused"] += 1
                continue
            run = tracker.start(
                f"{plan.arm.label} · {task.id}",
                identity,
                {**plan.params, "task": task.id, "cohort": task.cohort},
                {**plan.tags, "washexp.kind": "condition", "task": task.id, "cohort": task.cohort},
                parent_id=arm_id,
            )
            future = pool.submit(
                run_condition, task, plan.arm, plan.roles, generations, cfg.model.answers_per_context, plan.h_impl
            )
            futures[future] = (task, run)
        fatal: ModelError | None = None
        for future in as_completed(futures):
            task, run = futures.pop(future)
            try:
                metrics, artifacts, tables = future.result()
            except ModelError as err:  # the endpoint is unusable: stop, every later call would fail alike
                run.fail(err)
                fatal = fatal or err
                for pending in futures:
                    pending.cancel()
                continue
            except CancelledError:
                run.fail(RuntimeError(f"not run: {fatal}"))
                continue
            except Exception as err:  # a failed planned condition is recorded, and stays in as 0
                log.error("%s · %s: FAILED: %s", plan.arm.label, task.id, err)
                run.fail(err)
                counts["failed"] += 1
                per_task[task.id] = {"failed": 1.0, "contexts": float(generations)}
                _progress(plan, task.id, "FAILED", counts)
                continue
            artifacts["config.yaml"] = plan.config_yaml
            run.finish(metrics, artifacts, manifest_extra={"fixture": task.files, "source": plan.source}, tables=tables)
            per_task[task.id] = metrics
            counts["run"] += 1
            _progress(plan, task.id, "done", counts)
    if fatal:
        raise fatal
    return per_task, counts


def arm_metrics(per_task: dict[str, dict[str, float]], cohorts: dict[str, str]) -> dict[str, float]:
    """Cohort aggregates of an arm: tasks weighted equally, a failed condition counted as 0."""
    out: dict[str, float] = {}
    measured = {k for m in per_task.values() for k in m}
    for key in _SCORES:
        if key not in measured:
            continue  # e.g. no reader: accuracy is absent, never 0
        scores = {t: m.get(key, 0.0) for t, m in per_task.items()}
        for cohort, value in cohort_means(scores, cohorts).items():
            if value is not None:
                out[f"{cohort}/{key}"] = value
    for cohort in ("primary", "control", "all"):
        members = [m for t, m in per_task.items() if cohort in ("all", cohorts[t])]
        if not members:
            continue
        for key in _SUMS:
            out[f"{cohort}/{key}"] = sum(m.get(key, 0.0) for m in members)
        out[f"{cohort}/tasks"] = float(len(members))
        out[f"{cohort}/failed"] = float(sum(m.get("failed", 0.0) for m in members))
        out[f"{cohort}/invalid"] = sum(m["contexts"] - m["contexts_valid"] for m in members if "failed" not in m)
        for key in ("input_tokens", "reduction_pct"):  # means over the tasks that produced contexts
            values = [m[key] for m in members if key in m]
            if values:
                out[f"{cohort}/{key}"] = sum(values) / len(values)
    return out


def _progress(plan: ArmPlan, task_id: str, outcome: str, counts: dict[str, int]) -> None:
    """One stderr line per computed condition, so a long sweep can be followed; quiet in CI."""
    if os.environ.get("CI", "").lower() in ("1", "true"):
        return
    calls = f", {plan.roles.calls()}" if plan.roles.calls else ""
    print(
        f"  {plan.arm.label} · {task_id}: {outcome} ({sum(counts.values())}/{len(plan.tasks)} conditions,"
        f" {counts['reused']} reused, {counts['failed']} failed{calls})",
        file=sys.stderr,
        flush=True,
    )


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
