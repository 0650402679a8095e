"""``measurement=cliff`` as MLflow runs: one parent run per method (:class:`~washexp.tracking.kinds.CliffRun`), one
condition run per (length, budget, task) (:class:`~washexp.tracking.kinds.CliffCell`) holding the method's
retention and Full's on the same task (and fact accuracy with a reader).

The sets are generated once per command from the config's seed into the sweep's own folder
(``<sweep>/cliff-sets/L<length>``, never fixtures/); each is then planned as the study plans a
fixture folder (:func:`washexp.compaction.study.plan_arm`: the same checks, roles and identity,
its manifest checked), with the measurement, the grid and each set's manifest sha256 added to the
parent's identity and (length, budget) to each condition's. Grid and rule:
:mod:`washexp.compaction.cliff`.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import replace
from pathlib import Path

from washexp.compaction.calls import recorder_of, recording_keys
from washexp.compaction.cliff import METHODS, Grid, generate_sets, mask_keep
from washexp.compaction.condition import Arm, run_condition
from washexp.compaction.inputs.fixtures import Task
from washexp.compaction.methods.baselines import baseline
from washexp.compaction.methods.method import builtin
from washexp.compaction.study import CODE, CODE_DATA, ArmPlan, arm_method, check_settings, plan_arm
from washexp.engine import family
from washexp.engine.runner import Result, Work
from washexp.errors import ConfigError, ModelError
from washexp.provenance import code_digest
from washexp.tracking.kinds import KIND_TAG, CliffCell, CliffRun, Kind

KIND = Kind.CLIFF.value
CLIFF_CODE = (*CODE, "washexp.compaction.cliff")
SETS = "cliff-sets"
"""The folder of the sweep's own output folder the sets are generated into."""
SCORES = ("retention", "fact_accuracy")


def _sets(cfg, job, sweep, grid: Grid) -> dict[int, tuple[Path, str]]:
    into = sweep.root / job.sweep / SETS
    return sweep.shared(("cliff-sets", str(into), grid), lambda: generate_sets(grid, into))


def run_job(cfg, job, sweep) -> None:
    """Check the grid, the method and the rest of the arm's config, then generate the sets (once
    per command; nothing is written for a config refused) and start the conditions."""
    c = cfg.compaction
    grid = Grid.of(c.measurement)
    kind = c.method.name
    if c.method.target or kind not in METHODS:
        raise ConfigError(f"method={kind}: the cliff measures {', '.join(METHODS)} (a budget means something for them)")
    if c.topn != 0:
        raise ConfigError(f"topn={c.topn}: the cliff measures the method alone (topn=0)")
    check_settings(cfg)  # what plan_arm checks of the config, before a set is there to plan
    arm_method(cfg, sweep)  # the model and the method: the roles are built once, each set's plan reuses them
    tracker = family.tracker(cfg, sweep)  # its store checked too (the study opens it after its fixtures load)
    sets = _sets(cfg, job, sweep, grid)
    plans: dict[int, ArmPlan] = {
        n: plan_arm(replace(cfg, benchmark=replace(cfg.benchmark, fixtures=str(folder))), job, sweep)
        for n, (folder, _) in sets.items()
    }
    first = plans[grid.set_lengths[0]]
    code = sweep.shared(("code", CLIFF_CODE), lambda: code_digest(CLIFF_CODE, CODE_DATA))
    measured = {
        "name": KIND,
        "seed": grid.seed,
        "tasks": grid.tasks,
        "budgets": list(grid.budgets),
        "budget_length": grid.budget_length,
        "lengths": list(grid.lengths),
        "length_budget": grid.length_budget,
    }
    base = {k: v for k, v in first.parent.identity.items() if k != "tasks"}
    base = {**base, "code": code, "measurement": measured}
    params = {k: v for k, v in first.parent.params.items() if k not in ("tasks", "taskset")}
    params = {**params, "code": code, "method": kind, "measurement": KIND, **measured}
    tags = {k: v for k, v in first.parent.tags.items() if k != KIND_TAG}
    tags |= CliffRun(kind).tags()
    label = f"{kind} · cliff"
    digests = {str(n): sha for n, (_, sha) in sets.items()}
    parent = Work(
        label,
        {**base, "sets": digests},
        {**params, **{f"set_L{n}": sha for n, sha in digests.items()}},
        tags,
    )
    tasks: dict[tuple[int, str], Task] = {(n, t.id): t for n, p in plans.items() for t in p.tasks}
    children = [
        Work(
            f"{label} · L={n} · B={b} · {t.id}",
            {**base, "length": n, "budget": b, "task": t.id, "fixture": t.digest},
            {**params, "length": n, "budget": b, "task": t.id, "cohort": t.cohort},
            {**tags, **CliffCell(t.id, n, b).tags()},
            key=(n, b, t.id),
        )
        for n, b in grid.points
        for t in plans[n].tasks
    ]
    cache = first.cache
    generations, answers, repeats = cfg.model.generations, cfg.model.answers_per_context, cfg.model.repeats
    recorder = recorder_of(cache.roles)

    def compute(work: Work) -> Result:
        assert isinstance(work.key, tuple)
        n, b, task_id = work.key
        task = tasks[(n, task_id)]
        kept = mask_keep(task, b) if kind == "mask" else None
        method = baseline("mask", {"M": kept}) if kept is not None else first.method
        allowance = None if kept is not None else b
        mine = run_condition(task, Arm(kind, 0), cache, generations, answers, method=method, repeats=repeats,
                             allowance=allowance)  # fmt: skip
        full = run_condition(task, Arm("full", None), cache, generations, answers, method=builtin("full"),
                             repeats=repeats)  # fmt: skip
        metrics = {k: mine.metrics[k] for k in (*SCORES, "input_tokens", "valid") if k in mine.metrics}
        metrics |= {f"full_{k}": full.metrics[k] for k in (*SCORES, "input_tokens") if k in full.metrics}
        metrics |= {"evidence_tokens": float(mine.metrics["full_input_tokens"])}
        if kept is not None:
            metrics["mask_m"] = float(kept)
        if recorder is not None:  # the calls behind both contexts: cost_usd, calls_live, calls_replayed
            metrics |= recorder.charge(recording_keys(mine.artifacts) + recording_keys(full.artifacts)).metrics()
        manifest = {"fixture": task.files, "source": first.source}
        return Result(metrics, {"config.yaml": first.config_yaml}, manifest=manifest)

    def summarize(found: dict[Hashable, dict[str, float] | None]) -> Result:
        done = [m for m in found.values() if m is not None]
        metrics = {"conditions": float(len(found)), "failed": float(len(found) - len(done))}
        return Result(metrics, {"config.yaml": first.config_yaml}, manifest={"source": first.source})

    def headline(m: dict[str, float]) -> str:
        return f"{int(m.get('conditions', 0))} conditions, {int(m.get('failed', 0))} failed"

    group = family.Group(
        label,
        "condition",
        parent,
        children,
        compute,
        summarize,
        headline,
        detail=cache.roles.calls,
        concurrency=cache.roles.concurrency,
        lane=id(cache.roles),
    )
    family.run(cfg, job, sweep, group, tracked=tracker, fatal=(ModelError,), wait=False)
