"""A deliberately naive compactor for washexp: keep the first and last line of every unit.

It imports nothing from washexp: a method only has to answer ``compact(request) -> str``.
``request`` carries ``query``, ``units`` (each with ``index``, ``text`` and ``tokens``, in source
order), ``allowance`` (the body's budget in Qwen tokens), ``generation`` and ``model`` (a
``messages -> reply text`` callable on a served model, None offline). Nothing here trims to the
allowance on purpose: a body that breaks it is recorded as an invalid context, as H's would be.
"""

from __future__ import annotations


class FirstLast:
    name = "firstlast"

    def __init__(self, lines: int = 1):
        if lines < 1:
            raise ValueError(f"lines must be >= 1, got {lines}")
        self.lines = lines

    def compact(self, request) -> str:
        kept = []
        for unit in request.units:
            rows = [r for r in unit.text.splitlines() if r.strip()]
            if len(rows) <= 2 * self.lines:
                kept.extend(rows)
            else:
                kept.extend([*rows[: self.lines], *rows[-self.lines :]])
        return "\n".join(kept)


def make(lines: int = 1) -> FirstLast:
    """The entry point's factory (``method.args={lines: 2}`` keeps two lines at each end)."""
    return FirstLast(lines)
