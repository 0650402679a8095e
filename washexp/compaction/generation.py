"""One generation of a condition (its context, what it retains, its answers) and a condition's
metrics over its generations."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from washexp.compaction.backends.roles import ReadJob, Roles
from washexp.compaction.inputs.context import Context
from washexp.compaction.inputs.fixtures import Task
from washexp.compaction.inputs.meter import ENDPOINT, GGUF, LOCAL
from washexp.compaction.scoring.aggregate import mean
from washexp.compaction.scoring.retention import retained_fields, retention
from washexp.tokens import count


@dataclass(frozen=True)
class Outcome:
    """One generation's context, or the reason there is none."""

    context: Context | None
    invalid: str | None = None
    """Why there is no context: an H validity rule, or the failure of a part it uses."""
    summary: str | None = None
    failed: str | None = None
    """The role whose reply failed (``S``, ``Jev``, ``H``); None for a valid or merely invalid one."""
    check: dict | None = None
    """H's "fewer than Full" check: which count decided (``source``) and both counts."""
    invalid_kind: str | None = None
    """Which validity rule a checked method broke (one of ``INVALID_KINDS``); None otherwise."""


INVALID_KINDS = {
    "provenance": "provenance (no-user sentinel, 'User asked:')",
    "over_allowance": "over the allowance after every attempt",
    "empty": "no body",
    "over_ceiling": "over the ceiling",
    "not_shorter": "not fewer tokens than Full",
}
"""Why a checked method's context is invalid (kind -> what a record calls it)."""


@dataclass
class Generation:
    g: int
    outcome: Outcome
    missing: dict[str, list[str]]
    """Field -> needles missing from the context (all of them when there is no context)."""
    answers: list[Future] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return self.outcome.context is not None

    @property
    def retention(self) -> float:
        return retention(self.missing) if self.valid else 0.0


def generation(task: Task, out: Outcome, g: int, roles: Roles, answers: int, repeats: int = 1) -> Generation:
    """Measure retention and submit the answers (a context that is not there is never answered):
    ``answers`` per repeat of the answering step, repeat by repeat (``model.repeats``)."""
    missing = (
        retained_fields(task, out.context.evidence_text)
        if out.context
        else {f: list(n) for f, n in task.needles.items()}
    )
    gen = Generation(g, out, missing)
    if roles.read and out.context is not None:  # gen.valid
        jobs = [
            ReadJob(task.id, out.context.messages, g, a, r, tuple(task.fields))
            for r in range(repeats)
            for a in range(answers)
        ]
        gen.answers = [roles.pool.submit(roles.read, j) if roles.pool else _done(roles.read, j) for j in jobs]
    return gen


def _done(fn, arg) -> Future:
    future: Future = Future()
    future.set_result(fn(arg))
    return future


def _distinct(parts, of=lambda value: value) -> float | None:
    """How many different values the generations produced (None: the condition has no such part)."""
    if not parts:
        return None
    return float(len({repr(of(p.value)) for p in parts if p.ok and of(p.value) is not None}))


def _h_body(cp) -> str | None:
    """The body H produced, accepted or not (identical generations show even when invalid)."""
    return cp.body if cp.valid else cp.last_body


def condition_metrics(task: Task, gens: list[Generation], sizes, parts: dict[str, list]) -> dict[str, Any]:
    contexts = [gen.outcome.context for gen in gens if gen.outcome.context is not None]  # the valid ones
    tokens = [c.input_tokens for c in contexts]
    full = sizes.full_input_tokens
    failed = [gen.outcome.failed for gen in gens if gen.outcome.failed]
    checks = [gen.outcome.check["source"] for gen in gens if gen.outcome.check]
    metrics: dict[str, Any] = {
        "retention": mean(gen.retention for gen in gens),
        "retention_all_fields": mean(float(gen.valid and not any(gen.missing.values())) for gen in gens),
        "valid": mean(gen.valid for gen in gens),
        "contexts": float(len(gens)),
        "contexts_valid": float(sum(gen.valid for gen in gens)),
        "contexts_failed": float(len(failed)),
        **{f"contexts_failed_{role.lower()}": float(failed.count(role)) for role in ("S", "Jev", "H")},
        "input_tokens": mean(tokens),
        "input_tokens_total": float(sum(tokens)),
        "contexts_shortened": float(sum(t < full for t in tokens)),
        "reduction_pct": mean(100.0 * (full - t) / full for t in tokens),
        "units_kept": mean(len(c.units) for c in contexts),
        "units_total": float(len(task.units)),
        "summary_tokens": mean(count(gen.outcome.summary) for gen in gens if gen.outcome.summary is not None),
        "allowance": float(sizes.allowance),
        "full_input_tokens": float(full),
        "distinct_s": _distinct(parts["S"]),
        "distinct_rankings": _distinct(parts["Jev"]),
        "distinct_h": _distinct(parts["H"], _h_body),
        "h_full_check_endpoint": float(checks.count(ENDPOINT)) if checks else None,
        "h_full_check_local": float(checks.count(LOCAL)) if checks else None,
        "h_full_check_gguf": float(checks.count(GGUF)) if checks else None,
        **{f"invalid_{k}": float(sum(gen.outcome.invalid_kind == k for gen in gens)) for k in INVALID_KINDS},
    }
    if sizes.ceiling is not None:
        metrics["ceiling"] = float(sizes.ceiling)
        metrics["ceiling_enlarged"] = float(sizes.ceiling > sizes.ceiling_base)
    return metrics
