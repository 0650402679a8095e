"""The cycles record (``measurement=cycles``): a survival curve per arm, one per k and cohort.

Read from each finished cycles condition's own ``cycles.json`` (one row per fact and cycle,
:mod:`washexp.compaction.cycles`): after cycle c, a condition's survival is the fraction of the
facts seen so far (every needle appended) that its context keeps; an arm's value is the mean over
its tasks that have a seen fact (tasks weigh equally, as in every other score). Each condition's
last cycle must agree with what its run logged (``survival_last``): a mismatch is an error, never a
table over other numbers. A failed condition has no table: it is counted apart.
"""

from __future__ import annotations

import math
from collections.abc import Hashable

import pandas as pd

from washexp.compaction.cycles import TABLE
from washexp.compaction.records import decisions as record_decisions
from washexp.compaction.records.runs import labelled, provenance_head
from washexp.errors import WashexpError
from washexp.export import plots, selection
from washexp.export.records import Column, Plot, Record, Table
from washexp.export.run_facts import run_facts
from washexp.tracking.kinds import KIND_TAG, CyclesCell, Kind
from washexp.tracking.reader import load_table

COHORTS = ("primary", "control")
REFERENCE = (
    "Offline reference backend: a labelled deterministic baseline (extractive S and H, BM25 ranking, no "
    "reader), not a model result. Its survival says which facts a method keeps mechanically when it "
    "compacts again and again; nothing was answered."
)


def has_cycles(runs: pd.DataFrame) -> bool:
    return bool((selection.tag(runs, KIND_TAG) == Kind.CYCLES).any())


def records(runs: pd.DataFrame, options) -> list[Record]:
    """``measurement=cycles``'s records (:mod:`washexp.measurements`): none without a cycles run."""
    return build(runs, options) if has_cycles(runs) else []


def build(runs: pd.DataFrame, options) -> list[Record]:
    """One cycles record per model, or none when the runs hold no cycles parent."""
    parents = selection.parents(runs, Kind.CYCLES, model=options.model, sweeps=options.sweeps, until=options.date)
    if parents.empty:
        return []
    parents = labelled(parents)
    kids = selection.children(runs, parents["run_id"], (Kind.CYCLES_CELL,))
    cells = [CyclesCell.from_row(row) for _, row in kids.iterrows()]
    kids = kids.assign(
        task=[c.task for c in cells],
        cohort=[c.cohort for c in cells],
        k=[c.k for c in cells],
        cell=[c.cell for c in cells],
    )
    chosen, notes = selection.newest_complete_per_model(parents, kids, ["model", "label", "phase"], "cell")
    if chosen.empty:
        return []
    out = []
    for model, arms in chosen.groupby("model", sort=True):
        arms = arms.sort_values("order", kind="stable")
        conds = kids[kids["parent"].isin(arms["run_id"])].drop_duplicates(["parent", "task", "k"])
        out.append(_record(arms, conds, notes.get(model, []), options))
    return out


