"""One wash of one store: a fixed pipeline in which only the proposing step is pluggable.

recover -> caliper + gauge verdict -> **LEAN is a hard stop** (nothing proposed, nothing
written; ``gauge=off`` never says LEAN) -> quick tier -> ``keeps.json`` exclusion -> full tier (the
washer proposes) -> human gate (the operator decides each delete and each drop the plan entails)
-> fidelity gate (no structured value dropped unless approved) -> transactional apply (lock,
pinned refusal, external-writer abort, snapshot + WAL, atomic writes, deletes last, rollback)
-> receipt.

Both tiers are judged in memory before anything is written: the quick tier's plan passes the
operator and the gate, the washer proposes on the texts the judged quick plan leaves, its plan
passes the same judges, and only then do both tiers' edits and the new keeps land as **one
transaction** (``washexp.wash.store.apply``): all of it, or nothing. The store is locked for the whole
wash. So a washer that raises leaves every ``*.md`` file byte-identical (the error propagates: a
washer's failure as its one-line WashexpError), a blocked full tier keeps the quick tier's
mechanical clean-up, and an interrupt or a crash at any point leaves the store as it was before
the wash or as it is after it. A store file changed by anyone else after it was read (the washer
too) aborts the apply.

A washer's item on a file that is not a plain store file (``..md``, a symlink, a name the store
does not have) is refused and named in the receipt; the rest of the plan goes on. A new keep with
a bad target is refused and noted; the latest keep of a target wins (``washexp.wash.coalwash.keeps``). A keep
carrying CoalWash's anchor binds its file: an item that would lose the anchor from every file the
plan writes is refused and named (``washexp.wash.coalwash.keep_gate``).

What the operator may approve: the deletes, and the value drops the plan's deletes entail or
the plan itself declares in ``approved_drops``. A drop neither entails nor declares (a rewrite
that silently loses ``v2.31.0``) is never put to the operator, so the fidelity gate blocks it
whoever operates; an introduced hazard (a decomposed sara-am, a BOM...) always blocks. A blocked
plan writes nothing and the receipt names the values it would have dropped; as CoalWash's agent
revises a blocked plan, the items whose own edit drops a value are then taken out (named in
``blocked``) and the rest is gated again.

The quick tier leaves pinned files (``washexp.wash.coalwash.pins``) alone (its items on them are dropped
with a note). A washer's plan is checked for pins before any gate (``washexp.wash.coalwash.pin_screen``,
CoalWash's two tiers): an item on a file the user marked ``pinned`` refuses the whole wash with
one ``PinnedPlan`` line naming the pinned files, before either tier writes anything; an item on
a file whose pin cannot be cleared (an unclosed block ...) is refused alone and named, with a
rewrite that absorbs its deleted text (a merge's other half).

``gates=False`` is for control arms only (the plain-compress control): no fidelity gate, no
keeps, no LEAN stop; the human gate still shows every delete, whole-file ones included, and the
apply still holds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from washexp.errors import WashexpError
from washexp.hashing import sha256_bytes
from washexp.wash.coalwash import caliper, gate, gauge, quick
from washexp.wash.coalwash.files import decode, joined, md_name_problem, read_md_bytes
from washexp.wash.coalwash.keep_gate import anchor_refusals
from washexp.wash.coalwash.keeps import KEEPS, KeepsFile, dump, keep_problem, merged, read_keeps_file
from washexp.wash.coalwash.operators import Decision, Delete, Operator, Review
from washexp.wash.coalwash.pin_screen import screen
from washexp.wash.plan import Plan, PlanItem, apply_to_texts, split_lines
from washexp.wash.store import apply as transaction
from washexp.wash.store.scratch import scratch_dir
from washexp.wash.washer import Keep, Proposal, Washer, target_of

DELETE_OPS = ("delete", "delete-file")
LEAN_STOP = "LEAN — nothing to clean"
"""A receipt's ``stopped`` when the LEAN band stopped the wash before any tier."""


