"""One compaction condition: a task under an arm (Full, or S/H + Jev Top N), every generation.

Data flows one way: task -> frozen summary and ranking -> context -> (answers -> grades) ->
metrics and artifacts. S, H and the Jev scores are produced once per task and generation and
memoized, so they are byte-identical across every N (an LLM backend's recorder freezes them
across processes as well).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import cache
from typing import Any

from washexp.compaction import budget, hermes, hermes_real
from washexp.compaction.aggregate import mean, task_score
from washexp.compaction.context import (
    Context,
    evidence_tokens,
    full_context,
    fused_context,
    protected_tokens,
    to_wire,
)
from washexp.compaction.grading import grade
from washexp.compaction.jev import rank, top_n
from washexp.compaction.retention import retained_fields, retention
from washexp.errors import ConfigError
from washexp.fixtures.compaction import Task
from washexp.roles import RankJob, ReadJob, Roles, SummaryJob
from washexp.tokens import count

CEILING_TOPN = 5
"""The ceiling is sized so the whole N sweep (up to Top 5) fits."""


@dataclass(frozen=True)
class Arm:
    method: str
    """``full``, ``S`` or ``H``."""
    topn: int | None
    """Jev Top N fused with the summary; None for Full."""

    @property
    def label(self) -> str:
        return "Full" if self.method == "full" else f"{self.method} top{self.topn}"


@dataclass(frozen=True)
class Sizes:
    """The per-task sizes fixed before answering."""

    evidence_tokens: int
    allowance: int
    protected_tokens: int
    full_input_tokens: int
    ceiling_base: int
    ceiling: int


@dataclass
class Frozen:
    """Everything a task's conditions share for one generation."""

    s_summary: str
    scores: list[float]
    h: dict[str, hermes.Checkpoint] = field(default_factory=dict)
    """H by implementation (``native`` or ``hermes``)."""


_memo: dict[tuple, Any] = {}


def _frozen(task: Task, roles: Roles, generation: int, allowance: int) -> Frozen:
    key = ("frozen", task.digest, json.dumps(roles.spec, sort_keys=True), generation)
    if key not in _memo:
        s = roles.summarize(SummaryJob(task.id, task.query, task.units, allowance, generation))
        scores = roles.rank(RankJob(task.id, task.query, task.units, generation))
        if len(scores) != len(task.units):
            raise ValueError(f"ranker returned {len(scores)} scores for {len(task.units)} units")
        _memo[key] = Frozen(s_summary=s, scores=scores)
    return _memo[key]


def h_impl_for(roles: Roles, requested: str) -> str:
    """``method.h_impl`` resolved: ``auto`` is the real Hermes when the backend has it."""
    if requested == "auto":
        return "hermes" if roles.hermes_checkpoint else "native"
    if requested not in ("native", "hermes"):
        raise ConfigError(f"method.h_impl={requested!r}: expected auto, native or hermes")
    if requested == "hermes" and roles.hermes_checkpoint is None:
        raise ConfigError("method.h_impl=hermes needs an LLM backend (model=openai) and hermes-agent")
    return requested


def _checkpoint(
    task: Task, roles: Roles, generation: int, frozen: Frozen, allowance: int, impl: str = "native"
) -> hermes.Checkpoint:
    if impl not in frozen.h:
        # H sees only the pre-final evidence history, with the original task as its focus.
        if impl == "hermes":
            turns = [to_wire(m) for m in task.history]
            frozen.h[impl] = roles.hermes_checkpoint(task.id, generation, turns, task.query, allowance)
        else:
            writer = roles.checkpoint_writer(task.id, generation)
            frozen.h[impl] = hermes.generate_checkpoint(list(task.history), task.query, allowance, writer)
    return frozen.h[impl]


def _each(roles: Roles, fn: Callable[[int], Any], generations: int) -> list[Any]:
    """``fn(g)`` for every generation: through the shared call pool when the backend waits on an
    endpoint, in order otherwise. ``fn`` must not itself wait on the pool."""
    if roles.concurrency <= 1:
        return [fn(g) for g in range(generations)]
    return list(_call_pool(roles.concurrency).map(fn, range(generations)))