def _record(arms: pd.DataFrame, conds: pd.DataFrame, left_out: list[str], options) -> Record:
    first = arms.iloc[0]
    model, platform = first["model"], first["params.platform"]
    reference = first["params.backend"] == "reference"
    finished = conds[conds["status"] == "FINISHED"]
    table = load_table(options.uri, TABLE, list(finished["run_id"])) if len(finished) else pd.DataFrame()
    rows_of = {run: rows for run, rows in table.groupby("run_id")} if len(table) else {}
    times = pd.concat([arms["end_time"], conds["end_time"], arms["start_time"]]).dropna()
    date = times.max().tz_convert("UTC").strftime("%Y-%m-%d")
    kmax = int(conds["k"].max())
    curves: dict[str, dict[str, dict[int, list[list[float | None]]]]] = {}
    """arm -> cohort -> k -> each task's survival after each cycle."""
    tables = []
    for _, arm in arms.iterrows():
        mine = conds[conds["parent"] == arm["run_id"]]
        rows = []
        for cohort in COHORTS:
            for k, group in mine[mine["cohort"] == cohort].groupby("k", sort=True):
                per_task = [_condition(c, rows_of[c["run_id"]]) for _, c in group.iterrows() if c["run_id"] in rows_of]
                curve = [_mean([t[c] for t in per_task]) for c in range(int(k))]
                curves.setdefault(arm["label"], {}).setdefault(cohort, {})[int(k)] = per_task
                facts = int(sum(len(rows_of[r]) for r in group["run_id"] if r in rows_of) // int(k))
                rows.append(
                    {
                        "cohort": cohort,
                        "k": int(k),
                        "tasks": len(per_task),
                        "failed": int((group["status"] == "FAILED").sum()),
                        "facts": facts,
                        **{f"cycle{c + 1}": curve[c] if c < len(curve) else None for c in range(kmax)},
                        "last": curve[-1] if curve else None,
                    }
                )
        columns = (
            Column("cohort", "cohort"),
            Column("k", "k (segments)"),
            Column("tasks", "tasks"),
            Column("failed", "failed"),
            Column("facts", "graded facts"),
            *(Column(f"cycle{c}", f"after cycle {c}", _fraction(f"cycle{c}")) for c in range(1, kmax + 1)),
            Column("last", "after the last cycle", _fraction("last")),
        )
        key = "survival_" + "".join(ch if ch.isalnum() else "_" for ch in arm["label"].lower()).strip("_")
        tables.append(
            Table(
                key,
                f"Survival curve: {arm['label']}",
                columns,
                tuple(rows),
                note="Fraction of the facts seen so far (every needle appended in the segments up to this cycle) "
                "that the context after this cycle still holds, each task's fraction, tasks weighted equally. "
                "A blank cell: no such cycle (it is past k) or no fact seen yet.",
            )
        )
    notes = [REFERENCE if reference else f"Model {model} (tier {first['params.tier']}, platform {platform})."]
    notes += [
        "Each trajectory is split into k segments of whole turns (split rule: "
        f"{', '.join(sorted(set(arms['tags.split'].dropna())))}); cycle 1 compacts segment 1, cycle i compacts "
        "the context cycle i-1 left plus segment i. Read a row left to right: what repeated compaction keeps of "
        "what was seen; read the last column down (k): what more, smaller compactions cost by the end of the "
        "same trajectory (cycle c of another k is another point of it).",
        "A fact whose evidence has not all been appended yet is not yet seen: it enters the count at the first "
        "cycle after which every needle of it has appeared, and is never counted as lost before.",
        "Full keeps every seen fact at every cycle by construction (its context is everything appended). S, H "
        "and the baselines guarantee no monotone curve: a fact dropped at one cycle comes back when a later "
        "segment holds its evidence again (a model may also guess it back), and a later cycle may count more "
        "facts.",
        "The chain uses generation 0 of each part; a cycle with no context (an invalid H, a failed part) ends "
        "its chain: it and every later cycle keep nothing.",
        *_short(arms, conds),
        *left_out,
    ]
    provenance = {
        **provenance_head(arms, date, options.experiment),
        "measurement": "cycles",
        "k": sorted(int(k) for k in set(conds["k"])),
        "sweeps (overrides)": selection.sweeps(arms["sweep"], arms["overrides"]),
        **run_facts(arms),
    }
    stem = f"compaction-{platform}-cycles-{date}"
    lines, bands, tasks = _plotted(curves)
    plot = Plot(
        f"{stem}-survival.png",
        "survival after each cycle, one panel per arm, one line per k (primary cohort; control where no primary); "
        "bands: each cycle's 95% sign-flip interval over the line's tasks, the headline table's rule (the whole "
        "range with 5 tasks or fewer)",
        plots.survival_curves(lines, "Facts surviving repeated compaction, by cycle", bands, tasks),
    )
    appendix = Table(
        "runs",
        f"MLflow run ids behind every number ({len(arms) + len(conds)} runs)",
        tuple(Column(c, c) for c in ("arm", "task", "k", "status", "run_id")),
        tuple(
            [
                {"arm": a["label"], "task": "(arm)", "k": None, "status": a["status"], "run_id": a["run_id"]}
                for _, a in arms.iterrows()
            ]
            + [
                {
                    "arm": _label(arms, c["parent"]),
                    "task": c["task"],
                    "k": int(c["k"]),
                    "status": c["status"],
                    "run_id": c["run_id"],
                }
                for _, c in conds.sort_values(["task", "k"], kind="stable").iterrows()
            ]
        ),
    )
    data = _compare_data(arms, conds, rows_of)
    decided = record_decisions.table(
        record_decisions.cycles_decisions(data["cycles_tasks"]),
        note=record_decisions.NOTE + " Here A and B are one arm at k and at k=1 (last-cycle survival, "
        "data.cycles_tasks); valid-only keeps the conditions that did not fail.",
    )
    return Record(
        data=data,
        topic="compaction",
        platform=f"{platform}-cycles",
        date=date,
        title=f"Compaction again and again (cycles): {model} ({platform}), {date}",
        provenance=provenance,
        notes=tuple(notes),
        tables=(decided, *tables),
        plots=(plot,),
        appendix=(appendix,),
    )


def _compare_data(arms: pd.DataFrame, conds: pd.DataFrame, rows_of: dict) -> dict[str, list]:
    """What ``washexp compare`` reads (:mod:`washexp.compaction.records.compare_cycles`): each
    condition's last-cycle survival (``cycles_tasks``) and each fact's last-cycle kept
    (``cycles_facts``: the facts seen by then; a failed condition has none)."""
    tasks, facts = [], []
    for _, c in conds.iterrows():
        arm, k = _label(arms, c["parent"]), int(c["k"])
        rows = rows_of.get(c["run_id"])
        last = None
        if rows is not None:
            final = rows[(rows["cycle"] == rows["cycle"].max()) & rows["seen"].astype(bool)]
            facts += [
                {"arm": arm, "task": c["task"], "k": k, "field": str(f["field"]), "kept": bool(f["kept"])}
                for _, f in final.iterrows()
            ]
            last = _condition(c, rows)[-1]
        failed = c["status"] == "FAILED"  # as the table counts; a run neither FINISHED nor FAILED has no cells
        tasks.append({"arm": arm, "cohort": c["cohort"], "task": c["task"], "k": k, "failed": failed, "survival": last})
    # in an order of their own, not the store's (runs of one task and k come back in any order)
    tasks.sort(key=lambda t: (t["task"], t["k"], t["arm"]))
    facts.sort(key=lambda f: (f["task"], f["k"], f["arm"], f["field"]))
    return {"cycles_tasks": tasks, "cycles_facts": facts}


def _short(arms: pd.DataFrame, conds: pd.DataFrame) -> list[str]:
    """Which k leave tasks out: a task with fewer turns than k has no k-segment split."""
    tasks = int(arms["params.tasks"].astype(int).max())
    counts = conds.groupby("k")["task"].nunique()
    short = {int(str(k)): tasks - int(n) for k, n in counts.items() if n < tasks}
    if not short:
        return []
    said = ", ".join(f"k={k}: {n}" for k, n in sorted(short.items()))
    return [
        f"Of the {tasks} tasks, those with fewer turns than k have no k-segment split and are left out of that k "
        f"({said} left out); each table's tasks column counts the tasks behind a row."
    ]


def _condition(c: pd.Series, rows: pd.DataFrame) -> list[float | None]:
    """One condition's survival after each cycle, its last checked against its logged metric."""
    out: list[float | None] = []
    for _, cyc in rows.groupby("cycle", sort=True):
        seen = cyc[cyc["seen"].astype(bool)]
        out.append(float(seen["kept"].astype(bool).mean()) if len(seen) else None)
    logged = c.get("metrics.survival_last")
    if out and out[-1] is not None and (logged is None or pd.isna(logged) or not math.isclose(logged, out[-1])):
        raise WashexpError(
            f"run {c['run_id']} ({c['task']}, k={c['k']}): its {TABLE} gives survival {out[-1]:.6f}, "
            f"its metric survival_last {logged}"
        )
    return out


def _mean(values: list[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return sum(got) / len(got) if got else None


def _fraction(key: str):
    return lambda r: "" if r[key] is None else f"{r[key]:.3f}"


def _plotted(curves: dict[str, dict[str, dict[int, list[list[float | None]]]]]):
    """Per arm (its primary cohort, else its control one) and k: the curve, its band (each cycle's
    interval over the tasks with a seen fact, ``records.decisions.mean_interval``) and its tasks,
    as :func:`~washexp.export.plots.survival_curves` takes them."""
    lines: dict[str, dict[int, list]] = {}
    bands: dict[str, dict[int, list]] = {}
    tasks: dict[str, dict[int, int]] = {}
    for label, by_cohort in curves.items():
        cohort = "primary" if "primary" in by_cohort else next(iter(by_cohort))
        lines[label], bands[label], tasks[label] = {}, {}, {}
        for k, per_task in by_cohort[cohort].items():
            at = [[v for t in per_task if (v := t[c]) is not None] for c in range(k)]
            lines[label][k] = [(c + 1, sum(v) / len(v)) for c, v in enumerate(at) if v]
            shown = [(c + 1, record_decisions.mean_interval(v)) for c, v in enumerate(at)]
            bands[label][k] = [(c, iv[0], iv[1]) for c, iv in shown if iv is not None]
            tasks[label][k] = len(per_task)
    return lines, bands, tasks


def _label(arms: pd.DataFrame, run_id: Hashable) -> str:
    return str(arms.loc[arms["run_id"] == run_id, "label"].iloc[0])