class WasherError(WashexpError):
    """A washer that raised: ``str(err)`` is one line naming the washer and the cause."""


@dataclass
class Step:
    """What one tier proposed and what became of it."""

    tier: str
    proposed: list[dict] = field(default_factory=list)
    refused: list[dict] = field(default_factory=list)
    """Deletes the operator refused (item, why)."""
    blocked: list[dict] = field(default_factory=list)
    """The values the fidelity gate saw dropped (and hazards introduced) by blocked items."""
    blocked_items: list[dict] = field(default_factory=list)
    """The items it blocked, each with the approval keys of what it would have dropped."""
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
    calls: dict[str, int] = field(default_factory=dict)
    """The washer's model calls per seat (empty: it made none)."""
    written: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    artifacts: dict[str, str] = field(default_factory=dict)
    """What the washer wanted kept (a command's output, a model's flags)."""

    @property
    def proposed(self) -> int:
        return sum(len(s.proposed) for s in self.steps)

    @property
    def refused(self) -> int:
        return sum(len(s.refused) for s in self.steps)

    @property
    def blocked(self) -> int:
        """Values the fidelity gate blocked, over every tier (> 0: some plan was not applied)."""
        return sum(len(s.blocked) for s in self.steps)

    @property
    def applied(self) -> int:
        return sum(len(s.applied) for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: every field but ``artifacts``, plus the counts over all tiers."""
        out = asdict(self)
        out.pop("artifacts")
        out |= {"proposed": self.proposed, "refused": self.refused, "blocked": self.blocked, "applied": self.applied}
        return out


def _deleted_text(item: PlanItem, files: dict[str, str]) -> str:
    if item.op == "delete-file":
        return files[item.file]
    return "".join(split_lines(files[item.file])[item.start - 1 : item.end])


def _review(plan: Plan, files: dict[str, str]) -> Review:
    """The deletes, and the value drops the deletes entail or the plan declares (see the module doc)."""
    deletes = tuple(
        Delete(i, it.file, _deleted_text(it, files), it.reason)
        for i, it in enumerate(plan.items)
        if it.op in DELETE_OPS
    )
    after = apply_to_texts(files, plan)
    declared = {d.key for d in gate.check_store(files, after, plan.approved_drops).approved}
    only_deletes = Plan(tuple(it for it in plan.items if it.op in DELETE_OPS))
    entailed = {d.key for d in gate.drops_between(files, apply_to_texts(files, only_deletes))}
    # value drops only: an introduced hazard is never the operator's to approve
    drops = [d.key for d in gate.drops_between(files, after) if d.key in declared | entailed]
    return Review(deletes, tuple(dict.fromkeys(drops)), joined(after))


def _judged(plan: Plan, files: dict[str, str], operator: Operator, gates: bool, step: Step) -> Plan | None:
    """The plan the operator and the fidelity gate let through, or None when it is blocked."""
    review = _review(plan, files)
    decision: Decision = operator.review(review)
    refused = {i for i, _ in decision.refused} | {d.index for d in review.deletes if d.index not in decision.approved}
    why = dict(decision.refused)
    step.refused += [{**plan.items[i].to_dict(), "why": why.get(i, "not approved")} for i in sorted(refused)]
    kept = tuple(it for i, it in enumerate(plan.items) if i not in refused)
    approved = sorted(set(decision.approved_drops) & set(review.drops))  # nothing beyond what was shown
    step.approved_drops = approved
    plan = Plan(kept, tuple({"type": k.partition(":")[0], "value": k.partition(":")[2]} for k in approved), plan.washer)
    if not kept or not gates:
        return plan
    result = gate.check_store(files, apply_to_texts(files, plan), approved)
    if result.passed:
        return plan
    # Blocked. As CoalWash's agent revises a blocked plan, the items whose own edit drops a value
    # are taken out and named; the rest is gated again, and blocked whole if it still drops one.
    clean: list[PlanItem] = []
    blocked: dict[str, dict] = {}  # approval key -> the drop or hazard
    for item in plan.items:
        alone = gate.check_store(files, apply_to_texts(files, Plan((item,), plan.approved_drops)), approved)
        if alone.passed:
            clean.append(item)
            continue
        found = [*alone.drops, *(h for h in alone.hazards if h.key in set(alone.introduced))]
        step.blocked_items.append({**item.to_dict(), "drops": [d.key for d in found]})
        blocked |= {d.key: d.to_dict() for d in found}
    revised = Plan(tuple(clean), plan.approved_drops, plan.washer)
    rest = gate.check_store(files, apply_to_texts(files, revised), approved) if clean else None
    if rest is not None and not rest.passed:
        blocked |= {d.key: d.to_dict() for d in [*rest.drops, *rest.hazards]}
        step.blocked_items += [{**it.to_dict(), "drops": ["(blocked with the rest)"]} for it in clean]
        revised = Plan((), plan.approved_drops, plan.washer)
    step.blocked = list(blocked.values())
    return revised


def _judge_tier(files: dict[str, str], plan: Plan, operator: Operator, gates: bool, step: Step) -> Plan | None:
    """Record what ``plan`` proposes; return what may be applied, or None (nothing, or blocked)."""
    step.proposed = [it.to_dict() for it in plan.items]
    step.notes += list(plan.notes)
    if not plan.items:
        return None
    judged = _judged(plan, files, operator, gates, step)
    return judged if judged is not None and judged.items else None


def _unpinned(plan: Plan, files: dict[str, str]) -> Plan:
    """The quick plan without its items on pinned files: a mechanical tier never trips the pin."""
    pinned = sorted({it.file for it in plan.items if transaction.is_pinned(files[it.file])})
    if not pinned:
        return plan
    items = tuple(it for it in plan.items if it.file not in pinned)
    notes = (*plan.notes, *(f"{name} is pinned: the quick tier leaves it alone" for name in pinned))
    return Plan(items, plan.approved_drops, plan.washer, notes)


def _propose(washer: Washer, files: dict[str, str], keeps: tuple[Keep, ...]) -> Proposal:
    """The washer's proposal. A washer's failure is a WashexpError (its model's, its command's; a
    plugin's is made one by ``washers.plugin``) and a failed round; anything else our own washers
    raise is a bug, and propagates as one. Nothing is written before the proposal, either way."""
    with scratch_dir("washer") as scratch:
        return washer.propose(dict(files), keeps, scratch)


def _confined(plan: Plan, files: dict[str, str], step: Step) -> Plan:
    """The plan without its items on a file that is not a plain store file (``..md``, a symlink,
    a name the store does not have): each is refused and named in the receipt; the round goes on."""
    bad = {i: why for i, it in enumerate(plan.items) if (why := _outside(it.file, files))}
    step.refused += [{**plan.items[i].to_dict(), "why": why} for i, why in bad.items()]
    if not bad:
        return plan
    kept = tuple(it for i, it in enumerate(plan.items) if i not in bad)
    return Plan(kept, plan.approved_drops, plan.washer, plan.notes)


def _outside(name: str, files: dict[str, str]) -> str | None:
    if problem := md_name_problem(name):
        return f"refused: {problem}"
    return None if name in files else f"refused: {name!r} is not a plain file of the store"


def _change(store: Path, raw: dict[str, bytes], final: dict[str, str], keeps: bytes | None) -> transaction.Change:
    """Both tiers' edits and the new keeps, as one change of the store folder."""
    writes = {n: t.encode("utf-8") for n, t in final.items() if t.encode("utf-8") != raw[n]}
    deletes = tuple(sorted(set(raw) - set(final)))
    base: dict[str, str | None] = {n: sha256_bytes(raw[n]) for n in (*writes, *deletes)}
    if keeps is not None:
        writes[KEEPS] = keeps
        old = store / KEEPS
        base[KEEPS] = sha256_bytes(old.read_bytes()) if old.exists() else None
    return transaction.Change(writes, deletes, base)


def wash(
    store: str | Path,
    washer: Washer | None,
    the_gauge,
    operator: Operator,
    *,
    tier: str = "full",
    gates: bool = True,
) -> Receipt:
    """Wash ``store`` in place, as one transaction (see the module doc)."""
    store = Path(store)
    with transaction.Transaction(store) as tx:  # the store is locked, a crashed wash rolled back
        return _wash(tx, washer, the_gauge, operator, tier, gates)


def _wash(tx: transaction.Transaction, washer: Washer | None, the_gauge, operator: Operator, tier: str, gates: bool):
    store = tx.store
    m = caliper.measure(store)
    state = gauge.load_state(store)
    verdict = the_gauge.verdict(m, state)
    gauge.save_state(store, verdict.state)
    receipt = Receipt(store.name, verdict.band, verdict.reason)
    if gates and verdict.band == "LEAN":
        receipt.stopped = LEAN_STOP
        return receipt
    raw = read_md_bytes(store)  # one read: texts and digests agree
    files = decode(store, raw)
    seen = {name: sha256_bytes(data) for name, data in raw.items()}
    q = Step("quick")
    receipt.steps.append(q)
    quick_plan = _judge_tier(files, _unpinned(quick.quick_plan(files), files), operator, gates, q)
    washed = apply_to_texts(files, quick_plan) if quick_plan else files
    final, new_keeps, full, full_plan = washed, None, None, None
    if tier == "full" and washer is not None:
        keeps_file = read_keeps_file(store) if gates else KeepsFile((), 1)
        keeps = keeps_file.keeps
        proposal = _propose(washer, washed, keeps)
        receipt.cost_tokens += proposal.cost_tokens
        receipt.calls = dict(proposal.calls)
        receipt.artifacts |= proposal.artifacts
        full = Step("full", notes=list(proposal.notes))
        receipt.steps.append(full)
        confined = _confined(proposal.plan, washed, full)
        screened = screen(confined, washed, raw)  # a marker pin refuses the whole wash (PinnedPlan)
        full.refused += [{**it.to_dict(), "why": why} for it, why in screened.refused]
        confined = screened.plan
        excluded = {k.target for k in keeps}
        items = tuple(it for it in confined.items if target_of(it, washed) not in excluded)
        anchored = anchor_refusals(Plan(items), washed, keeps)  # CoalWash's keeps gate: a kept anchor survives
        full.refused += [{**it.to_dict(), "why": why} for it, why in anchored]
        items = tuple(it for it in items if all(it is not gone for gone, _ in anchored))
        plan = Plan(items, confined.approved_drops, confined.washer or washer.name, confined.notes)
        full_plan = _judge_tier(washed, plan, operator, gates, full)
        final = apply_to_texts(washed, full_plan) if full_plan else washed
        if gates:
            bad = [(k, why) for k in proposal.keeps if (why := keep_problem(k))]
            full.notes += [f"keep refused ({why}): {k.target!r}" for k, why in bad]
            fresh = tuple(k for k in proposal.keeps if not keep_problem(k))
            new_keeps = merged(keeps, fresh) if fresh else None
            if new_keeps and not keeps_file.writable:
                full.notes.append(f"{KEEPS} is schema v{keeps_file.v} (newer than 1): read-only, new keeps not kept")
                new_keeps = None
    change = _change(store, raw, final, dump(new_keeps) if new_keeps else None)
    if change.writes or change.deletes:
        applied = tx.apply(change, seen)
        receipt.written, receipt.deleted = list(applied.written), list(applied.deleted)
        for step, judged in ((q, quick_plan), (full, full_plan)):
            if step is not None and judged is not None:
                step.applied = [it.to_dict() for it in judged.items]
    if receipt.applied:
        after = caliper.measure(store)
        gauge.save_state(store, the_gauge.after_wash(after, gauge.load_state(store)))
    return receipt
