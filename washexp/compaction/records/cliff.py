"""The cliff record (``measurement=cliff``): per method, its score against the compaction budget
and against trajectory length beside Full's, and where it falls under half of Full's.

Read from each finished cliff condition's own metrics (the method's ``retention`` and Full's
``full_retention`` on the same task; ``fact_accuracy`` too with a reader). The crossing and its
interval (:func:`crossing`):

Each grid point's per-task value is ``d = score - FULL_SHARE * Full's score`` on the same task;
the point is *under* when ``mean(d) < 0`` (beyond float noise: exactly half is not under). Ordered
from the gentle end of an axis (the largest budget, the shortest length) to the harsh end, the
crossing is the first point under; its interval, on the grid, runs from the last gentler point
whose ``d`` interval (the records' own sign-flip interval, :func:`washexp.export.decide.interval`)
lies wholly above 0 to the first point from the crossing on whose interval lies wholly below 0.
No point under: the method never crosses within the grid, said as such and never extrapolated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from washexp.compaction.records.runs import ARM_COLUMNS, provenance_head
from washexp.export import decide, plots, selection
from washexp.export.records import Column, Plot, Record, Table
from washexp.export.run_facts import run_facts
from washexp.tracking.kinds import KIND_TAG, CliffCell, Kind

KIND, CHILD = Kind.CLIFF, Kind.CLIFF_CELL
SCORES = ("retention", "fact_accuracy")
AXES = ("budget", "length")
UNITS = {"budget": "tokens of budget", "length": "tokens of trajectory"}
REFERENCE = (
    "Offline reference backend: a labelled deterministic baseline (extractive S and H, no reader), not a "
    "model result. Its retention says where a method drops facts mechanically as the budget shrinks or the "
    "trajectory grows; nothing was answered."
)


FULL_SHARE = 0.5
"""The cliff's edge: a score under this share of Full's."""
TIE = 1e-9
"""Float noise: a mean of d (or an end of its interval) within it of 0 is 0: exactly half of Full's."""


@dataclass(frozen=True)
class Point:
    """One grid point of one axis: its value and the per-task ``d`` (see the module docstring)."""

    x: int
    d: tuple[float, ...]

    @property
    def mean(self) -> float:
        return sum(self.d) / len(self.d)

    @property
    def interval(self) -> tuple[float, float]:
        return decide.interval(list(self.d))

    @property
    def under(self) -> bool:
        return self.mean < -TIE


@dataclass(frozen=True)
class Crossing:
    """Where an axis's points, gentle to harsh, first fall under (None: never within the grid)."""

    at: int | None
    sure_over: int | None
    """The last point before ``at`` whose interval lies wholly above 0 (None: none is sure)."""
    sure_under: int | None
    """The first point from ``at`` on whose interval lies wholly below 0 (None: none is sure)."""

    gentlest: bool = False
    """The crossing is the grid's gentle end: under already at every point measured."""

    def describe(self, unit: str) -> str:
        if self.at is None:
            return "never crosses within the grid"
        if self.gentlest:
            return f"under already at the grid's gentle end, {self.at} {unit} (the crossing lies outside the grid)"
        over = "no gentler point surely above" if self.sure_over is None else f"surely above at {self.sure_over}"
        under = "no point surely under" if self.sure_under is None else f"surely under at {self.sure_under}"
        return f"{self.at} {unit} ({over}; {under})"


def crossing(points: Sequence[Point]) -> Crossing:
    """The crossing of ``points`` ordered from the gentle end to the harsh end of an axis."""
    first = next((i for i, p in enumerate(points) if p.under), None)
    if first is None:
        return Crossing(None, None, None)
    over = [p.x for p in points[:first] if p.interval[0] > TIE]  # a closed interval ending at 0 holds 0
    under = [p.x for p in points[first:] if p.interval[1] < -TIE]
    return Crossing(points[first].x, over[-1] if over else None, under[0] if under else None, first == 0)


def records(runs: pd.DataFrame, options) -> list[Record]:
    """``measurement=cliff``'s records (:mod:`washexp.measurements`): none without a cliff run."""
    return build(runs, options) if has_cliff(runs) else []


def has_cliff(runs: pd.DataFrame) -> bool:
    return bool((selection.tag(runs, KIND_TAG) == KIND).any())


