"""A compaction arm as MLflow runs: one arm run, one nested run per task (condition).

Identity (``washexp.config.identify``, which also makes the params): the benchmark, what the
model is, the method, its H implementation (a plugin's spec: target, args, package name and
version, module sha256), top-N and phase, the spec of the roles its conditions call (their
prompts' sha256 included; hermes-agent's version only for ``h_impl=hermes``), the digest of the
code that computes a result (``CODE``: the modules a condition and an arm's aggregate run, never
a record builder or a note), and per condition the task id and its fixture digest. Any change to
how a number is made is a new condition; a served model's rerun then replays its recorded calls
and costs no model time.
Full ignores top-N: ``method=full`` under a top-N sweep is one arm, not six. Which method an arm
runs is decided once (:func:`washexp.compaction.methods.table.method_for`); the pipeline then
asks the method what it is.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from dataclasses import asdict, dataclass
from typing import Any

from washexp.compaction.artifacts import to_json
from washexp.compaction.backends.answer_format import FORMATS
from washexp.compaction.backends.roles import Roles, roles_for
from washexp.compaction.calls import condition_calls, link_grades, recorder_of, recording_keys
from washexp.compaction.condition import Arm, run_condition
from washexp.compaction.frozen import RANKERS, FrozenCache, h_label
from washexp.compaction.inputs.fixtures import Task, load_tasks
from washexp.compaction.methods.baselines import Baseline
from washexp.compaction.methods.method import Checkpointed, Method
from washexp.compaction.methods.plugin import Plugin
from washexp.compaction.methods.table import method_for
from washexp.compaction.scoring.aggregate import arm_metrics
from washexp.config import identify
from washexp.engine import family
from washexp.engine.runner import Result, Work
from washexp.errors import ConfigError, ModelError
from washexp.hashing import canonical_json
from washexp.models.cost import CALLS_TABLE, sum_metrics, usd
from washexp.models.llama_server import prompt_tokens_evaluated
from washexp.models.local import flat_params
from washexp.provenance import code_digest, package_source, public_config
from washexp.tasks import manifest
from washexp.tasks.planted import places
from washexp.tracking.kinds import ArmRun, ConditionRun
from washexp.tracking.traces import ModelCall

log = logging.getLogger("washexp")

PHASES = ("final", "preflight")
"""``preflight``: a format preflight, kept as runs of its own and never counted in final metrics."""
CODE = (
    "washexp.compaction.condition",
    "washexp.compaction.scoring.aggregate",
    "washexp.compaction.methods.plugin",
    "washexp.compaction.backends.reference",
    "washexp.compaction.backends.openai_roles",
    "washexp.compaction.backends.local_roles",
)
"""What computes a compaction result: a condition, an arm's aggregate, a plugin method, and the
backends (a registry names them lazily, so they are listed); what they import is found from their
source (:func:`washexp.provenance.code_modules`). Record builders, notes and the CLI are not in it."""
CODE_DATA = ("compaction/prompts/*.txt",)


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


def check_settings(cfg) -> None:
    """The arm's settings its config alone decides (no fixture read): a ConfigError naming the first bad one."""
    c = cfg.compaction
    if c.topn < 0:
        raise ConfigError(f"topn={c.topn}: must be >= 0")
    if cfg.model.repeats < 1:
        raise ConfigError(f"model.repeats={cfg.model.repeats}: must be >= 1 (1: the answering step once)")
    if cfg.model.structured_output not in FORMATS:
        raise ConfigError(
            f"model.structured_output={cfg.model.structured_output!r}: expected one of {', '.join(FORMATS)}"
        )
    if c.ranker not in RANKERS:
        raise ConfigError(f"ranker={c.ranker!r}: expected one of {', '.join(RANKERS)}")
    if c.phase not in PHASES:
        raise ConfigError(f"phase={c.phase!r}: expected one of {', '.join(PHASES)}")


def arm_method(cfg, sweep) -> tuple[FrozenCache, Method]:
    """The roles of ``cfg.model`` (built once per command, a local model's server started) and the
    arm's method over them; a model or method the config cannot have raises here."""
    roles: Roles = sweep.shared(
        ("roles", canonical_json([vars(cfg.model), asdict(cfg.endpoint)])),
        lambda: roles_for(cfg.model, cfg.endpoint, sweep.root),
    )
    cache = sweep.shared(("frozen", id(roles)), lambda: FrozenCache(roles))
    return cache, method_for(cfg.compaction.method, roles)


