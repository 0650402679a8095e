"""A compaction arm as MLflow runs: one arm run, one nested run per task (condition).

Identity (``washexp.config.identity``): the benchmark, what the model is, the roles' spec (its
prompts' sha256 included), the method, its H implementation (a plugin's spec: target, args,
package name and version, module sha256), top-N and phase, the digest of the
code that computes a result (``CODE``), and per condition the task id and its fixture digest.
The granularity is the whole family's code, not per role: any change to how a number is made is
a new condition; a served model's rerun then replays its recorded calls and costs no model time.
Full ignores top-N: ``method=full`` under a top-N sweep is one arm, not six. Which method an arm
runs is decided once, here (:func:`method_for`); the pipeline then asks the method what it is.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass
from typing import Any

from washexp.compaction.aggregate import arm_metrics
from washexp.compaction.artifacts import to_json
from washexp.compaction.condition import Arm, run_condition
from washexp.compaction.fixtures import Task, load_tasks
from washexp.compaction.frozen import FrozenCache, h_impl_for, h_label
from washexp.compaction.method import BUILTINS, Method, builtin
from washexp.compaction.plugin import Plugin, build
from washexp.compaction.roles import Roles, roles_for
from washexp.config import identity
from washexp.errors import ConfigError, ModelError
from washexp.hashing import canonical_json, tree_digest
from washexp.ledger import Entry, plural
from washexp.provenance import code_digest, git_commit, package_source, public_config
from washexp.runner import GroupOutcome, Result, Work, start_group

log = logging.getLogger("washexp")

PHASES = ("final", "preflight")
"""``preflight``: a format preflight, kept as runs of its own and never counted in final metrics."""
CODE = ("compaction", "tokens.py", "needles.py", "hashing.py")
"""What computes a compaction result: the family's folder (prompts included) and the shared
modules it counts and matches with."""


@dataclass(frozen=True)
class ArmPlan:
    """Everything fixed before an arm's first run: checked config, tasks, roles, its work units."""

    arm: Arm
    method: Method
    tasks: list[Task]
    cache: FrozenCache
    parent: Work
    children: list[Work]
    config_yaml: str
    source: dict[str, str]


def plan_arm(cfg, job, sweep) -> ArmPlan:
    """Check the config and load the fixtures; raises before anything is written."""
    c = cfg.compaction
    if c.topn < 0:
        raise ConfigError(f"topn={c.topn}: must be >= 0")
    if c.phase not in PHASES:
        raise ConfigError(f"phase={c.phase!r}: expected one of {', '.join(PHASES)}")
    folder = sweep.root / cfg.benchmark.fixtures  # read once per command, as the source and commit
    tasks = sweep.shared(("tasks", str(folder), canonical_json(c.task)), lambda: load_tasks(folder, c.task))
    roles: Roles = sweep.shared(
        ("roles", canonical_json([vars(cfg.model), vars(cfg.endpoint)])),
        lambda: roles_for(cfg.model, cfg.endpoint, sweep.root),
    )
    cache = sweep.shared(("frozen", id(roles)), lambda: FrozenCache(roles))
    method = method_for(c.method, roles)
    arm = Arm(method.name, None if method.whole else c.topn)
    h_impl = getattr(method, "impl", None)
    family = {"method": arm.method, "h_impl": h_impl, "topn": arm.topn, "phase": c.phase, "roles": roles.spec}
    plugin = method.spec if isinstance(method, Plugin) else None
    if plugin:
        family["plugin"] = plugin
    ident = identity(cfg, family, sweep.shared(("code", CODE), lambda: code_digest(*CODE)))
    source = sweep.shared("package_source", package_source)
    topn = "n/a" if arm.topn is None else str(arm.topn)
    tags = {
        "method": arm.method,
        "topn": topn,
        "model": cfg.model.name,
        "tier": cfg.model.tier,
        "platform": cfg.model.platform,
        "phase": c.phase,
        "sweep": job.sweep,
        "washexp.overrides": job.overrides,
        "washexp.source": tree_digest(source),
        "mlflow.source.git.commit": sweep.shared("git_commit", lambda: git_commit(sweep.root)) or "unknown",
    }
    if plugin:
        tags |= {"washexp.plugin.target": plugin["target"], "washexp.plugin.package": str(plugin["package"])}
        tags["washexp.plugin.version"] = str(plugin["version"])
    params = {
        "model": cfg.model.name,
        "backend": cfg.model.backend,
        "tier": cfg.model.tier,
        "platform": cfg.model.platform,
        "method": arm.method,
        "h_impl": h_impl or "n/a",
        "h_label": h_label(h_impl) if h_impl else "n/a",
        "topn": topn,
        "generations": cfg.model.generations,
        "answers_per_context": cfg.model.answers_per_context if roles.read else 0,
        "phase": c.phase,
        "roles": roles.spec,
    }
    if plugin:
        params["plugin"] = canonical_json(plugin)
    parent = Work(
        f"{arm.label} · arm",
        {**ident, "tasks": {t.id: t.digest for t in tasks}},
        {**params, "tasks": len(tasks)},
        {**tags, "washexp.kind": "arm"},
    )
    children = [
        Work(
            f"{arm.label} · {t.id}",
            {**ident, "task": t.id, "fixture": t.digest},
            {**params, "task": t.id, "cohort": t.cohort},
            {**tags, "washexp.kind": "condition", "task": t.id, "cohort": t.cohort},
            key=t.id,
        )
        for t in tasks
    ]
    return ArmPlan(arm, method, tasks, cache, parent, children, public_config(cfg), source)


