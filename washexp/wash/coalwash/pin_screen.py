"""The pin check of a washer's plan, before any gate: CoalWash's two tiers (``apply.mjs``, v1.1.0).

- A plan with an item on a **marker**-pinned file (the user marked it ``pinned``) is malformed:
  :class:`PinnedPlan` names every such file and nothing of the wash is applied (``washexp wash``
  exits 1). It is checked before the fidelity gate, so a gate that would have blocked the pinned
  item alone cannot turn the refusal into a partial apply.
- An item on an **incapacity**-pinned file (its pin could not be cleared: an unclosed block, an
  unreadable line...) is refused alone and named; the rest of the plan goes on. A ``replace``
  whose new text holds a refused delete's text (the other half of a merge) is refused with it, so
  the text is never left in two copies. A blank deleted text pairs with nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from washexp.errors import WashexpError
from washexp.wash.coalwash.pins import PinVerdict, pin_verdict
from washexp.wash.plan import Plan, PlanItem, split_lines


class PinnedPlan(WashexpError):
    """A plan that touches a file the user pinned: refused whole, nothing applied."""

    def __init__(self, files: list[str]):
        self.files = files
        super().__init__(f"refused: the plan touches pinned files (pinned: true): {', '.join(files)}; nothing applied")


@dataclass(frozen=True)
class Screened:
    plan: Plan
    refused: tuple[tuple[PlanItem, str], ...]
    """Each item refused, and why."""


def _verdict(name: str, raw: dict[str, bytes], files: dict[str, str]) -> PinVerdict:
    """The file on disk, and as the plan sees it (after the quick tier): pinned if either is."""
    seen = [pin_verdict(raw[name])] if name in raw else []
    seen.append(pin_verdict(files[name]))
    marked = [v for v in seen if v.marker]
    return marked[0] if marked else next((v for v in seen if v.pinned), seen[-1])


def _deleted(item: PlanItem, text: str) -> str:
    """The text ``item`` would remove, line endings as ``\n``, without the last one."""
    if item.op == "delete-file":
        gone = text
    elif item.op == "delete":
        gone = "".join(split_lines(text)[item.start - 1 : item.end])
    else:
        return ""
    return gone.replace("\r\n", "\n").rstrip("\n")


def screen(plan: Plan, files: dict[str, str], raw: dict[str, bytes]) -> Screened:
    """``plan`` without its items on incapacity-pinned files (and their merge pairs); raises
    :class:`PinnedPlan` when it touches a marker-pinned file."""
    verdicts = {name: _verdict(name, raw, files) for name in sorted({it.file for it in plan.items})}
    marked = [name for name, v in verdicts.items() if v.marker]
    if marked:
        raise PinnedPlan(marked)
    unproved = {name: v.why or "pinned" for name, v in verdicts.items() if v.pinned}
    if not unproved:
        return Screened(plan, ())
    refused = [
        (it, f"refused: {it.file} cannot be proved unpinned ({unproved[it.file]})")
        for it in plan.items
        if it.file in unproved
    ]
    gone = [t for it, _ in refused if (t := _deleted(it, files[it.file])).strip()]
    pair = "refused: a merge pair: this rewrite holds the text of a delete refused for its pin"
    refused += [
        (it, pair)
        for it in plan.items
        if it.file not in unproved and it.op == "replace" and any(t in (it.text or "") for t in gone)
    ]
    out = {id(it) for it, _ in refused}
    kept = tuple(it for it in plan.items if id(it) not in out)
    return Screened(Plan(kept, plan.approved_drops, plan.washer, plan.notes), tuple(refused))