def task_sizes(task: Task, roles: Roles, generations: int) -> Sizes:
    evidence = evidence_tokens(task)
    allow = budget.allowance(evidence)
    protected = protected_tokens(task)
    unit_tokens = [count(u.render()) for u in task.units]
    frozen = _each(roles, lambda g: _frozen(task, roles, g, allow), generations)
    s_largest = max(fused_context(task, f.s_summary, top_n(f.scores, CEILING_TOPN)).input_tokens for f in frozen)
    ceil = budget.ceiling(protected, allow, unit_tokens, s_largest)
    return Sizes(evidence, allow, protected, full_context(task).input_tokens, ceil.base, ceil.value)


@dataclass(frozen=True)
class Outcome:
    """One generation's context (or the reason it is invalid)."""

    context: Context | None
    invalid: str | None
    summary: str | None


def _outcome(task: Task, arm: Arm, roles: Roles, g: int, sizes: Sizes, impl: str = "native") -> Outcome:
    if arm.method == "full":
        return Outcome(full_context(task), None, None)
    frozen = _frozen(task, roles, g, sizes.allowance)
    selected = top_n(frozen.scores, arm.topn)
    if arm.method == "S":  # S is never filtered: whether it shrinks is reported, not enforced
        return Outcome(fused_context(task, frozen.s_summary, selected), None, frozen.s_summary)
    cp = _checkpoint(task, roles, g, frozen, sizes.allowance, impl)
    if not cp.valid:
        return Outcome(None, cp.failure, cp.last_body)
    alone = fused_context(task, cp.body, [])
    if alone.input_tokens > sizes.ceiling:
        return Outcome(None, f"H input {alone.input_tokens} > ceiling {sizes.ceiling}", cp.body)
    if alone.input_tokens >= sizes.full_input_tokens:
        return Outcome(None, f"H input {alone.input_tokens} >= Full {sizes.full_input_tokens}", cp.body)
    return Outcome(fused_context(task, cp.body, selected), None, cp.body)


@cache
def _call_pool(workers: int) -> ThreadPoolExecutor:
    """Model calls of every condition share one bounded pool, so an endpoint stays busy while
    a condition waits on its summaries or answers (the model itself bounds requests in flight)."""
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="washexp-call")


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


def _generation(task: Task, arm: Arm, roles: Roles, g: int, sizes: Sizes, impl: str, answers: int) -> Generation:
    out = _outcome(task, arm, roles, g, sizes, impl)
    missing = (
        retained_fields(task, out.context.evidence_text)
        if out.context
        else {f: list(n) for f, n in task.needles.items()}
    )
    gen = Generation(g, out, missing)
    if roles.read and gen.valid:  # an invalid context is never answered: every answer scores 0
        pool = _call_pool(max(1, roles.concurrency))
        gen.answers = [pool.submit(roles.read, ReadJob(task.id, out.context.messages, g, a)) for a in range(answers)]
    return gen


