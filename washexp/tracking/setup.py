"""Setting a store up: MLflow imported, a fresh SQLite store made whole, the experiment found or
created, under a file lock (parallel jobs racing to create one experiment, or to migrate a fresh
SQLite schema, is a known MLflow failure)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from washexp.tracking.failures import tracebacks_are_our_line
from washexp.tracking.sqlite import ensure_store, store_path


class SetUp(NamedTuple):
    """The store once it is set up: the experiment's id and MLflow's client on the store."""

    experiment_id: str
    client: Any


def set_up_store(uri: str, db: Path | None, experiment: str, artifact_root: Path | None, lock: Path) -> SetUp:
    """MLflow's client on ``uri`` and the id of ``experiment`` (created with ``artifact_root`` if
    new); ``db``: the SQLite file, made whole first. Run on the one thread that imports MLflow."""
    import mlflow
    from filelock import FileLock
    from mlflow.tracking import MlflowClient

    from washexp.tracking.reader import quiet_mlflow

    with quiet_mlflow():
        mlflow.set_tracking_uri(uri)
        tracebacks_are_our_line()
        with FileLock(str(lock)):
            if db is not None:
                ensure_store(db)  # a new store whole or not at all, never half-made
            client = MlflowClient(uri)  # opens (on first use migrates) the store: one process at a time
            found = client.get_experiment_by_name(experiment)
            experiment_id = (
                found.experiment_id
                if found
                else client.create_experiment(
                    experiment, artifact_location=artifact_root.as_uri() if artifact_root else None
                )
            )
    return SetUp(experiment_id, client)


def lock_path(uri: str, lock_dir: Path) -> Path:
    """The lock that serialises opening a store: beside a SQLite file (every sweep writing it
    shares that lock, whatever its artifact root), else in ``lock_dir``."""
    db = store_path(uri)
    if db is not None:
        db.parent.mkdir(parents=True, exist_ok=True)
        return db.with_name(db.name + ".washexp.lock")
    lock_dir.mkdir(parents=True, exist_ok=True)
    return lock_dir / ".washexp.lock"