def build(runs: pd.DataFrame, options) -> list[Record]:
    """One cliff record per model, or none when the runs hold no cliff parent."""
    parents = selection.parents(runs, KIND, model=options.model, sweeps=options.sweeps, until=options.date)
    if parents.empty:
        return []
    parents = parents.rename(columns=ARM_COLUMNS)
    kids = selection.children(runs, parents["run_id"], (CHILD,))
    kids = kids.assign(
        task=selection.tag(kids, "task"),
        length=[CliffCell.parse("length", v) for v in selection.tag(kids, "length")],
        budget=[CliffCell.parse("budget", v) for v in selection.tag(kids, "budget")],
    )
    kids = kids.assign(cell=lambda f: "L" + f["length"].astype(str) + "/B" + f["budget"].astype(str) + "/" + f["task"])
    chosen, notes = selection.newest_complete_per_model(parents, kids, ["model", "method"], "cell")
    if chosen.empty:
        return []
    out = []
    for model, arms in chosen.groupby("model", sort=True):
        arms = arms.sort_values("method", key=lambda s: s.map(_order), kind="stable")
        conds = kids[kids["parent"].isin(arms["run_id"])].drop_duplicates(["parent", "cell"])
        out.append(_record(arms, conds, notes.get(model, []), options))
    return out


def _order(method: str) -> int:
    return ("S", "H", "mask").index(method) if method in ("S", "H", "mask") else 3


def condition_rows(arms: pd.DataFrame, conds: pd.DataFrame) -> list[dict]:
    """One row per condition: the method's scores and Full's on the task (None: not measured)."""
    method_of = dict(zip(arms["run_id"], arms["method"], strict=True))
    rows = []
    for _, c in conds.iterrows():
        row = {
            "method": method_of[c["parent"]],
            "task": c["task"],
            "length": int(c["length"]),
            "budget": int(c["budget"]),
            "failed": c["status"] != "FINISHED",
        }
        for score in SCORES:
            for key in (score, f"full_{score}"):
                v = c.get(f"metrics.{key}")
                row[key] = None if v is None or pd.isna(v) else float(v)
        rows.append(row)
    rows.sort(key=lambda r: (_order(r["method"]), r["length"], r["budget"], r["task"]))
    return rows


def axis_points(rows: list[dict], method: str, score: str, axis: str, grid: dict[str, int]) -> list[Point]:
    """The ``axis`` points of ``method`` on ``score``, gentle end first (the largest budget, the
    shortest length); a point holds the tasks where both the method's and Full's score exist."""
    fixed, free = ("length", "budget") if axis == "budget" else ("budget", "length")
    at = grid["budget_length"] if axis == "budget" else grid["length_budget"]
    mine = [r for r in rows if r["method"] == method and r[fixed] == at]
    xs = sorted({r[free] for r in mine}, reverse=axis == "budget")
    points = []
    for x in xs:
        d = [
            r[score] - FULL_SHARE * r[f"full_{score}"]
            for r in mine
            if r[free] == x and r[score] is not None and r[f"full_{score}"] is not None
        ]
        if d:
            points.append(Point(x, tuple(d)))
    return points


