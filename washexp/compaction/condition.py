"""One compaction condition: a task under an arm (Full, or S/H + Jev Top N), every generation.

Data flows one way: task -> frozen parts (S, ranking, H) -> context -> (answers -> grades) ->
metrics, artifacts and tables (a :class:`ConditionResult`). A context uses only what it needs:
Full nothing but the reader, Top 0 no ranking. A context is *invalid* when a checked method (H,
a plugin) breaks a validity rule, *failed* when a part it uses failed (a role's unusable reply, a
plugin's crash); both score 0 and stay in. What the method is comes from the method
(:mod:`washexp.compaction.methods.method`), never from its name.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from washexp.compaction.artifacts import frozen_artifacts, to_json
from washexp.compaction.frozen import FrozenCache
from washexp.compaction.generation import Generation, Outcome, condition_metrics, generation
from washexp.compaction.inputs import budget
from washexp.compaction.inputs.context import evidence_tokens, full_context, fused_context, protected_tokens
from washexp.compaction.inputs.fixtures import Task
from washexp.compaction.methods.baselines import Baseline, kind_of
from washexp.compaction.methods.jev import top_n
from washexp.compaction.methods.method import Method, builtin
from washexp.compaction.methods.table import BY_NAME, rank
from washexp.compaction.scoring import loss
from washexp.compaction.scoring.answers import grade_answers
from washexp.tasks.planted import TABLE as PLANTED
from washexp.tasks.planted import places
from washexp.tokens import count

CEILING_TOPN = 5
"""The ceiling is sized so the whole N sweep (up to Top 5) fits."""


@dataclass(frozen=True)
class Arm:
    method: str
    """``full``, ``S``, ``H`` or a plugin's name."""
    topn: int | None
    """Jev Top N fused with the summary; None for Full."""
    ranker: str = "jev"
    """What ranks the Top-N units: ``jev`` (the model's ranking role) or ``bm25`` (model-free)."""

    @property
    def label(self) -> str:
        if self.topn is None:  # Full, the closed book (``none``), a whole plugin
            return "Full" if self.method == "full" else self.method
        return f"{self.method} top{self.topn}" + (f" {self.ranker}" if self.ranker != "jev" else "")

    @property
    def order(self) -> tuple[int, str, int]:
        """The methods' order (:data:`washexp.compaction.methods.table.METHODS`: Full, the closed book,
        S top0..N, H top0..N, the baselines), then plugins by name, each top0..N."""
        kind = kind_of(self.method)  # a baseline's name carries its parameters: ``mask M=10``
        named = self.method if kind != self.method or kind not in BY_NAME else ""
        return (rank(kind), named, -1 if self.topn is None else self.topn)


@dataclass(frozen=True)
class Sizes:
    """The per-task sizes fixed before answering (no ceiling for Full: it needs S)."""

    evidence_tokens: int
    allowance: int
    protected_tokens: int
    full_input_tokens: int
    ceiling_base: int | None
    ceiling: int | None


def task_sizes(
    task: Task,
    cache: FrozenCache,
    generations: int,
    full_only: bool = False,
    ranker: str = "jev",
    allowance: int | None = None,
) -> Sizes:
    """The allowance comes from source length alone (unless given: the cliff's budget); the
    ceiling is enlarged to fit the S contexts that exist: S + Top 5 of each generation whose S and
    ranking succeeded, S alone where only the ranking failed, nothing from a failed S."""
    evidence = evidence_tokens(task)
    allow = budget.allowance(evidence) if allowance is None else allowance
    protected = protected_tokens(task)
    full = full_context(task).input_tokens
    if full_only:
        return Sizes(evidence, allow, protected, full, None, None)
    n = generations
    parts = cache.roles.each(
        lambda i: cache.summary(task, i, allow) if i < n else cache.ranking(task, i - n, ranker), 2 * n
    )
    s_contexts = [
        fused_context(task, s.value, top_n(r.value, CEILING_TOPN) if r.ok else []).input_tokens
        for s, r in zip(parts[:n], parts[n:], strict=True)
        if s.ok
    ]
    ceil = budget.ceiling(protected, allow, [count(u.render()) for u in task.units], max(s_contexts, default=0))
    return Sizes(evidence, allow, protected, full, ceil.base, ceil.value)


