"""Runs written straight into MLflow's SQL schema: one transaction per call, MLflow's own ORM.

``MlflowClient`` spends about 48 statements over 7 sessions on one run (each of create, batch
and status opens a session, re-reads the experiment or the run and checks it; a batch re-reads
params, latest metrics and every tag before writing), which was most of what tracking a run cost.
A run this process creates and writes whole needs none of that rereading. Here each step is one
session: create the run with its tags; write its params, metrics (with MLflow's latest-metric
rows), tags and status; find the runs of one identity. Rows are MLflow's models
(``SqlRun``, ``SqlTag``, ``SqlParam``, ``SqlMetric``, ``SqlLatestMetric``) checked by MLflow's
validators, so the store holds what the client's calls leave: ``tests/test_tracking_store.py``
writes one run both ways and compares them as MLflow reads them. A tracking server (HTTP) has
no SQL store in this process: its runs go through the client.
"""

from __future__ import annotations

import time
import uuid
from typing import NamedTuple

from mlflow.entities import LifecycleStage, Metric, Param, RunStatus, RunTag, SourceType
from mlflow.store.tracking.dbmodels.models import SqlLatestMetric, SqlMetric, SqlParam, SqlRun, SqlTag
from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
from mlflow.utils.mlflow_tags import MLFLOW_RUN_NAME, MLFLOW_USER
from mlflow.utils.uri import append_to_uri_path
from mlflow.utils.validation import _validate_batch_log_data
from sqlalchemy import insert, select, update

from washexp.tracking.literuns import metric_rows


class StoredRun(NamedTuple):
    run_id: str
    status: str
    metrics: dict[str, float]
    tags: dict[str, str]


class SqlRuns:
    """The runs of one experiment in one SQL store (SQLite, PostgreSQL, MySQL)."""

    def __init__(self, store: SqlAlchemyStore, experiment_id: str, artifact_location: str):
        self._store = store
        self._experiment_id = experiment_id
        self._artifact_location = artifact_location

    @classmethod
    def of(cls, client, experiment_id: str) -> SqlRuns | None:
        """The SQL store behind ``client``, or None when it has none (a tracking server)."""
        store = client._tracking_client.store
        if not isinstance(store, SqlAlchemyStore):
            return None
        return cls(store, experiment_id, client.get_experiment(experiment_id).artifact_location)

    def find(self, tag: str, value: str, keys: tuple[str, ...], limit: int = 50) -> list[StoredRun]:
        """The experiment's live runs whose tag ``tag`` is ``value``, newest first, with their
        latest metrics and the tags named in ``keys``."""
        with self._store.ManagedSessionMaker() as session:
            rows = (
                session.query(SqlRun.run_uuid, SqlRun.status)
                .join(SqlTag, SqlTag.run_uuid == SqlRun.run_uuid)
                .filter(
                    SqlTag.key == tag,
                    SqlTag.value == value,
                    SqlRun.experiment_id == int(self._experiment_id),
                    SqlRun.lifecycle_stage == LifecycleStage.ACTIVE,
                )
                .order_by(SqlRun.start_time.desc(), SqlRun.run_uuid)
                .limit(limit)
                .all()
            )
            ids = [r.run_uuid for r in rows]
            metrics: dict[str, dict[str, float]] = {i: {} for i in ids}
            tags: dict[str, dict[str, str]] = {i: {} for i in ids}
            if ids:
                for m in session.query(SqlLatestMetric).filter(SqlLatestMetric.run_uuid.in_(ids)):
                    metrics[m.run_uuid][m.key] = float("nan") if m.is_nan else m.value
                for t in session.query(SqlTag).filter(SqlTag.run_uuid.in_(ids), SqlTag.key.in_(keys)):
                    tags[t.run_uuid][t.key] = t.value
        return [StoredRun(r.run_uuid, r.status, metrics[r.run_uuid], tags[r.run_uuid]) for r in rows]

    def create(
        self, name: str, tags: dict[str, str], run_id: str | None = None, start_time: int | None = None
    ) -> tuple[str, str]:
        """A new RUNNING run with its tags, as ``MlflowClient.create_run`` makes one: its id and
        artifact URI. ``run_id``, ``start_time`` (ms): what it was given when it was opened, before
        the store was set up (a new uuid4 hex, the time then)."""
        _, _, checked = _validate_batch_log_data([], [], [RunTag(k, v) for k, v in tags.items()])
        run_id = run_id or uuid.uuid4().hex
        artifact_uri = append_to_uri_path(self._artifact_location, run_id, SqlAlchemyStore.ARTIFACTS_FOLDER_NAME)
        run = {
            "run_uuid": run_id,
            "name": name,
            "artifact_uri": artifact_uri,
            "experiment_id": int(self._experiment_id),
            "source_type": SourceType.to_string(SourceType.UNKNOWN),
            "source_name": "",
            "entry_point_name": "",
            "user_id": tags.get(MLFLOW_USER, "unknown"),
            "status": RunStatus.to_string(RunStatus.RUNNING),
            "start_time": start_time or _now(),
            "end_time": None,
            "deleted_time": None,
            "source_version": "",
            "lifecycle_stage": LifecycleStage.ACTIVE,
        }
        named = {t.key: t.value for t in checked} | {MLFLOW_RUN_NAME: name}
        with self._store.ManagedSessionMaker(read_only=False) as session:
            session.execute(insert(SqlRun), [run])
            session.execute(insert(SqlTag), [{"run_uuid": run_id, "key": k, "value": v} for k, v in named.items()])
        return run_id, artifact_uri

    def complete(
        self,
        run_id: str,
        params: dict[str, str],
        metrics: list[tuple[str, float, int, int]],
        tags: dict[str, str],
        status: str,
        end_time: int,
    ) -> None:
        """Everything a finished run holds and its end (ms), in one transaction: a run written from
        nothing, so every param and metric ``(key, value, timestamp ms, step)`` row is new (a tag
        set at creation is overwritten, as a batch would)."""
        metrics, params, tags = _validate_batch_log_data(
            [Metric(*m) for m in metrics],
            [Param(k, v) for k, v in params.items()],
            [RunTag(k, v) for k, v in tags.items()],
        )
        rows, latest = metric_rows(run_id, [(m.key, m.value, m.timestamp, m.step) for m in metrics])
        tagged = {t.key: t.value for t in tags}
        with self._store.ManagedSessionMaker(read_only=False) as session:
            if params:
                session.execute(
                    insert(SqlParam), [{"run_uuid": run_id, "key": p.key, "value": p.value} for p in params]
                )
            if rows:
                session.execute(insert(SqlMetric), rows)
                session.execute(insert(SqlLatestMetric), latest)
            present = session.scalars(select(SqlTag.key).where(SqlTag.run_uuid == run_id, SqlTag.key.in_(tagged)))
            for key in list(present):
                session.execute(
                    update(SqlTag).where(SqlTag.run_uuid == run_id, SqlTag.key == key).values(value=tagged.pop(key))
                )
            if tagged:
                session.execute(insert(SqlTag), [{"run_uuid": run_id, "key": k, "value": v} for k, v in tagged.items()])
            session.execute(update(SqlRun).where(SqlRun.run_uuid == run_id).values(status=status, end_time=end_time))

    def kill(self, run_id: str, tags: dict[str, str]) -> None:
        """End a run KILLED now with ``tags``, as ``set_tag`` and ``set_terminated`` would."""
        for key, value in tags.items():
            self._store.set_tag(run_id, RunTag(key, value))
        self._store.update_run_info(run_id, RunStatus.KILLED, _now(), None)


def _now() -> int:
    return int(time.time() * 1000)