def _record(arms: pd.DataFrame, conds: pd.DataFrame, left_out: list[str], options) -> Record:
    first = arms.iloc[0]
    model, platform = first["model"], first["params.platform"]
    reference = first["params.backend"] == "reference"
    times = pd.concat([arms["end_time"], conds["end_time"], arms["start_time"]]).dropna()
    date = times.max().tz_convert("UTC").strftime("%Y-%m-%d")
    grid = {k: int(first[f"params.{k}"]) for k in ("budget_length", "length_budget", "seed", "tasks")}
    rows = condition_rows(arms, conds)
    scores = [s for s in SCORES if any(r[s] is not None for r in rows)]
    methods = list(arms["method"])
    crossings, tables, curves = [], [], {}
    for score in scores:
        for axis in AXES:
            by_method = {m: axis_points(rows, m, score, axis, grid) for m in methods}
            curves[(score, axis)] = by_method
            for m in methods:
                crossings.append(_crossing_row(m, score, axis, crossing(by_method[m])))
    for m in methods:
        tables.append(_points_table(m, rows, scores, grid))
    crossed = Table(
        "cliff",
        "Where each method falls under half of Full's",
        (
            Column("method", "method"),
            Column("score", "score"),
            Column("axis", "axis"),
            Column("crossing", "falls under at"),
            Column("sure_over", "surely above at"),
            Column("sure_under", "surely under at"),
            Column("said", "in words"),
        ),
        tuple(crossings),
        note=f"Per task d = score - {FULL_SHARE:g} x Full's score on the same task; a point is under when the "
        "mean of d over its tasks is below 0. Going from the gentle end of an axis (the largest budget, the "
        "shortest trajectory) to the harsh end, the crossing is the first point under. Its interval, on the "
        "grid: the last gentler point whose interval of d lies wholly above 0 (surely above half of Full's) "
        "and the first point from the crossing on whose interval lies wholly below 0 (surely under); blank: no "
        f"such point in the grid. Intervals: {decide.describe()}. A method with no point under never crosses "
        "within the grid: nothing is extrapolated past it.",
    )
    stem = f"compaction-{platform}-cliff-{date}"
    plot_list = []
    for (score, axis), by_method in curves.items():
        means = {m: [(p.x, _mean_score(rows, m, score, axis, p.x, grid)) for p in pts] for m, pts in by_method.items()}
        half = _half_full(rows, score, axis, grid)
        fixed = (
            f"at {grid['budget_length']} tokens of trajectory"
            if axis == "budget"
            else f"at a budget of {grid['length_budget']} tokens"
        )
        plot_list.append(
            Plot(
                f"{stem}-{score}-vs-{axis}.png",
                f"{score} against the {axis} ({fixed}), one line per method; dashed: half of Full's",
                plots.cliff_curves(
                    means, half, f"{axis} (Qwen tokens)", score, f"The cliff: {score} by {axis}, {fixed}"
                ),
            )
        )
    sets = {k.removeprefix("params.set_"): first[k] for k in sorted(arms.columns) if k.startswith("params.set_L")}
    notes = [REFERENCE if reference else f"Model {model} (tier {first['params.tier']}, platform {platform})."]
    notes += [
        f"The sets were generated by the measurement itself (seed {grid['seed']}, {grid['tasks']} tasks per set, "
        "one set per length, every task of a set that length in Qwen tokens of tool results; the generator's "
        "defaults otherwise) into the sweep's own folder; each set's manifest sha256 is in the provenance.",
        f"The budget: S's and H's summary allowance in Qwen tokens (the study sizes it from the evidence, at most "
        f"256); masking's, the latest tool outputs whose tokens fit in it. The budget axis is at "
        f"{grid['budget_length']} tokens of trajectory, the length axis at a budget of {grid['length_budget']}.",
        *left_out,
    ]
    provenance = {
        **provenance_head(arms, date, options.experiment),
        "measurement": KIND,
        "cliff grid": {**grid, "budgets": _grid(conds, "budget", grid), "lengths": _grid(conds, "length", grid)},
        "task set manifest sha256 per length": sets,
        "sweeps (overrides)": selection.sweeps(arms["sweep"], arms["overrides"]),
        **run_facts(arms),
    }
    appendix = Table(
        "runs",
        f"MLflow run ids behind every number ({len(arms) + len(conds)} runs)",
        tuple(Column(c, c) for c in ("method", "cell", "status", "run_id")),
        tuple(
            [
                {"method": a["method"], "cell": "(arm)", "status": a["status"], "run_id": a["run_id"]}
                for _, a in arms.iterrows()
            ]
            + [
                {
                    "method": str(arms.loc[arms["run_id"] == c["parent"], "method"].iloc[0]),
                    "cell": c["cell"],
                    "status": c["status"],
                    "run_id": c["run_id"],
                }
                for _, c in conds.sort_values(["length", "budget", "task"], kind="stable").iterrows()
            ]
        ),
    )
    return Record(
        data={"cliff_conditions": rows, "cliff_crossings": crossings},
        topic="compaction",
        platform=f"{platform}-cliff",
        date=date,
        title=f"The cliff: retention against budget and length, {model} ({platform}), {date}",
        provenance=provenance,
        notes=tuple(notes),
        tables=(crossed, *tables),
        plots=tuple(plot_list),
        appendix=(appendix,),
    )


