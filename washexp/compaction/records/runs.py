"""The compaction runs a record covers, as pandas tables.

All MLflow access goes through :mod:`washexp.tracking.reader` (``search``); this module only
filters and reshapes the DataFrame ``mlflow.search_runs`` returns. Arms are identified, sorted
and grouped by the ``method`` and ``topn`` values their runs carry (``order``), never by parsing
their labels.

Which runs a record covers is :mod:`washexp.export.selection`'s rule, keyed per arm by model,
method, top-N and phase; an arm's conditions are those it computed and those it linked.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from washexp import __version__
from washexp.compaction.condition import Arm
from washexp.errors import WashexpError
from washexp.export import selection
from washexp.tracking.kinds import ArmRun, ConditionRun, Kind

ARM_COLUMNS = {
    **ArmRun.columns(),  # method, topn, ranker, phase
    "tags.model": "model",
    "tags.sweep": "sweep",
    "tags.washexp.overrides": "overrides",
}
CONDITION_COLUMNS = {
    **ConditionRun.columns(),  # task, cohort
    "tags.washexp.sha256.fixture": "fixture_sha256",
    "parent": "arm_run_id",  # the arm it is listed under (a linked run's own parent may differ)
}


@dataclass(frozen=True)
class StudyRuns:
    """The runs one record is built from."""

    arms: pd.DataFrame
    """One row per arm: label, method, topn, phase, model, sweep, overrides, run_id, metrics.*."""
    conditions: pd.DataFrame
    """One row per (arm, task): label, task, cohort, status, run_id, arm_run_id, metrics.*."""
    notes: dict[Hashable, list[str]] = field(default_factory=dict)
    """By model (the arms' ``model`` column)."""
    """Per model: its runs seen but left out, and why."""


def select_arms(
    runs: pd.DataFrame, *, model: str | None = None, sweeps: tuple[str, ...] = (), until: str | None = None
) -> tuple[pd.DataFrame, pd.DataFrame, dict[Hashable, list[str]]]:
    """The arm runs a record covers (see :mod:`washexp.export.selection`) and their conditions."""
    arms = labelled(selection.parents(runs, Kind.ARM, model=model, sweeps=sweeps, until=until))
    kids = selection.children(runs, arms["run_id"], (Kind.CONDITION,)).rename(columns={"tags.task": "task"})
    chosen, notes = selection.newest_complete_per_model(arms, kids, ["model", "label", "phase"], "task")
    if chosen.empty:
        return chosen, kids.iloc[0:0], notes
    chosen = chosen.iloc[sorted(range(len(chosen)), key=lambda i: (chosen["phase"].iloc[i], chosen["order"].iloc[i]))]
    return chosen.reset_index(drop=True), kids, notes


def labelled(parents: pd.DataFrame) -> pd.DataFrame:
    """Arm runs (or cycles parents) with the ``ARM_COLUMNS`` names, and each one's ``label`` and
    ``order`` from its typed tags (:class:`~washexp.tracking.kinds.ArmRun`)."""
    each = [ArmRun.from_row(row) for _, row in parents.iterrows()]
    arms = parents.rename(columns=ARM_COLUMNS)
    for col in ("topn", "ranker"):  # untagged on Full and on Jev's arms: a store may have no such column
        if col not in arms:
            arms[col] = None
    arms["label"] = [Arm(a.method, a.topn, a.ranker).label for a in each]
    arms["order"] = [Arm(a.method, a.topn, a.ranker).order for a in each]
    return arms


def conditions_of(kids: pd.DataFrame, arms: pd.DataFrame) -> pd.DataFrame:
    """The conditions each chosen arm run planned, newest per (arm, task)."""
    cond = kids.rename(columns=CONDITION_COLUMNS)
    cond = cond[cond["arm_run_id"].isin(arms["run_id"])]
    cond = cond.drop_duplicates(["arm_run_id", "task"], keep="first")
    labels = dict(zip(arms["run_id"], arms["label"], strict=True))
    orders = dict(zip(arms["run_id"], arms["order"], strict=True))
    cond = cond.assign(label=cond["arm_run_id"].map(labels), order=cond["arm_run_id"].map(orders))
    return cond.sort_values(["task"], kind="stable").reset_index(drop=True)


def study_runs(
    runs: pd.DataFrame, *, model: str | None = None, sweeps: tuple[str, ...] = (), until: str | None = None
) -> StudyRuns:
    arms, kids, notes = select_arms(runs, model=model, sweeps=sweeps, until=until)
    if arms.empty:
        raise WashexpError("no finished arm runs match the filters (model, sweep, date)")
    return StudyRuns(arms, conditions_of(kids, arms), notes)


def metric(frame: pd.DataFrame, name: str) -> pd.Series:
    """``metrics.<name>`` or an all-NaN column when no run logged it."""
    col = f"metrics.{name}"
    return frame[col] if col in frame.columns else pd.Series(float("nan"), index=frame.index)


value = selection.value
score = selection.score


def unique(frame: pd.DataFrame, col: str) -> list[str]:
    """The distinct values of ``col``, sorted (none when no run has it)."""
    return sorted({str(v) for v in frame[col].dropna()}) if col in frame.columns else []


def provenance_head(arms: pd.DataFrame, date: str, experiment: str) -> dict[str, Any]:
    """What every compaction record's provenance opens with: when, which code, which model."""
    first = arms.iloc[0]
    return {
        "date": f"{date} (UTC date of the newest covered run)",
        "experiment": experiment,
        "washexp version (exporter)": __version__,
        "git commit of the runs": unique(arms, "tags.mlflow.source.git.commit"),
        "source sha256 of the runs": unique(arms, "tags.washexp.source"),
        "model": first["model"],
        "tier": first["params.tier"],
        "platform": first["params.platform"],
        "backend": first["params.backend"],
    }