def method_for(config, roles: Roles) -> Method:
    """The arm's method: the study's Full, S or H by name, else a plugin (``method.target``, or
    a name installed under ``washexp.methods``); every check raises before anything runs."""
    if not config.target and config.name in BUILTINS:
        impl = h_impl_for(roles, config.h_impl) if config.name == "H" else "native"
        return builtin(config.name, impl)
    if config.name in BUILTINS:
        raise ConfigError(f"method.name={config.name!r} is the study's own; a plugin needs another name")
    return build(config.name, config.target, config.args)


def run_job(cfg, job, sweep) -> None:
    """Start one arm on the sweep's schedule (it may still run when this returns: the next arm
    starts beside its last conditions); the tracker opens only once the config and fixtures are
    valid."""
    from washexp.tracking import open_tracker

    plan = plan_arm(cfg, job, sweep)
    t = cfg.tracking
    tracker = sweep.shared(
        ("tracker", t.enabled, t.uri, t.artifacts, t.experiment or cfg.benchmark.name),
        lambda: open_tracker(t.enabled, t.uri, t.artifacts, t.experiment or cfg.benchmark.name, sweep.root),
    )
    tasks = {t.id: t for t in plan.tasks}
    generations, answers = cfg.model.generations, cfg.model.answers_per_context

    def compute(work: Work) -> Result:
        task = tasks[work.key]
        out = run_condition(task, plan.arm, plan.cache, generations, answers, method=plan.method)
        artifacts = {**out.artifacts, "config.yaml": plan.config_yaml}
        return Result(out.metrics, artifacts, out.tables, {"fixture": task.files, "source": plan.source})

    def summarize(per_task: dict[str, dict[str, float] | None]) -> Result:
        per_task = {
            k: m if m is not None else {"failed": 1.0, "contexts": float(generations)} for k, m in per_task.items()
        }
        metrics = arm_metrics(per_task, {t.id: t.cohort for t in plan.tasks})
        table = {t.id: {"cohort": t.cohort, **per_task[t.id]} for t in plan.tasks}
        artifacts = {"conditions.json": to_json(table), "config.yaml": plan.config_yaml}
        if plan.cache.roles.logs:  # e.g. the local server's log
            artifacts |= plan.cache.roles.logs()
        return Result(metrics, artifacts, manifest={"source": plan.source})

    def progress(work: Work, state: str, counts: dict[str, int]) -> None:
        """One stderr line per computed condition, so a long sweep can be followed; quiet in CI."""
        if os.environ.get("CI", "").lower() in ("1", "true"):
            return
        roles = plan.cache.roles
        calls = f", {roles.calls()}" if roles.calls else ""
        print(
            f"  {work.name}: {state} ({sum(counts.values())}/{len(plan.tasks)} conditions,"
            f" {counts['reused']} reused, {counts['failed']} failed{calls})",
            file=sys.stderr,
            flush=True,
        )

    def report(outcome: GroupOutcome) -> None:
        sweep.ledger.append(Entry.of(job.sweep, cfg.benchmark.name, cfg.tracking, len(plan.tasks), outcome))
        if outcome.reused:
            log.info("%s: finished already; rerun=true runs it again", plan.arm.label)
            return
        m, n = outcome.metrics, outcome.counts
        log.info(
            "%s: %s (%d run, %d reused, %d failed) · retention primary %s · control %s",
            plan.arm.label,
            plural(len(plan.tasks), "condition"),
            n["run"],
            n["reused"],
            n["failed"],
            _fmt(m.get("primary/retention")),
            _fmt(m.get("control/retention")),
        )

    start_group(
        sweep.schedule,
        tracker,
        plan.parent,
        plan.children,
        compute,
        summarize,
        report,
        rerun=cfg.rerun,
        concurrency=plan.cache.roles.concurrency,
        lane=id(plan.cache.roles),
        fatal=(ModelError,),
        on_done=progress,
    )


def _fmt(value: Any) -> str:
    return "n/a" if value is None else f"{value:.3f}"
