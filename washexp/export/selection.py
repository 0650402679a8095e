"""Which runs a record covers: the rules both families' record builders share.

- ``--model``, ``--sweep`` and ``--date`` filter the *parent* runs (compaction arms, wash
  measurements); a parent's children are the runs it planned, found through it.
- A parent's children are the runs under it: those it computed and the *link* runs it left for
  the finished runs it reused (``Tracker.link``). A link stands for its target: the row a record
  reads is the target's (its metrics, tables and artifacts), listed under the linking parent. A
  reused run is never moved, so each parent keeps exactly what its sweep planned.
- Per key (an arm's model, method, top-N, phase; a measurement's washer, gauge...) the newest
  FINISHED parent wins, among those that planned every child the chosen parents planned (so a
  later one-cell run of an arm does not stand in for the sweep's whole arm; ``--sweep`` picks it).
- A sweep covers the parents it reused whole from another sweep: it left a top-level link run
  naming each (``Tracker.link`` with no parent), so ``--sweep`` selects the linked parent as its
  own, with ``reused_from`` (the sweep that made it) and ``reused_by`` (the sweep that linked it),
  and a record's notes say so. A link to a run the store lacks is an error, never a smaller record.
- A failed child counts 0 (:func:`score`): it stays in the denominator.
"""

from __future__ import annotations

from collections.abc import Hashable

import pandas as pd

from washexp.errors import WashexpError
from washexp.tracking.kinds import KIND_TAG, Kind
from washexp.tracking.reader import ROWS
from washexp.tracking.runs import LINK_TAG, PARENT_TAG


def tag(frame: pd.DataFrame, name: str) -> pd.Series:
    """``tags.<name>``, or an all-None column when no run has that tag."""
    col = f"tags.{name}"
    return frame[col] if col in frame.columns else pd.Series(None, index=frame.index, dtype=object)


def value(row: pd.Series, name: str) -> float | None:
    """One run's metric as a float, None when absent (never 0)."""
    v = row.get(f"metrics.{name}")
    return None if v is None or pd.isna(v) else float(v)


def score(row: pd.Series, name: str) -> float | None:
    """A child's metric as a record counts it: 0 for a failed run (it stays in the denominator),
    else its value (None when not measured)."""
    return 0.0 if row["status"] == "FAILED" else value(row, name)


def in_sweeps(sweep: pd.Series, sweeps: tuple[str, ...]) -> pd.Series:
    """Whether each run's ``sweep`` tag is one of ``sweeps``, given whole or by its tail
    (``2026-11-30/10-31-23`` for ``multirun/2026-11-30/10-31-23``)."""
    return sweep.map(lambda s: isinstance(s, str) and any(s == w or s.endswith("/" + w) for w in sweeps))


def parents(
    runs: pd.DataFrame,
    kind: str,
    *,
    model: str | None = None,
    sweeps: tuple[str, ...] = (),
    until: str | None = None,
) -> pd.DataFrame:
    """The parent runs of ``kind`` after the filters, newest first (every status). With ``sweeps``,
    also the parents those sweeps reused whole (see the module doc); ``reused_from`` and
    ``reused_by`` are None on a sweep's own runs."""
    out = runs[tag(runs, KIND_TAG) == kind].assign(reused_from=None, reused_by=None)
    if sweeps:
        out = out[in_sweeps(tag(out, "sweep"), sweeps).astype(bool)]  # bool: an empty mask selects rows, not columns
        out = pd.concat([out, reused(runs, kind, sweeps)]).drop_duplicates("run_id", keep="first")
    if model is not None:
        out = out[tag(out, "model") == model]
    if until is not None:
        out = out[out["start_time"].dt.strftime("%Y-%m-%d") <= until]
    ROWS.update(out["run_id"])  # what a record chose among is what its bundle must hold
    return out.sort_values("start_time", ascending=False, kind="stable").copy()


def reused(runs: pd.DataFrame, kind: str, sweeps: tuple[str, ...]) -> pd.DataFrame:
    """The parents of ``kind`` that ``sweeps`` reused whole from other sweeps: the targets of their
    top-level link runs, each with ``reused_from`` (its own sweep) and ``reused_by``."""
    links = runs[
        (tag(runs, KIND_TAG) == Kind.LINK)
        & tag(runs, PARENT_TAG).isna()
        & in_sweeps(tag(runs, "sweep"), sweeps).astype(bool)
    ]
    ids = tag(links, LINK_TAG).tolist()
    missing = sorted({str(i) for i in ids} - set(runs["run_id"]))
    if missing:
        raise WashexpError(f"link run(s) name runs this experiment lacks: {', '.join(missing)}")
    targets = runs.set_index("run_id", drop=False).loc[ids].reset_index(drop=True)
    targets = targets.assign(reused_from=tag(targets, "sweep").tolist(), reused_by=tag(links, "sweep").tolist())
    return targets[tag(targets, KIND_TAG) == kind]


