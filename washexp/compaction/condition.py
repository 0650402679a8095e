"""One compaction condition: a task under an arm (Full, or S/H + Jev Top N), every generation.

Data flows one way: task -> frozen summary and ranking -> context -> (answers -> grades) ->
metrics, artifacts and tables (a :class:`ConditionResult`). An invalid generation scores 0 and
stays in.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from typing import Any

from washexp.compaction import budget
from washexp.compaction.aggregate import mean
from washexp.compaction.answers import grade_answers
from washexp.compaction.artifacts import frozen_artifacts, to_json
from washexp.compaction.context import Context, evidence_tokens, full_context, fused_context, protected_tokens
from washexp.compaction.fixtures import Task
from washexp.compaction.frozen import FrozenCache
from washexp.compaction.jev import top_n
from washexp.compaction.retention import retained_fields, retention
from washexp.compaction.roles import ReadJob
from washexp.tokens import count

CEILING_TOPN = 5
"""The ceiling is sized so the whole N sweep (up to Top 5) fits."""
METHOD_ORDER = ("full", "S", "H")


@dataclass(frozen=True)
class Arm:
    method: str
    """``full``, ``S`` or ``H``."""
    topn: int | None
    """Jev Top N fused with the summary; None for Full."""

    @property
    def label(self) -> str:
        return "Full" if self.method == "full" else f"{self.method} top{self.topn}"

    @property
    def order(self) -> tuple[int, int]:
        """Full first, then S top0..N, then H top0..N."""
        return (METHOD_ORDER.index(self.method), -1 if self.topn is None else self.topn)


@dataclass(frozen=True)
class Sizes:
    """The per-task sizes fixed before answering."""

    evidence_tokens: int
    allowance: int
    protected_tokens: int
    full_input_tokens: int
    ceiling_base: int
    ceiling: int


def task_sizes(task: Task, cache: FrozenCache, generations: int) -> Sizes:
    evidence = evidence_tokens(task)
    allow = budget.allowance(evidence)
    protected = protected_tokens(task)
    unit_tokens = [count(u.render()) for u in task.units]
    frozen = cache.roles.each(lambda g: cache.get(task, g, allow), generations)
    s_largest = max(fused_context(task, f.s_summary, top_n(f.scores, CEILING_TOPN)).input_tokens for f in frozen)
    ceil = budget.ceiling(protected, allow, unit_tokens, s_largest)
    return Sizes(evidence, allow, protected, full_context(task).input_tokens, ceil.base, ceil.value)


@dataclass(frozen=True)
class Outcome:
    """One generation's context (or the reason it is invalid)."""

    context: Context | None
    invalid: str | None
    summary: str | None


def outcome(task: Task, arm: Arm, cache: FrozenCache, g: int, sizes: Sizes, impl: str = "native") -> Outcome:
    if arm.method == "full":
        return Outcome(full_context(task), None, None)
    frozen = cache.get(task, g, sizes.allowance)
    selected = top_n(frozen.scores, arm.topn)
    if arm.method == "S":  # S is never filtered: whether it shrinks is reported, not enforced
        return Outcome(fused_context(task, frozen.s_summary, selected), None, frozen.s_summary)
    cp = cache.checkpoint(task, g, sizes.allowance, impl)
    if not cp.valid:
        return Outcome(None, cp.failure, cp.last_body)
    alone = fused_context(task, cp.body, [])
    if alone.input_tokens > sizes.ceiling:
        return Outcome(None, f"H input {alone.input_tokens} > ceiling {sizes.ceiling}", cp.body)
    if alone.input_tokens >= sizes.full_input_tokens:
        return Outcome(None, f"H input {alone.input_tokens} >= Full {sizes.full_input_tokens}", cp.body)
    return Outcome(fused_context(task, cp.body, selected), None, cp.body)


@dataclass
class Generation:
    """One generation of a condition: its context, what it retains, and its answers."""

    g: int
    outcome: Outcome
    missing: dict[str, list[str]]
    """Field -> needles missing from the context (all of them when the context is invalid)."""
    answers: list[Future] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return self.outcome.context is not None

    @property
    def retention(self) -> float:
        return retention(self.missing) if self.valid else 0.0


