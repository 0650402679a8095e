"""CoalWash's keeps gate (``apply.mjs`` v1.1.0, "KEEPS-GATE"): a keep with an anchor binds its file.

A keep that carries ``anchor`` and ``anchorFile`` (``washexp.wash.coalwash.keeps``) says: this text of that
file was kept on purpose. A plan that edits or deletes the file must leave the anchor somewhere
in the files it writes (exactly, or with whitespace runs read as one space: a merge may move the
anchor to another file); otherwise every item on that file is refused and named, and the rest of
the plan goes on. Refusing one file's items can take away the text that kept another keep's
anchor alive, so the check repeats until nothing more is refused.

``anchorFile`` is CoalWash's absolute path; a store file is matched by its name (the last part of
the path), since a store holds only top-level files.
"""

from __future__ import annotations

import re

from washexp.wash.coalwash.inventory import WS
from washexp.wash.plan import Plan, PlanItem, apply_to_texts
from washexp.wash.washer import Keep

_WS = re.compile(f"[{WS}]+")  # JavaScript's \s


def _norm(s: str) -> str:
    return _WS.sub(" ", s).strip()


def _name(anchor_file: str) -> str:
    return re.split(r"[\\/]", anchor_file)[-1]


def anchor_refusals(plan: Plan, files: dict[str, str], keeps: tuple[Keep, ...]) -> list[tuple[PlanItem, str]]:
    """The items to refuse (each with why) so that every anchored keep's text survives ``plan``."""
    bound = [(k.anchor, k.anchor_file, k.date) for k in keeps if k.anchor and k.anchor_file]
    items, refused = list(plan.items), []
    while bound:
        after = apply_to_texts(files, Plan(tuple(items)))
        written = [t for n, t in after.items() if t != files.get(n)]
        excluded: set[str] = set()
        for anchor, anchor_file, date in bound:
            name = _name(anchor_file)
            if name in excluded:
                continue
            touched = any(it.file == name for it in items)
            if not touched or any(anchor in t or _norm(anchor) in _norm(t) for t in written):
                continue
            excluded.add(name)
            why = f"refused: the keep {anchor[:80]!r} ({date or 'undated'}) would be lost from {name}"
            refused += [(it, why) for it in items if it.file == name]
        if not excluded:
            break
        items = [it for it in items if it.file not in excluded]
    return refused