def children(runs: pd.DataFrame, parent_ids, kinds: tuple[str, ...]) -> pd.DataFrame:
    """The children of ``parent_ids``: their own runs of ``kinds`` and the targets of their link
    runs, each row with ``parent`` (the parent it is listed under), newest first."""
    under = runs[tag(runs, PARENT_TAG).isin(list(parent_ids))]
    own = under[tag(under, KIND_TAG).isin(kinds)].assign(parent=lambda f: tag(f, PARENT_TAG))
    links = under[tag(under, KIND_TAG) == Kind.LINK]
    targets = runs[tag(runs, KIND_TAG).isin(kinds)].set_index("run_id", drop=False)
    linked = targets.reindex(tag(links, LINK_TAG).tolist()).dropna(subset=["run_id"])
    if len(linked) != len(links):
        missing = sorted(set(tag(links, LINK_TAG)) - set(targets.index))
        raise WashexpError(f"link run(s) name runs this experiment lacks: {', '.join(missing)}")
    linked = linked.assign(parent=tag(links, PARENT_TAG).tolist()).reset_index(drop=True)
    ROWS.update(under["run_id"], linked["run_id"])
    both = pd.concat([own, linked], ignore_index=True) if len(linked) else own.reset_index(drop=True)
    return both.sort_values("start_time", ascending=False, kind="stable")


def newest_complete(
    candidates: pd.DataFrame, kids: pd.DataFrame, keys: list[str], child: str
) -> tuple[pd.DataFrame, list[str]]:
    """Per ``keys`` the newest FINISHED parent among ``candidates`` (newest first) that planned
    every ``child`` (a column of ``kids``, e.g. the task) the newest finished ones planned; a key
    whose newest parent is unfinished is left out and named. Returns the chosen rows and notes."""
    planned = {p: frozenset(g[child]) for p, g in kids.groupby("parent")}
    notes, newest = [], []
    groups = list(candidates.groupby(keys, sort=True, dropna=False))
    for _, group in groups:
        first = group.iloc[0]
        if first["status"] != "FINISHED":
            why = ", stopped on budget (endpoint.budget_usd)" if first.get("tags.stopped") == "budget" else ""
            notes.append(f"{_key(first, keys)}: newest run {first['run_id']} is {first['status']}{why}, left out")
            continue
        newest.append(group)
    everything = frozenset().union(*(planned.get(g.iloc[0]["run_id"], frozenset()) for g in newest))
    chosen = []
    for group in newest:
        finished = group[group["status"] == "FINISHED"]
        whole = [i for i, r in enumerate(finished["run_id"]) if planned.get(r, frozenset()) >= everything]
        pick = finished.iloc[whole[0] if whole else 0]
        if whole and whole[0] > 0:
            notes.append(
                f"{_key(pick, keys)}: newer runs planned fewer {child}s than the record covers "
                f"(e.g. {finished.iloc[0]['run_id']}); run {pick['run_id']} is the newest that planned them all "
                "(export --sweep shows a smaller run's own record)"
            )
        if isinstance(pick.get("reused_by"), str):
            notes.append(
                f"{_key(pick, keys)}: reused from sweep {pick['reused_from']}, which finished it"
                f" (run {pick['run_id']}); sweep {pick['reused_by']} links it"
            )
        chosen.append(pick)
    return (pd.DataFrame(chosen) if chosen else candidates.iloc[0:0]), notes


def newest_complete_per_model(
    candidates: pd.DataFrame, kids: pd.DataFrame, keys: list[str], child: str
) -> tuple[pd.DataFrame, dict[Hashable, list[str]]]:
    """:func:`newest_complete` within each model's parents: a record is one model's, so what it
    covers, and the runs its notes say were left out, are that model's alone (another model's
    FAILED sweep is no note of this one's). Notes by model."""
    chosen: list[pd.DataFrame] = []
    notes: dict[Hashable, list[str]] = {}
    for model, group in candidates.groupby("model", sort=True, dropna=False):
        picked, said = newest_complete(group, kids, keys, child)
        chosen.append(picked)
        notes[model] = said
    return (pd.concat(chosen) if chosen else candidates.iloc[0:0]), notes


def _key(row: pd.Series, keys: list[str]) -> str:
    return " ".join(str(row[k]) for k in keys)


def sweeps(sweep_ids: pd.Series, overrides: pd.Series) -> dict[str, str]:
    """sweep id -> the overrides of its covered jobs (``; ``-joined, sorted), as both records list them."""
    out: dict[str, set[str]] = {}
    for sweep, job in zip(sweep_ids, overrides, strict=True):
        out.setdefault(str(sweep), set()).add(str(job))
    return {sweep: "; ".join(sorted(o)) for sweep, o in sorted(out.items())}
