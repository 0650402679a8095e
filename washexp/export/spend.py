"""What a record's model calls spent, per role.

Each run that used calls logs them in its ``calls.json`` table (:func:`washexp.models.cost.call_row`:
the key, the role, the tokens and time its recording says the call took when it was made, live or
replayed), so a record rebuilt by strict replay still says what its protocol costs. The record
counts each recording key once, however many of its runs, arms or sweeps used it: a protocol run
over several sessions (a sweep each, resumed from the recordings) costs what one sweep would.

Runs made before the table existed have only their ``role/<role>/<what>`` metrics, where a call
is charged once per sweep (a summary shared by six arms to the first); a record with any such run
sums those metrics, so two sweeps that used the same call count it twice, and its note says
"counted once per sweep".
"""

from __future__ import annotations

import math

import pandas as pd

from washexp.export.records import Column, Table
from washexp.models.cost import CALLS_TABLE
from washexp.tracking.reader import load_table

TOKENS = ("prompt_tokens", "completion_tokens", "cached_tokens")
WHAT = ("calls", *TOKENS, "elapsed_s")
PREFIX = "metrics.role/"
HAS_CALLS = f"tags.washexp.sha256.{CALLS_TABLE}"
"""The calls table's digest tag: a run made before the table existed has none."""
ONCE = "Each recorded call counted once in the record, by its recording key, however many runs or sweeps used it"
PER_SWEEP = "Each recorded call counted once per sweep"  # the committed records' words: they re-export as they were


def role_spend(runs: pd.DataFrame, children: pd.DataFrame, uri: str) -> Table | None:
    """One row per role over ``runs`` (a record's arm or measurement runs) and ``children`` (their
    condition or store runs, which used the calls); None when no run spent (runs made before calls
    were counted per role, or no model)."""
    spent = _spent(children)
    listed = children[HAS_CALLS].notna() if HAS_CALLS in children.columns else pd.Series(False, index=children.index)
    if spent.any() and listed[spent].all():  # every run that charged a call lists its calls
        rows, how = _once(load_table(uri, CALLS_TABLE, list(children[listed]["run_id"]))), ONCE
    else:
        rows, how = _per_sweep(runs), PER_SWEEP
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
        note=f"{how}, live or replayed, with the tokens and time its "
        "recording says it took when it was made (a strict replay still reports the protocol's cost). The "
        "endpoint's cache column is what the endpoint reported; llama.cpp's prefix reuse is in the arm runs' "
        "server_prompt_tokens_reused. Model time is n/a where a recording predates timed calls.",
    )


def _spent(runs: pd.DataFrame) -> pd.Series:
    """The runs that charged a call (a ``role/<role>/calls`` metric)."""
    calls = [c for c in runs.columns if c.startswith(PREFIX) and c.endswith("/calls")]
    return runs[calls].notna().any(axis=1) if calls else pd.Series(False, index=runs.index)


def _once(calls: pd.DataFrame) -> list[dict]:
    """Per role, the calls of ``calls`` (every run's table) each counted once by key; a role's time
    is known only when every one of its calls has one."""
    distinct = calls.drop_duplicates("key")
    rows = []
    for role, mine in sorted(distinct.groupby("role"), key=lambda kv: str(kv[0])):
        row: dict = {"role": str(role), "calls": float(len(mine))}
        for what in TOKENS:
            row[what] = float(mine[what].sum())
        # fsum: the same sum in whatever order the runs come (a replay's run ids sort otherwise)
        row["elapsed_s"] = None if mine["elapsed_s"].isna().any() else math.fsum(mine["elapsed_s"])
        rows.append(row)
    return rows


def _per_sweep(runs: pd.DataFrame) -> list[dict]:
    """Per role, the ``role/<role>/<what>`` metrics of ``runs`` summed (each a sweep's charge)."""
    roles = sorted({c[len(PREFIX) :].rsplit("/", 1)[0] for c in runs.columns if c.startswith(PREFIX)})
    rows = []
    for role in roles:
        row: dict = {"role": role}
        for what in WHAT:
            column = runs.get(f"{PREFIX}{role}/{what}")
            values = [] if column is None else [float(v) for v in column if not pd.isna(v)]
            counted = runs[f"{PREFIX}{role}/calls"].notna().sum()
            # a time is known only when every run that called the role has one
            row[what] = sum(values) if values and (what != "elapsed_s" or len(values) == counted) else None
        rows.append(row)
    return rows


def _total(rows: list[dict], what: str) -> float | None:
    values = [r[what] for r in rows]
    return None if any(v is None for v in values) else sum(values)


def _int(v: float | None) -> str:
    return "n/a" if v is None else f"{v:,.0f}"