def _grid(conds: pd.DataFrame, axis: str, grid: dict[str, int]) -> list[int]:
    fixed, at = ("length", grid["budget_length"]) if axis == "budget" else ("budget", grid["length_budget"])
    return sorted({int(v) for v in conds.loc[conds[fixed] == at, axis]})


def _crossing_row(method: str, score: str, axis: str, c: Crossing) -> dict:
    return {
        "method": method,
        "score": score,
        "axis": axis,
        "crossing": c.at,
        "sure_over": c.sure_over,
        "sure_under": c.sure_under,
        "said": c.describe(UNITS[axis]),
    }


def _at(rows: list[dict], axis: str, x: int, grid: dict[str, int]) -> list[dict]:
    if axis == "budget":
        return [r for r in rows if r["length"] == grid["budget_length"] and r["budget"] == x]
    return [r for r in rows if r["budget"] == grid["length_budget"] and r["length"] == x]


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _mean_score(rows: list[dict], method: str, score: str, axis: str, x: int, grid: dict[str, int]) -> float:
    got = [r[score] for r in _at(rows, axis, x, grid) if r["method"] == method and r[score] is not None]
    return sum(got) / len(got)


def _half_full(rows: list[dict], score: str, axis: str, grid: dict[str, int]) -> list[tuple[int, float]]:
    """Half of Full's mean score at each point of ``axis`` (over every method's conditions: Full is
    the same context whatever the method)."""
    fixed, at = ("length", grid["budget_length"]) if axis == "budget" else ("budget", grid["length_budget"])
    xs = sorted({r[axis] for r in rows if r[fixed] == at})
    out = []
    for x in xs:
        full = [r[f"full_{score}"] for r in _at(rows, axis, x, grid) if r[f"full_{score}"] is not None]
        if full:
            out.append((x, FULL_SHARE * sum(full) / len(full)))
    return out


def _points_table(method: str, rows: list[dict], scores: list[str], grid: dict[str, int]) -> Table:
    out = []
    for axis in AXES:
        fixed = ("length", grid["budget_length"]) if axis == "budget" else ("budget", grid["length_budget"])
        mine = [r for r in rows if r["method"] == method and r[fixed[0]] == fixed[1]]
        for x in sorted({r[axis] for r in mine}, reverse=axis == "budget"):
            here = [r for r in mine if r[axis] == x]
            row = {
                "axis": axis,
                "length": here[0]["length"],
                "budget": here[0]["budget"],
                "tasks": len(here),
                "failed": sum(r["failed"] for r in here),
            }
            for score in scores:
                pts = axis_points(here, method, score, axis, grid)
                row[score] = _mean([r[score] for r in here if r[score] is not None])
                row[f"full_{score}"] = _mean([r[f"full_{score}"] for r in here if r[f"full_{score}"] is not None])
                row[f"{score}_d"] = pts[0].mean if pts else None
                low, high = pts[0].interval if pts else (None, None)
                row[f"{score}_low"], row[f"{score}_high"] = low, high
                row[f"{score}_under"] = None if not pts else ("under" if pts[0].under else "")
            out.append(row)
    columns = [
        Column("axis", "axis"),
        Column("length", "length"),
        Column("budget", "budget"),
        Column("tasks", "tasks"),
        Column("failed", "failed"),
    ]
    for score in scores:
        columns += [
            Column(score, score, _fraction(score)),
            Column(f"full_{score}", f"Full's {score}", _fraction(f"full_{score}")),
            Column(f"{score}_d", f"d = {score} - half of Full's", _fraction(f"{score}_d")),
            Column(f"{score}_low", "d low", _fraction(f"{score}_low")),
            Column(f"{score}_high", "d high", _fraction(f"{score}_high")),
            Column(f"{score}_under", "under half"),
        ]
    return Table(
        f"cliff_{method.lower()}",
        f"{method}: each grid point, gentle to harsh on each axis",
        tuple(columns),
        tuple(out),
        note="Means over the point's tasks (tasks weigh equally); d low and d high: the interval of the mean of d "
        "(a failed condition has no score and is counted apart).",
    )


def _fraction(key: str):
    return lambda r: "" if r[key] is None else f"{r[key]:.3f}"
