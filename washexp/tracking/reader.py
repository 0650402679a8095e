"""Read side (the exporter and ``washexp ui``): plain lookups, no run is created or changed."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def quiet_mlflow() -> Iterator[None]:
    """MLflow logs alembic migrations and warnings at INFO on first use of a store."""
    level = logging.getLogger("alembic").level
    logging.getLogger("alembic").setLevel(logging.WARNING)
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    try:
        yield
    finally:
        logging.getLogger("alembic").setLevel(level)


def experiment_id(uri: str, name: str) -> str | None:
    """The id of experiment ``name`` in the store at ``uri``, or None if it has none."""
    from mlflow.tracking import MlflowClient

    with quiet_mlflow():
        found = MlflowClient(uri).get_experiment_by_name(name)
    return found.experiment_id if found else None


def search(uri: str, experiment: str, filter_string: str = ""):
    """Every run of ``experiment`` as a pandas DataFrame (``mlflow.search_runs``: columns
    ``run_id, status, start_time, end_time, metrics.*, params.*, tags.*``); None if the
    experiment does not exist."""
    import mlflow

    exp_id = experiment_id(uri, experiment)
    if exp_id is None:
        return None
    mlflow.set_tracking_uri(uri)
    with quiet_mlflow():
        return mlflow.search_runs([exp_id], filter_string=filter_string, output_format="pandas", max_results=100_000)


def load_table(uri: str, artifact_file: str, run_ids: list[str]):
    """One MLflow table gathered across runs (a ``run_id`` column added); None when no run has it."""
    import mlflow

    mlflow.set_tracking_uri(uri)
    with quiet_mlflow():
        try:
            return mlflow.load_table(artifact_file, run_ids=run_ids, extra_columns=["run_id"])
        except Exception:  # MlflowException when none of the runs logged it
            return None
