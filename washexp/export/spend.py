"""What a record's model calls spent, per role: its runs' ``role/<role>/<what>`` metrics summed.

A run's charge (``washexp.models.cost.RoleSpend``) counts each recorded call once, live or
replayed, with the tokens and time its recording says it took when it was made, so a record rebuilt
by strict replay still says what its protocol costs. Each call is counted once per sweep (a summary
shared by six arms is charged to the first); two sweeps that replay the same call count it twice.
"""

from __future__ import annotations

import pandas as pd

from washexp.export.records import Column, Table

WHAT = ("calls", "prompt_tokens", "completion_tokens", "cached_tokens", "elapsed_s")


def role_spend(runs: pd.DataFrame) -> Table | None:
    """One row per role over ``runs`` (a record's arm or measurement runs); None when no run spent
    (a record of runs made before calls were counted per role, or with no model)."""
    prefix = "metrics.role/"
    roles = sorted({c[len(prefix) :].rsplit("/", 1)[0] for c in runs.columns if c.startswith(prefix)})
    rows = []
    for role in roles:
        row: dict = {"role": role}
        for what in WHAT:
            column = runs.get(f"{prefix}{role}/{what}")
            values = [] if column is None else [float(v) for v in column if not pd.isna(v)]
            counted = runs[f"{prefix}{role}/calls"].notna().sum()
            # a time is known only when every run that called the role has one
            row[what] = sum(values) if values and (what != "elapsed_s" or len(values) == counted) else None
        rows.append(row)
    if not rows:
        return None
    rows.append({"role": "all", **{w: _total(rows, w) for w in WHAT}})
    return Table(
        "spend",
        "What the model calls spent, per role",
        (
            Column("role", "role"),
            Column("calls", "calls", lambda r: _int(r["calls"])),
            Column("prompt_tokens", "prompt tokens", lambda r: _int(r["prompt_tokens"])),
            Column("completion_tokens", "generated tokens", lambda r: _int(r["completion_tokens"])),
            Column("cached_tokens", "prompt tokens from the endpoint's cache", lambda r: _int(r["cached_tokens"])),
            Column(
                "elapsed_s",
                "model time (min)",
                lambda r: "n/a" if r["elapsed_s"] is None else f"{r['elapsed_s'] / 60:.1f}",
            ),
        ),
        tuple(rows),
        note="Each recorded call counted once per sweep, live or replayed, with the tokens and time its "
        "recording says it took when it was made (a strict replay still reports the protocol's cost). The "
        "endpoint's cache column is what the endpoint reported; llama.cpp's prefix reuse is in the arm runs' "
        "server_prompt_tokens_reused. Model time is n/a where a recording predates timed calls.",
    )


def _total(rows: list[dict], what: str) -> float | None:
    values = [r[what] for r in rows]
    return None if any(v is None for v in values) else sum(values)


def _int(v: float | None) -> str:
    return "n/a" if v is None else f"{v:,.0f}"
