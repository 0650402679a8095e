"""A compaction sweep's decisions in the MLflow UI: one run of their own per sweep.

The closing lines compute the decisions from the sweep's condition runs' logged metrics (the
rows of a record's ``decisions`` table, :mod:`washexp.compaction.records.decisions`). Those runs
are finished and their manifests written, so nothing is added to them (a file after the manifest
would fail ``washexp verify``). The sweep gets one more top-level run instead, of kind
``decisions``, tagged with the sweep's id: the table ``decisions.json`` (MLflow's ``log_table``,
named in the run's own manifest), every comparison of every model the sweep ran. It carries no
identity, so it is never found, reused or linked; the record builders select runs by kind and
never read it; ``washexp runs`` counts it neither as an arm nor as a unit. Written while a stop is
still an exception (``app._main``): Ctrl-C or SIGTERM ends it KILLED, never RUNNING.
"""

from __future__ import annotations

from pathlib import Path

from washexp.errors import WashexpError
from washexp.export import decide

TABLE = "decisions.json"


def task_rows(uri: str, experiment: str, sweep: str) -> dict[str, list[dict]]:
    """Model -> the sweep's final arms' per-task rows (``data.compaction_tasks``), from its runs'
    logged metrics; empty for a sweep with no finished arm run (a cycles sweep, all failed)."""
    from washexp.compaction.records.data import task_rows as rows_of
    from washexp.compaction.records.runs import study_runs
    from washexp.tracking.reader import search

    runs = search(uri, experiment)
    if runs is None or runs.empty:
        return {}
    try:
        study = study_runs(runs, sweeps=(sweep,))
    except WashexpError:  # no finished arm run of this sweep: nothing to decide
        return {}
    return {
        str(model): rows_of(arms[arms["phase"] == "final"], study.conditions)
        for model, arms in study.arms.groupby("model", sort=True)
    }


def rows(per_model: dict[str, list[dict]]) -> list[dict]:
    """Every decision of every model, the model first."""
    from washexp.compaction.records.decisions import decisions

    return [{"model": model, **r} for model, found in per_model.items() for r in decisions(found)]


def log(per_model: dict[str, list[dict]], uri: str | None, experiment: str, sweep: str, root: Path) -> str | None:
    """Log the sweep's decisions run; its name, or None when there is nothing to decide."""
    from washexp.tracking import open_tracker
    from washexp.tracking.kinds import DecisionsRun

    found = rows(per_model)
    if not found:
        return None
    name = f"decisions · {sweep}"
    params = {"test": decide.describe(), "alpha": decide.ALPHA, "delta": decide.DELTA}
    tracker = open_tracker(True, uri, None, experiment, root)  # the experiment is there: its artifact root too
    try:
        with tracker.open(name, "", params, DecisionsRun(sweep).tags()) as run:
            run.finish({}, {}, tables={TABLE: found})
    finally:
        tracker.close()
    return name