def outcome(
    task: Task, arm: Arm, cache: FrozenCache, g: int, sizes: Sizes, impl: str = "native", method: Method | None = None
) -> Outcome:
    """One generation's context, or why it is invalid (a checked method's rules) or failed (a part
    it uses). The method says what it is (``whole``, ``checked``); its name is never asked."""
    method = method or builtin(arm.method, impl)
    if method.whole:
        return Outcome(method.context(task))
    topn = arm.topn or 0
    if isinstance(method, Baseline):  # its own context, the Top-N units kept verbatim in place
        keep: list[int] = []
        if topn:
            ranking = cache.ranking(task, g, arm.ranker)
            if not ranking.ok or ranking.value is None:
                return Outcome(None, ranking.failure, failed="Jev")
            keep = top_n(ranking.value, topn)
        built = method.build(cache, task, g, sizes.allowance, keep)
        if not built.ok or built.value is None:
            return Outcome(None, built.failure, failed=method.role)
        return Outcome(built.value[0], None, built.value[1])
    made = method.part(cache, task, g, sizes.allowance)
    if not made.ok or made.value is None:
        return Outcome(None, made.failure, failed=method.role)
    check: dict[str, Any] | None = None
    if not method.checked:  # S is never filtered: whether it shrinks is reported, not enforced
        summary = made.value
    else:
        cp, who = made.value, method.role
        if not cp.valid:
            return Outcome(None, cp.failure, cp.last_body, invalid_kind=cp.kind)
        alone = fused_context(task, cp.body, [])
        assert sizes.ceiling is not None  # only a whole method's sizes have none
        if alone.input_tokens > sizes.ceiling:
            reason = f"{who} input {alone.input_tokens} > ceiling {sizes.ceiling}"
            return Outcome(None, reason, cp.body, invalid_kind="over_ceiling")
        # The study's "fewer actual API input tokens than Full", judged before answering.
        mine, full = cache.roles.meter(alone.messages), cache.roles.meter(full_context(task).messages)
        check = {"source": mine.source, "h_alone": mine.tokens, "full": full.tokens}
        if mine.tokens >= full.tokens:
            reason = f"{who} input {mine.tokens} >= Full {full.tokens} ({mine.source})"
            return Outcome(None, reason, cp.body, check=check, invalid_kind="not_shorter")
        summary = cp.body
    selected: list[int] = []
    if topn:
        ranking = cache.ranking(task, g, arm.ranker)
        if not ranking.ok or ranking.value is None:
            return Outcome(None, ranking.failure, summary, failed="Jev", check=check)
        selected = top_n(ranking.value, topn)
    return Outcome(fused_context(task, summary, selected), None, summary, check=check)


@dataclass(frozen=True)
class ConditionResult:
    metrics: dict[str, float]
    artifacts: dict[str, str]
    tables: dict[str, list[dict]]
    """``retention.json`` (one row per generation and field, always), ``grades.json`` (one
    row per answer and field, when a reader exists) and ``fact_ledger.json`` (the kept x answered
    cell of each fact, :mod:`washexp.compaction.scoring.loss`), logged as MLflow tables."""


def run_condition(
    task: Task,
    arm: Arm,
    cache: FrozenCache,
    generations: int,
    answers: int,
    h_impl: str = "native",
    method: Method | None = None,
    repeats: int = 1,
    allowance: int | None = None,
) -> ConditionResult:
    """Metrics, artifacts and MLflow tables of one condition (see :class:`ConditionResult`).
    ``method``: the arm's method (default: the study's method ``arm.method`` names); ``repeats``:
    how many times the answering step runs (``model.repeats``); ``allowance``: the summary
    allowance in tokens instead of the study's rule (the cliff's budget)."""
    method = method or builtin(arm.method, h_impl)
    roles = cache.roles
    # a baseline has no checked body: no ceiling to size, and S only where the hybrid asks for it
    whole = method.whole or isinstance(method, Baseline)
    sizes = task_sizes(task, cache, generations, whole, arm.ranker, allowance)
    if method.checked:  # the checked bodies of all generations at once
        roles.each(lambda g: method.part(cache, task, g, sizes.allowance), generations)
    gens: list[Generation] = [
        generation(task, outcome(task, arm, cache, g, sizes, method=method), g, roles, answers, repeats)
        for g in range(generations)
    ]
    where = {"task": task.id, "method": arm.method, "topn": arm.topn}
    parts = _parts(task, arm, method, cache, generations, sizes)
    artifacts = {"sizes.json": to_json(asdict(sizes)), **frozen_artifacts(task, arm, gens, parts, method)}
    failures = {f"g{gen.g}": {"role": gen.outcome.failed, "reason": gen.outcome.invalid} for gen in gens}
    if any(gen.outcome.failed for gen in gens):
        artifacts["failures.json"] = to_json({g: f for g, f in failures.items() if f["role"]})
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
    metrics = condition_metrics(task, gens, sizes, parts)
    keys = [k for made in (*parts["S"], *parts["Jev"], *parts["H"]) for k in made.keys]
    graded = grade_answers(task, gens, answers, where, repeats) if roles.read else None
    if graded is not None:
        metrics |= graded.metrics
        artifacts |= graded.artifacts
        tables |= graded.tables
        keys += graded.keys
    planted = places(task.path, list(task.fields))
    if planted is not None:  # a generated task: where each fact sits, for the by-kind and by-depth tables
        tables[PLANTED] = [{**where, **row} for row in planted]
    facts = loss.ledger(where, gens, graded.grades if graded else None, answers * repeats, answers)
    tables[loss.LEDGER_TABLE] = [row._asdict() for row in facts]
    metrics |= loss.metrics(facts)
    if roles.recording:
        for key in dict.fromkeys(keys):
            text = roles.recording(key)
            if text is not None:
                artifacts[f"requests/{key}.json"] = text
    return ConditionResult({k: v for k, v in metrics.items() if v is not None}, artifacts, tables)


def _parts(task: Task, arm: Arm, method: Method, cache: FrozenCache, n: int, sizes: Sizes) -> dict[str, list]:
    """The frozen parts behind a condition (already made: sizing and the outcomes made them).
    ``H``: a checked method's bodies (H's, or a plugin's). A baseline: its ranking (Top N > 0) only."""
    if method.whole:
        return {"S": [], "Jev": [], "H": []}
    if isinstance(method, Baseline):
        return {"S": [], "Jev": [cache.ranking(task, g, arm.ranker) for g in range(n)] if arm.topn else [], "H": []}
    return {
        "S": [cache.summary(task, g, sizes.allowance) for g in range(n)],
        "Jev": [cache.ranking(task, g, arm.ranker) for g in range(n)],
        "H": [method.part(cache, task, g, sizes.allowance) for g in range(n)] if method.checked else [],
    }
