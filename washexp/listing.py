"""``washexp runs``: the recent sweeps in a store, one line each, so a sweep id never has to be
dug out of SQLite or an ``outputs/`` folder.

A sweep is the set of runs that carry its ``sweep`` tag (what ``export --sweep`` and ``compare``
take). Its *arms* are its top-level runs (compaction arms, wash measurements), its units the
runs under them (conditions, stores). An arm it reused whole from another sweep is its arm too,
counted with its units in both sweeps and said (``reused 4 arms from <sweep>``): the sweep left a
top-level link run naming it (:mod:`washexp.export.selection` follows the same links). A compaction
sweep's decisions run (:mod:`washexp.compaction.sweep_decisions`) is neither.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import pandas as pd

from washexp.engine.ledger import plural
from washexp.tracking.kinds import KIND_TAG, TOP_KINDS, Kind
from washexp.tracking.runs import LINK_TAG, PARENT_TAG


@dataclass(frozen=True)
class SweepRow:
    sweep: str
    experiment: str
    started: datetime
    """The first of its runs to start (UTC)."""
    arms: int
    units: int
    status: dict[str, int]
    """Run status -> how many of the sweep's runs (arms and units) have it."""
    overrides: str
    """The values each key took over the sweep's arms, as ``key=a,b``."""
    reused: dict[str, int]
    """Sweep id -> how many of this sweep's arms it made and this sweep reused whole."""


def merged_overrides(per_arm: list[str]) -> str:
    """``["method=S,compaction.topn=0", "method=H,compaction.topn=1"]`` ->
    ``method=S,H compaction.topn=0,1`` (Hydra's ``override_dirname`` joins with ``,``)."""
    values: dict[str, list[str]] = {}
    for text in per_arm:
        for item in _items(text) if text != "(defaults)" else []:
            key, _, value = item.partition("=")
            values.setdefault(key, [])
            if value not in values[key]:
                values[key].append(value)
    return " ".join(f"{k}={','.join(v)}" for k, v in values.items()) or "(defaults)"


def _items(text: str) -> list[str]:
    """One arm's ``key=value,key=value``, split at the commas between items only: a list or a
    mapping value (``task=[a,b]``, ``{k:v,...}``) and an escaped comma (``\\,``) stay whole."""
    items, depth, start, i = [], 0, 0, 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2  # an escaped character, never a separator
            continue
        if c in "[{(":
            depth += 1
        elif c in "]})":
            depth = max(0, depth - 1)
        elif c == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
        i += 1
    items.append(text[start:])
    return [item for item in items if item]


def sweep_rows(runs, experiment: str) -> list[SweepRow]:
    """One row per sweep of ``runs`` (a ``tracking.reader.search`` frame), newest first."""
    if runs is None or runs.empty or "tags.sweep" not in runs.columns:
        return []
    from washexp.export.selection import tag

    kinds, parent = tag(runs, KIND_TAG), tag(runs, PARENT_TAG)
    linking = (kinds == Kind.LINK) & parent.isna()  # an arm reused whole: not a unit of its own
    aside = kinds == Kind.DECISIONS  # the sweep's decisions: neither an arm nor a unit
    by_id = runs.set_index("run_id", drop=False)
    rows = []
    for sweep, group in runs[runs["tags.sweep"].notna()].groupby("tags.sweep"):
        links = group[linking[group.index]]
        own = group[~(linking | aside)[group.index]]
        top = own[tag(own, KIND_TAG).isin(TOP_KINDS)]
        targets = by_id.reindex(list(dict.fromkeys(tag(links, LINK_TAG)))).dropna(subset=["run_id"])
        targets = targets[~targets["run_id"].isin(top["run_id"])]
        under = runs[parent.isin(targets["run_id"])]
        overrides = [*tag(top, "washexp.overrides").dropna(), *tag(links, "washexp.overrides").dropna()]
        covered = pd.concat([own, targets, under])
        rows.append(
            SweepRow(
                sweep=str(sweep),
                experiment=experiment,
                started=group["start_time"].min().to_pydatetime(),
                arms=len(top) + len(targets),
                units=len(covered) - len(top) - len(targets),
                status=covered["status"].value_counts().to_dict(),
                overrides=merged_overrides(sorted(overrides)),
                reused={str(s): int(n) for s, n in tag(targets, "sweep").fillna("(no sweep)").value_counts().items()},
            )
        )
    return sorted(rows, key=lambda r: r.started, reverse=True)


HEADER = ("sweep", "experiment", "started (UTC)", "arms", "under", "status", "overrides")
NUMBERS = (3, 4)
"""The columns aligned to the right."""


def render(rows: list[SweepRow]) -> list[str]:
    """The header and one line per sweep, each column as wide as its widest cell (a long sweep id
    or a mixed status moves the columns after it, header included); the overrides come last."""
    if not rows:
        return ["no sweeps recorded yet (python run.py ... records one)"]
    table = [HEADER] + [
        (
            r.sweep,
            r.experiment,
            r.started.strftime("%Y-%m-%d %H:%M"),
            str(r.arms),
            str(r.units),
            " ".join(f"{n} {s}" for s, n in sorted(r.status.items()))
            + "".join(f" · reused {plural(n, 'arm')} from {s}" for s, n in sorted(r.reused.items())),
            r.overrides,
        )
        for r in rows
    ]
    widths = [max(len(line[i]) for line in table) for i in range(len(HEADER) - 1)]

    def cells(line: tuple[str, ...]) -> list[str]:  # the last column unpadded: it ends the line
        pairs = enumerate(zip(line[:-1], widths, strict=True))
        return [*(c.rjust(w) if i in NUMBERS else c.ljust(w) for i, (c, w) in pairs), line[-1]]

    return ["  ".join(cells(line)).rstrip() for line in table]