def plan_arm(cfg, job, sweep) -> ArmPlan:
    """Check the config and load the fixtures; raises before anything is written."""
    c = cfg.compaction
    check_settings(cfg)
    folder = sweep.root / cfg.benchmark.fixtures  # read once per command, as the source and commit
    tasks = sweep.shared(("tasks", str(folder), canonical_json(c.task)), lambda: load_tasks(folder, c.task))
    taskset = sweep.shared(
        ("taskset", str(folder), canonical_json(c.task)),
        lambda: manifest.named_by(folder, {t.id: t.digest for t in tasks}),
    )
    cache, method = arm_method(cfg, sweep)
    roles = cache.roles
    # a task with fewer units than N keeps them all (the study's rule): its runs log units_kept
    # the ranker only matters where units are ranked: ``ranker=bm25 topn=0`` is the Top-0 arm
    arm = Arm(method.name, None if method.whole else c.topn, c.ranker if not method.whole and c.topn else "jev")
    ident = identify(cfg, _family(cfg, method, arm, roles), sweep.shared(("code", CODE), _code), _model(cfg, roles))
    source = sweep.shared("package_source", package_source)
    tags = {**ArmRun(arm.method, arm.topn, arm.ranker, c.phase).tags(), **family.common_tags(cfg, job, sweep)}
    if isinstance(method, Plugin):
        plugin = method.spec
        tags |= {"washexp.plugin.target": plugin["target"], "washexp.plugin.package": str(plugin["package"])}
        tags["washexp.plugin.version"] = str(plugin["version"])
    params = {**ident.params, **flat_params(roles.spec)}
    if isinstance(method, Checkpointed):
        params = {**params, "h_label": h_label(method.impl)}  # what H is, in words
    parent = Work(
        f"{arm.label} · arm",
        {**ident.spec, "tasks": {t.id: t.digest for t in tasks}},
        {**params, "tasks": len(tasks), **({"taskset": taskset} if taskset else {})},
        tags,
    )
    children = [
        Work(
            f"{arm.label} · {t.id}",
            {**ident.spec, "task": t.id, "fixture": t.digest},
            {**params, "task": t.id, "cohort": t.cohort},
            {**tags, **ConditionRun(t.id, t.cohort).tags(), **planted_tag(t)},
            key=t.id,
        )
        for t in tasks
    ]
    return ArmPlan(arm, method, tasks, cache, parent, children, public_config(cfg), source)


def planted_tag(task: Task) -> dict[str, str]:
    """``planted: facts`` on a condition whose task records its planted facts (checked here,
    before any work): the record reads its ``planted.json`` table."""
    return {"planted": "facts"} if places(task.path, list(task.fields)) is not None else {}


def _family(cfg, method: Method, arm: Arm, roles: Roles) -> dict[str, Any]:
    """The compaction settings that determine an arm's results, each component only if its
    conditions call it: the method (H's implementation, a plugin's spec), top-N, phase, and the
    spec of the roles it calls (:func:`calls`)."""
    family: dict[str, Any] = {"method": arm.method, "topn": arm.topn, "phase": cfg.compaction.phase}
    if arm.ranker != "jev":  # absent for Jev: the conditions run before rankers keep their identity
        family["ranker"] = arm.ranker
    if isinstance(method, Plugin):
        family["plugin"] = method.spec
    elif isinstance(method, Baseline):
        family["baseline"] = method.spec
    elif isinstance(method, Checkpointed):
        family["h_impl"] = method.impl
    return {**family, "roles": roles.spec_for(calls(method, roles, arm))}


def calls(method: Method, roles: Roles, arm: Arm | None = None) -> set[str]:
    """The roles a condition of ``method`` calls: Full only the reader; every other method the
    summary and ranking too (the ceiling is sized from S + Top 5), H its checkpoint writer
    (``hermes``: hermes-agent's compressor), a plugin what it asks of the model (its spec). A
    baseline: the ranking only for Top N > 0, the summary only for the hybrid; ``ranker=bm25``
    calls no ranking role."""
    read = {"read"} if roles.read else set()
    if method.whole:
        return read
    jev = arm is None or arm.ranker == "jev"
    if isinstance(method, Baseline):
        ranked = {"rank"} if jev and arm is not None and arm.topn else set()
        return read | ranked | ({"summarize"} if method.summarizes else set())
    own: set[str] = set()
    if isinstance(method, Checkpointed):
        own = {"native": {"checkpoint"}, "hermes": {"hermes"}}.get(method.impl, set())
    return read | {"summarize"} | ({"rank"} if jev else set()) | own