def run_condition(
    task: Task, arm: Arm, roles: Roles, generations: int, answers: int, h_impl: str = "auto"
) -> tuple[dict[str, float], dict[str, str], dict[str, list[dict]]]:
    """Metrics, artifacts and MLflow tables of one condition. An invalid generation scores 0
    and stays in. Tables: ``retention.json`` (one row per generation and field, always) and
    ``grades.json`` (one row per answer and field, when a reader exists)."""
    impl = h_impl_for(roles, h_impl) if arm.method == "H" else "native"
    sizes = task_sizes(task, roles, generations)
    if arm.method == "H":  # the checkpoints of all generations at once
        _each(
            roles,
            lambda g: _checkpoint(task, roles, g, _frozen(task, roles, g, sizes.allowance), sizes.allowance, impl),
            generations,
        )
    gens = [_generation(task, arm, roles, g, sizes, impl, answers) for g in range(generations)]
    where = {"task": task.id, "method": arm.method, "topn": arm.topn}
    artifacts = {"sizes.json": _json(asdict(sizes)), **_frozen_artifacts(task, arm, roles, gens, sizes, impl)}
    tables = {
        "retention.json": [
            {
                **where,
                "generation": gen.g,
                "field": f,
                "valid": gen.valid,
                "retained": gen.valid and not m,
                "missing": list(m),
            }
            for gen in gens
            for f, m in gen.missing.items()
        ]
    }
    tokens = [gen.outcome.context.input_tokens for gen in gens if gen.valid]
    metrics = {
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
    if roles.read:
        metrics |= _grade_answers(task, gens, answers, where, artifacts, tables)
    if roles.records:
        contexts = [list(gen.outcome.context.messages) for gen in gens if gen.valid]
        for key, record in roles.records(task.id, arm.method, contexts).items():
            artifacts[f"requests/{key}.json"] = _json(record)
    return {k: v for k, v in metrics.items() if v is not None}, artifacts, tables


def _frozen_artifacts(
    task: Task, arm: Arm, roles: Roles, gens: list[Generation], sizes: Sizes, impl: str
) -> dict[str, str]:
    """Per generation: the summary and ranking used, the context and what it is missing."""
    out = {}
    for gen in gens:
        g = gen.g
        if gen.outcome.summary is not None:
            out[f"summary/g{g}.txt"] = gen.outcome.summary
        if arm.method != "full":
            frozen = _frozen(task, roles, g, sizes.allowance)
            out[f"ranking/g{g}.json"] = _json(_ranking(task, frozen.scores, arm.topn))
            if arm.method == "H":
                out[f"summary/g{g}.checkpoint.json"] = _json(_checkpoint_record(frozen.h.get(impl), impl))
        if gen.valid:
            out[f"contexts/g{g}.json"] = _json(list(gen.outcome.context.messages))
            out[f"retention/g{g}.json"] = _json(gen.missing)
    return out


def _grade_answers(
    task: Task, gens: list[Generation], answers: int, where: dict, artifacts: dict, tables: dict
) -> dict[str, float | None]:
    """Wait for every answer, grade it strictly, and aggregate as the study does."""
    acc, correct, api_tokens, rows = [], [], [], []
    for gen in gens:
        if not gen.valid:
            acc.append([0.0] * answers)
            correct.append([0.0] * answers)
            continue
        replies = [future.result() for future in gen.answers]
        grades = [grade(task, reply.text) for reply in replies]
        for a, gr in enumerate(grades):
            rows += [
                {**where, "generation": gen.g, "answer": a, "field": f, "correct": ok, "malformed": gr.malformed}
                for f, ok in gr.fields.items()
            ]
        api_tokens += [r.prompt_tokens for r in replies if r.prompt_tokens is not None]
        artifacts[f"answers/g{gen.g}.json"] = _json(
            [
                {**asdict(r), "fields": gr.fields, "malformed": gr.malformed}
                for r, gr in zip(replies, grades, strict=True)
            ]
        )
        acc.append([gr.score for gr in grades])
        correct.append([float(gr.all_correct) for gr in grades])
    tables["grades.json"] = rows
    return {
        "fact_accuracy": task_score(acc),
        "all_fields_correct": task_score(correct),
        "api_input_tokens": mean(api_tokens),
    }


def _ranking(task: Task, scores: list[float], n: int | None) -> dict:
    return {
        "units": [{"index": u.index, "call_id": u.call_id, "arguments": u.arguments} for u in task.units],
        "scores": scores,
        "order": rank(scores),
        "selected": top_n(scores, n or 0),
        "requested_n": n,
    }


def _checkpoint_record(cp: hermes.Checkpoint | None, impl: str) -> dict:
    if cp is None:
        return {}
    protocol = hermes.PROTOCOL if impl == "native" else hermes_real.protocol()
    return {
        "impl": impl,
        "protocol": protocol,
        "valid": cp.valid,
        "failure": cp.failure,
        "attempts": [asdict(a) for a in cp.attempts],
    }


def _json(obj: Any) -> str:
    return json.dumps(obj, indent=1, ensure_ascii=False, sort_keys=False) + "\n"
