"""The compaction runs a record covers, as pandas tables.

All MLflow access goes through :mod:`washexp.tracking.reader` (``search``); this module only
filters and reshapes the DataFrame ``mlflow.search_runs`` returns. Arms are identified, sorted
and grouped by the ``method`` and ``topn`` values their runs carry (``order``), never by parsing
their labels.

Which runs a record covers:

- ``--model``, ``--sweep`` and ``--date`` filter the *arm* runs (a sweep's reused conditions keep
  the sweep tag of the run that computed them, so conditions are found through their parent);
- per arm (model, method, top-N, phase) the newest FINISHED arm run wins; an arm whose newest
  run is unfinished is named in a note and left out;
- its conditions are the condition runs whose parent is that arm run (newest per task).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from washexp.compaction.condition import Arm
from washexp.errors import WashexpError

ARM_COLUMNS = {
    "tags.method": "method",
    "tags.topn": "topn",
    "tags.phase": "phase",
    "tags.model": "model",
    "tags.sweep": "sweep",
    "tags.washexp.overrides": "overrides",
}
CONDITION_COLUMNS = {
    "tags.task": "task",
    "tags.cohort": "cohort",
    "tags.washexp.sha256.fixture": "fixture_sha256",
    "tags.mlflow.parentRunId": "arm_run_id",
}


@dataclass(frozen=True)
class StudyRuns:
    """The runs one record is built from."""

    arms: pd.DataFrame
    """One row per arm: label, method, topn, phase, model, sweep, overrides, run_id, metrics.*."""
    conditions: pd.DataFrame
    """One row per (arm, task): label, task, cohort, status, run_id, arm_run_id, metrics.*."""
    notes: tuple[str, ...] = field(default=())
    """Runs seen but left out, and why."""


def select_arms(
    runs: pd.DataFrame, *, model: str | None = None, sweeps: tuple[str, ...] = (), until: str | None = None
) -> tuple[pd.DataFrame, list[str]]:
    """The newest finished arm run per (model, method, top-N, phase), after the filters."""
    arms = runs[_tag(runs, "washexp.kind") == "arm"].copy()
    if model is not None:
        arms = arms[_tag(arms, "model") == model]
    if sweeps:
        sweep = _tag(arms, "sweep")
        arms = arms[sweep.map(lambda s: any(s == w or s.endswith("/" + w) for w in sweeps))]
    if until is not None:
        arms = arms[arms["start_time"].dt.strftime("%Y-%m-%d") <= until]
    arms = arms.rename(columns=ARM_COLUMNS)
    each = [Arm(m, None if n == "n/a" else int(n)) for m, n in zip(arms["method"], arms["topn"], strict=True)]
    arms["label"] = [a.label for a in each]
    arms["order"] = [a.order for a in each]
    arms = arms.sort_values("start_time", ascending=False, kind="stable")
    notes = []
    chosen = []
    for _, group in arms.groupby(["model", "label", "phase"], sort=True):
        newest = group.iloc[0]
        if newest["status"] != "FINISHED":
            notes.append(
                f"{newest['label']} ({newest['phase']}): newest arm run {newest['run_id']} "
                f"is {newest['status']}, left out"
            )
            continue
        chosen.append(newest)
    if not chosen:
        return arms.iloc[0:0], notes
    out = pd.DataFrame(chosen)
    out = out.iloc[sorted(range(len(out)), key=lambda i: (out["phase"].iloc[i], out["order"].iloc[i]))]
    return out.reset_index(drop=True), notes


def conditions_of(runs: pd.DataFrame, arms: pd.DataFrame) -> pd.DataFrame:
    """The condition runs under the chosen arm runs, newest per (arm, task)."""
    cond = runs[_tag(runs, "washexp.kind") == "condition"].rename(columns=CONDITION_COLUMNS)
    cond = cond[cond["arm_run_id"].isin(arms["run_id"])]
    cond = cond.sort_values("start_time", ascending=False, kind="stable")
    cond = cond.drop_duplicates(["arm_run_id", "task"], keep="first")
    labels = dict(zip(arms["run_id"], arms["label"], strict=True))
    orders = dict(zip(arms["run_id"], arms["order"], strict=True))
    cond = cond.assign(label=cond["arm_run_id"].map(labels), order=cond["arm_run_id"].map(orders))
    return cond.sort_values(["task"], kind="stable").reset_index(drop=True)


def study_runs(
    runs: pd.DataFrame, *, model: str | None = None, sweeps: tuple[str, ...] = (), until: str | None = None
) -> StudyRuns:
    arms, notes = select_arms(runs, model=model, sweeps=sweeps, until=until)
    if arms.empty:
        raise WashexpError("no finished arm runs match the filters (model, sweep, date)")
    return StudyRuns(arms, conditions_of(runs, arms), tuple(notes))


def metric(frame: pd.DataFrame, name: str) -> pd.Series:
    """``metrics.<name>`` or an all-NaN column when no run logged it."""
    col = f"metrics.{name}"
    return frame[col] if col in frame.columns else pd.Series(float("nan"), index=frame.index)


def value(row: pd.Series, name: str) -> float | None:
    """One run's metric as a float, None when absent (never 0)."""
    v = row.get(f"metrics.{name}")
    return None if v is None or pd.isna(v) else float(v)


def _tag(frame: pd.DataFrame, name: str) -> pd.Series:
    col = f"tags.{name}"
    return frame[col] if col in frame.columns else pd.Series(None, index=frame.index, dtype=object)
