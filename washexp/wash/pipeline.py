"""One wash of one store: a fixed pipeline in which only the proposing step is pluggable.

recover -> caliper + gauge verdict -> **LEAN is a hard stop** (nothing proposed, nothing
written; ``gauge=off`` never says LEAN) -> quick tier -> ``keeps.json`` exclusion -> full tier (the
washer proposes) -> human gate (the operator decides each delete and each drop the plan entails)
-> fidelity gate (no structured value dropped unless approved) -> transactional apply (lock,
pinned refusal, external-writer abort, snapshot + WAL, atomic writes, deletes last, rollback)
-> receipt.

The quick and the full tier each pass the gates and the apply on their own, so a blocked full
tier keeps the quick tier's mechanical clean-up. A blocked plan writes nothing and the receipt
names the values it would have dropped; as CoalWash's agent revises a blocked plan, the items whose
own edit drops a value are then taken out (named in ``blocked``) and the rest is gated again. ``gates=False`` is for control arms only (the
plain-compress control): no fidelity gate, no keeps, no LEAN stop; the human gate still shows
whole-file deletes and the apply still holds.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from washexp.wash import apply as transaction
from washexp.wash import caliper, gate, gauge, quick
from washexp.wash.files import read_md
from washexp.wash.operators import Decision, Delete, Operator, Review
from washexp.wash.plan import Plan, PlanItem, apply_to_texts, split_lines
from washexp.wash.washer import Keep, Washer, target_of

KEEPS = "keeps.json"


@dataclass
class Step:
    """What one tier proposed and what became of it."""

    tier: str
    proposed: list[dict] = field(default_factory=list)
    refused: list[dict] = field(default_factory=list)
    """Deletes the operator refused (item, why)."""
    blocked: list[dict] = field(default_factory=list)
    """Items the fidelity gate blocked, each with the values it would have dropped."""
    applied: list[dict] = field(default_factory=list)
    approved_drops: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class Receipt:
    store: str
    band: str
    reason: str
    stopped: str | None = None
    """Why nothing was proposed (``LEAN — nothing to clean``), or None."""
    steps: list[Step] = field(default_factory=list)
    cost_tokens: int = 0
    """The washer's own token cost (0 for a rule-based washer): measurement 3 charges it to arm A."""
    written: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    artifacts: dict[str, str] = field(default_factory=dict)
    """What the washer wanted kept (a command's output, a model's flags)."""

    @property
    def applied(self) -> int:
        return sum(len(s.applied) for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("artifacts")
        out["applied"] = self.applied
        return out


def _deleted_text(item: PlanItem, files: dict[str, str]) -> str:
    if item.op == "delete-file":
        return files[item.file]
    return "".join(split_lines(files[item.file])[item.start - 1 : item.end])


def _review(plan: Plan, files: dict[str, str]) -> Review:
    deletes = tuple(
        Delete(i, it.file, _deleted_text(it, files), it.reason)
        for i, it in enumerate(plan.items)
        if it.op in ("delete", "delete-file")
    )
    drops = tuple(d.key for d in gate.drops_between(files, apply_to_texts(files, plan)))
    return Review(deletes, drops)


def _judged(plan: Plan, files: dict[str, str], operator: Operator, gates: bool, step: Step) -> Plan | None:
    """The plan the operator and the fidelity gate let through, or None when it is blocked."""
    review = _review(plan, files)
    decision: Decision = operator.review(review)
    refused = {i for i, _ in decision.refused} | {d.index for d in review.deletes if d.index not in decision.approved}
    why = dict(decision.refused)
    step.refused = [{**plan.items[i].to_dict(), "why": why.get(i, "not approved")} for i in sorted(refused)]
    kept = tuple(it for i, it in enumerate(plan.items) if i not in refused)
    approved = sorted(decision.approved_drops)
    step.approved_drops = approved
    plan = Plan(kept, tuple({"type": k.partition(":")[0], "value": k.partition(":")[2]} for k in approved), plan.washer)
    if not kept or not gates:
        return plan
    result = gate.check_store(files, apply_to_texts(files, plan), approved)
    if result.passed:
        return plan
    # Blocked. As CoalWash's agent revises a blocked plan, the items whose own edit drops a value
    # are taken out and named; the rest is gated again, and blocked whole if it still drops one.
    clean, step.blocked = [], []
    for item in plan.items:
        alone = gate.check_store(files, apply_to_texts(files, Plan((item,), plan.approved_drops)), approved)
        if alone.passed:
            clean.append(item)
        else:
            step.blocked.append({**item.to_dict(), "drops": [d.key for d in [*alone.drops, *alone.hazards]]})
    revised = Plan(tuple(clean), plan.approved_drops, plan.washer)
    if clean and not gate.check_store(files, apply_to_texts(files, revised), approved).passed:
        step.blocked += [{**it.to_dict(), "drops": ["(blocked with the rest)"]} for it in clean]
        return None
    return revised


def _run_tier(store: Path, plan: Plan, operator: Operator, gates: bool, step: Step, receipt: Receipt) -> None:
    files = read_md(store)
    step.proposed = [it.to_dict() for it in plan.items]
    step.notes += list(plan.notes)
    if not plan.items:
        return
    seen = transaction.digests(store)
    judged = _judged(plan, files, operator, gates, step)
    if judged is None or not judged.items:
        return
    applied = transaction.apply_plan(store, judged, seen)
    step.applied = [it.to_dict() for it in judged.items]
    receipt.written += applied.written
    receipt.deleted += applied.deleted


def read_keeps(store: Path) -> tuple[Keep, ...]:
    path = store / KEEPS
    if not path.is_file():
        return ()
    return tuple(Keep(**k) for k in json.loads(path.read_text(encoding="utf-8")))


def _write_keeps(store: Path, keeps: tuple[Keep, ...]) -> None:
    data = json.dumps([asdict(k) for k in keeps], indent=1, ensure_ascii=False) + "\n"
    transaction.write_atomic(store / KEEPS, data.encode("utf-8"))


def wash(
    store: str | Path,
    washer: Washer | None,
    the_gauge,
    operator: Operator,
    *,
    tier: str = "full",
    gates: bool = True,
) -> Receipt:
    """Wash ``store`` in place (the caller hands it a scratch copy; see the module doc)."""
    store = Path(store)
    transaction.recover(store)
    m = caliper.measure(store)
    state = gauge.load_state(store)
    verdict = the_gauge.verdict(m, state)
    gauge.save_state(store, verdict.state)
    receipt = Receipt(store.name, verdict.band, verdict.reason)
    if gates and verdict.band == "LEAN":
        receipt.stopped = "LEAN — nothing to clean"
        return receipt
    q = Step("quick")
    receipt.steps.append(q)
    _run_tier(store, quick.quick_plan(read_md(store)), operator, gates, q, receipt)
    if tier == "full" and washer is not None:
        keeps = read_keeps(store) if gates else ()
        files = read_md(store)
        with tempfile.TemporaryDirectory(prefix="washexp-washer-") as scratch:
            proposal = washer.propose(files, keeps, Path(scratch))
        receipt.cost_tokens += proposal.cost_tokens
        receipt.artifacts |= proposal.artifacts
        excluded = {k.target for k in keeps}
        items = tuple(it for it in proposal.plan.items if target_of(it, files) not in excluded)
        full = Step("full", notes=list(proposal.notes))
        receipt.steps.append(full)
        plan = Plan(items, proposal.plan.approved_drops, proposal.plan.washer or washer.name, proposal.plan.notes)
        _run_tier(store, plan, operator, gates, full, receipt)
        if gates and proposal.keeps:
            _write_keeps(store, keeps + tuple(k for k in proposal.keeps if k.target not in excluded))
    if receipt.applied:
        after = caliper.measure(store)
        gauge.save_state(store, the_gauge.after_wash(after, gauge.load_state(store)))
    return receipt