def _model(cfg, roles: Roles) -> dict[str, Any]:
    """What the model is, as far as these conditions use it: no answers (and no repeats of the
    answering step) without a reader."""
    model = asdict(cfg.model)
    if roles.read:
        return model
    # no reader, no answering step: its repeats change nothing either
    return {**{k: v for k, v in model.items() if k != "repeats"}, "answers_per_context": 0}


def _code() -> str:
    return code_digest(CODE, CODE_DATA)


def run_job(cfg, job, sweep) -> None:
    """Start one arm on the sweep's schedule (it may still run when this returns: the next arm
    starts beside its last conditions); the tracker opens only once the config and fixtures are
    valid."""
    plan = plan_arm(cfg, job, sweep)
    tracker = family.tracker(cfg, sweep)
    tasks: dict[Hashable, Task] = {t.id: t for t in plan.tasks}
    generations, answers, repeats = cfg.model.generations, cfg.model.answers_per_context, cfg.model.repeats
    roles = plan.cache.roles
    recorder = recorder_of(roles)
    traced = recorder if cfg.tracking.traces and tracker.traces is not None else None

    def compute(work: Work) -> Result:
        task = tasks[work.key]
        out = run_condition(task, plan.arm, plan.cache, generations, answers, method=plan.method, repeats=repeats)
        artifacts = {**out.artifacts, "config.yaml": plan.config_yaml}
        metrics, tables = out.metrics, out.tables
        calls: tuple[ModelCall, ...] = ()
        keys = recording_keys(out.artifacts) if recorder is not None else []
        if recorder is not None:  # the calls behind its recordings: cost_usd, calls_live, calls_replayed
            metrics = {**metrics, **recorder.charge(keys).metrics()}
            if keys:  # each call it used, so a record over several sweeps counts it once
                tables = {**tables, CALLS_TABLE: recorder.call_rows(keys)}
        if traced is not None:  # every call behind it a trace of its run; each grade names its answer's
            calls = condition_calls(traced, keys, task.id)
            tables = link_grades(tables, calls, tracker.traces.trace_id)
        manifest = {"fixture": task.files, "source": plan.source}
        return Result(metrics, artifacts, tables, manifest, traces=calls)

    def summarize(found: dict[Hashable, dict[str, float] | None]) -> Result:
        per_task = {  # keyed by task id
            str(k): m if m is not None else {"failed": 1.0, "contexts": float(generations)} for k, m in found.items()
        }
        metrics = arm_metrics(per_task, {t.id: t.cohort for t in plan.tasks})
        metrics |= sum_metrics(list(per_task.values()))  # what its conditions' calls cost
        table = {t.id: {"cohort": t.cohort, **per_task[t.id]} for t in plan.tasks}
        artifacts = {"conditions.json": to_json(table), "config.yaml": plan.config_yaml}
        if roles.logs:  # e.g. the local server's log, and what its prompt cache saved
            logs = roles.logs()
            artifacts |= logs
            metrics |= prompt_tokens_evaluated(logs)
        return Result(metrics, artifacts, manifest={"source": plan.source})

    def headline(m: dict[str, float]) -> str:
        cost = f" · cost {usd(m['cost_usd'])}" if "cost_usd" in m else ""
        primary, control = _fmt(m.get("primary/retention")), _fmt(m.get("control/retention"))
        return f"retention primary {primary} · control {control}{cost}"

    group = family.Group(
        plan.arm.label,
        "condition",
        plan.parent,
        plan.children,
        compute,
        summarize,
        headline,
        detail=roles.calls,
        concurrency=roles.concurrency,
        lane=id(roles),
    )
    family.run(cfg, job, sweep, group, tracked=tracker, fatal=(ModelError,), wait=False)


def _fmt(value: Any) -> str:
    return "n/a" if value is None else f"{value:.3f}"