@dataclass(frozen=True)
class ConditionResult:
    metrics: dict[str, float]
    artifacts: dict[str, str]
    tables: dict[str, list[dict]]
    """``retention.json`` (one row per generation and field, always) and ``grades.json`` (one
    row per answer and field, when a reader exists), logged as MLflow tables."""


def _generation(task: Task, arm: Arm, cache: FrozenCache, g: int, sizes: Sizes, impl: str, answers: int):
    out = outcome(task, arm, cache, g, sizes, impl)
    missing = (
        retained_fields(task, out.context.evidence_text)
        if out.context
        else {f: list(n) for f, n in task.needles.items()}
    )
    gen = Generation(g, out, missing)
    roles = cache.roles
    if roles.read and gen.valid:  # an invalid context is never answered: every answer scores 0
        job = [ReadJob(task.id, out.context.messages, g, a) for a in range(answers)]
        gen.answers = (
            [roles.pool.submit(roles.read, j) for j in job] if roles.pool else [_done(roles.read, j) for j in job]
        )
    return gen


def _done(fn, arg) -> Future:
    future: Future = Future()
    future.set_result(fn(arg))
    return future


def run_condition(
    task: Task, arm: Arm, cache: FrozenCache, generations: int, answers: int, h_impl: str = "native"
) -> ConditionResult:
    """Metrics, artifacts and MLflow tables of one condition (see :class:`ConditionResult`)."""
    sizes = task_sizes(task, cache, generations)
    if arm.method == "H":  # the checkpoints of all generations at once
        cache.roles.each(lambda g: cache.checkpoint(task, g, sizes.allowance, h_impl), generations)
    gens = [_generation(task, arm, cache, g, sizes, h_impl, answers) for g in range(generations)]
    where = {"task": task.id, "method": arm.method, "topn": arm.topn}
    frozen = [cache.get(task, gen.g, sizes.allowance) for gen in gens] if arm.method != "full" else []
    artifacts = {"sizes.json": to_json(asdict(sizes)), **frozen_artifacts(task, arm, gens, frozen, h_impl)}
    tables = {
        "retention.json": [
            {
                **where,
                "generation": gen.g,
                "field": f,
                "valid": gen.valid,
                "retained": gen.valid and not m,
                "missing": m,
            }
            for gen in gens
            for f, m in gen.missing.items()
        ]
    }
    tokens = [gen.outcome.context.input_tokens for gen in gens if gen.valid]
    metrics: dict[str, Any] = {
        "retention": mean(gen.retention for gen in gens),
        "retention_all_fields": mean(float(gen.valid and not any(gen.missing.values())) for gen in gens),
        "valid": mean(gen.valid for gen in gens),
        "contexts": float(generations),
        "contexts_valid": float(sum(gen.valid for gen in gens)),
        "input_tokens": mean(tokens),
        "input_tokens_total": float(sum(tokens)),
        "contexts_shortened": float(sum(t < sizes.full_input_tokens for t in tokens)),
        "reduction_pct": mean(100.0 * (sizes.full_input_tokens - t) / sizes.full_input_tokens for t in tokens),
        "units_kept": mean(len(gen.outcome.context.units) for gen in gens if gen.valid),
        "units_total": float(len(task.units)),
        "summary_tokens": mean(count(gen.outcome.summary) for gen in gens if gen.outcome.summary is not None),
        "allowance": float(sizes.allowance),
        "ceiling": float(sizes.ceiling),
        "ceiling_enlarged": float(sizes.ceiling > sizes.ceiling_base),
        "full_input_tokens": float(sizes.full_input_tokens),
    }
    keys = [k for g in range(generations) for k in cache.get(task, g, sizes.allowance).keys]
    if arm.method == "H":
        keys += [k for f in frozen for k in f.h[h_impl].keys]
    if cache.roles.read:
        graded = grade_answers(task, gens, answers, where)
        metrics |= graded.metrics
        artifacts |= graded.artifacts
        tables |= graded.tables
        keys += graded.keys
    if cache.roles.recording:
        for key in dict.fromkeys(keys):
            record = cache.roles.recording(key)
            if record is not None:
                artifacts[f"requests/{key}.json"] = to_json(record)
    return ConditionResult({k: v for k, v in metrics.items() if v is not None}, artifacts, tables)
