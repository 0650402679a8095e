"""A SQLite store's runs written with Python's ``sqlite3``: MLflow's own tables, MLflow not imported.

Importing MLflow costs a sweep about 2 s of CPU, and its ORM several milliseconds a run; the
offline main job computes a run in about 25 ms. So where it is safe a SQLite store's runs are
created, written, found and killed here, one transaction each, with the rows
:class:`~washexp.tracking.sqlstore.SqlRuns` writes through MLflow's ORM (``tests/test_tracking_store.py``
holds both to what ``MlflowClient``'s own calls leave).

Safe means: the store is at the schema the installed MLflow makes (its alembic head, read from
MLflow's migration files, which is also what MLflow checks before it opens a store), the
experiment exists, and the tables written here have exactly the columns written here. Anything
else (a new store, an older schema, another MLflow) goes through MLflow.
"""

from __future__ import annotations

import math
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

from washexp.tracking.sqlite import schema_head, store_path

# the columns of the tables written here, as MLflow's schema has them (checked on the store)
COLUMNS = {
    "runs": {
        "run_uuid", "name", "source_type", "source_name", "entry_point_name", "user_id", "status",
        "start_time", "end_time", "source_version", "lifecycle_stage", "artifact_uri", "experiment_id",
        "deleted_time",
    },
    "tags": {"key", "value", "run_uuid"},
    "params": {"key", "value", "run_uuid"},
    "metrics": {"key", "value", "timestamp", "run_uuid", "step", "is_nan"},
    "latest_metrics": {"key", "value", "timestamp", "step", "is_nan", "run_uuid"},
    "experiment_tags": {"key", "value", "experiment_id"},
}  # fmt: skip
# MLflow's limits (mlflow.utils.validation): its batch call refuses longer values, so does this
MAX_KEY, MAX_PARAM, MAX_TAG, MAX_EXPERIMENT_TAG = 250, 6000, 8000, 20000
RUN_NAME_TAG, USER_TAG = "mlflow.runName", "mlflow.user"
_FLOAT_MAX = 1.7976931348623157e308  # SQL has no infinity: MLflow stores +-inf as +-max


def _connect(db: Path) -> sqlite3.Connection:
    con = sqlite3.connect(db, timeout=60, isolation_level=None)  # transactions are begun explicitly
    con.execute("PRAGMA journal_mode=WAL")  # as every connection washexp opens (tracking.sqlite)
    con.execute("PRAGMA synchronous=NORMAL")
    return con


class LiteRuns:
    """The runs of one experiment in one SQLite store, at the installed MLflow's schema."""

    def __init__(self, db: Path, experiment_id: str, artifact_location: str):
        self._db = db
        self.experiment_id = experiment_id
        self._artifact_location = artifact_location.rstrip("/")
        self._local = threading.local()  # a connection per thread: sqlite3's own rule

    @classmethod
    def of(cls, uri: str, experiment: str) -> LiteRuns | None:
        """The runs of ``experiment`` in the store at ``uri``, or None when this module cannot write
        them as MLflow would (not a SQLite file, or see the module's note)."""
        head, db = schema_head(), store_path(uri)
        if head is None or db is None or not db.is_file():
            return None
        try:
            con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=60)
        except sqlite3.Error:
            return None
        try:
            if [r[0] for r in con.execute("SELECT version_num FROM alembic_version")] != [head]:
                return None
            for table, columns in COLUMNS.items():
                if {r[1] for r in con.execute(f"PRAGMA table_info({table})")} != columns:
                    return None
            found = con.execute(
                "SELECT experiment_id, artifact_location FROM experiments"
                " WHERE name = ? AND lifecycle_stage = 'active'",
                (experiment,),
            ).fetchone()
        except sqlite3.Error:  # no such table, locked: MLflow opens it
            return None
        finally:
            con.close()
        if found is None or not found[1]:
            return None
        return cls(db, str(found[0]), found[1])

    def _con(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            con = self._local.con = _connect(self._db)
        return con

    def _transaction(self, write) -> None:
        con = self._con()
        con.execute("BEGIN IMMEDIATE")  # the write lock first: no upgrade from a read to wait on
        try:
            write(con)
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")

    def find(self, tag: str, value: str, keys: tuple[str, ...], limit: int = 50):
        """The experiment's live runs whose tag ``tag`` is ``value``, newest first:
        ``(run_id, status, latest metrics, the tags named in keys)``."""
        return select_runs(self._con(), int(self.experiment_id), tag, value, keys, limit)

    def has_tagged(self, tag: str, value: str) -> bool:
        """Whether any live run of the experiment has tag ``tag`` = ``value``."""
        return bool(select_runs(self._con(), int(self.experiment_id), tag, value, None, 1))

    def set_experiment_tag(self, key: str, value: str) -> None:
        """As ``MlflowClient.set_experiment_tag``: one row per key, replaced."""
        row = (key, _checked(key, value, MAX_EXPERIMENT_TAG), int(self.experiment_id))
        self._transaction(
            lambda con: con.execute(
                "INSERT INTO experiment_tags (key, value, experiment_id) VALUES (?, ?, ?)"
                " ON CONFLICT (key, experiment_id) DO UPDATE SET value = excluded.value",
                row,
            )
        )

    def create(
        self, name: str, tags: dict[str, str], run_id: str | None = None, start_time: int | None = None
    ) -> tuple[str, str]:
        """A new RUNNING run with its tags, as ``MlflowClient.create_run`` makes one: its id and
        artifact URI."""
        run_id = run_id or uuid.uuid4().hex
        artifact_uri = f"{self._artifact_location}/{run_id}/artifacts"
        named = {k: _checked(k, v, MAX_TAG) for k, v in tags.items()} | {RUN_NAME_TAG: name}
        run = (
            run_id, name, "UNKNOWN", "", "", tags.get(USER_TAG, "unknown"), "RUNNING", start_time or _now(), None,
            "", "active", artifact_uri, int(self.experiment_id), None,
        )  # fmt: skip

        def write(con: sqlite3.Connection) -> None:
            con.execute(
                "INSERT INTO runs (run_uuid, name, source_type, source_name, entry_point_name, user_id, status,"
                " start_time, end_time, source_version, lifecycle_stage, artifact_uri, experiment_id, deleted_time)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                run,
            )
            con.executemany(
                "INSERT INTO tags (key, value, run_uuid) VALUES (?, ?, ?)", [(k, v, run_id) for k, v in named.items()]
            )

        self._transaction(write)
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
        """Everything a finished run holds and its end (ms), in one transaction: its params,
        metrics ``(key, value, timestamp ms, step)`` with MLflow's latest-metric rows, its tags (a
        tag set at creation is overwritten, as a batch would) and its status."""
        params = {k: _checked(k, v, MAX_PARAM) for k, v in params.items()}
        tags = {k: _checked(k, v, MAX_TAG) for k, v in tags.items()}
        for key, *_ in metrics:
            _checked(key, "", 0)
        rows, latest = metric_rows(run_id, metrics)

        def write(con: sqlite3.Connection) -> None:
            con.executemany(
                "INSERT INTO params (key, value, run_uuid) VALUES (?, ?, ?)",
                [(k, v, run_id) for k, v in params.items()],
            )
            for table, values in (("metrics", rows), ("latest_metrics", latest)):
                con.executemany(
                    f"INSERT INTO {table} (key, value, timestamp, run_uuid, step, is_nan)"
                    " VALUES (:key, :value, :timestamp, :run_uuid, :step, :is_nan)",
                    values,
                )
            con.executemany(
                "INSERT INTO tags (key, value, run_uuid) VALUES (?, ?, ?)"
                " ON CONFLICT (key, run_uuid) DO UPDATE SET value = excluded.value",
                [(k, v, run_id) for k, v in tags.items()],
            )
            con.execute("UPDATE runs SET status = ?, end_time = ? WHERE run_uuid = ?", (status, end_time, run_id))

        self._transaction(write)

    def kill(self, run_id: str, tags: dict[str, str]) -> None:
        """End a run KILLED now with ``tags``, as ``set_tag`` and ``set_terminated`` would."""
        tags = {k: _checked(k, v, MAX_TAG) for k, v in tags.items()}

        def write(con: sqlite3.Connection) -> None:
            con.executemany(
                "INSERT INTO tags (key, value, run_uuid) VALUES (?, ?, ?)"
                " ON CONFLICT (key, run_uuid) DO UPDATE SET value = excluded.value",
                [(k, v, run_id) for k, v in tags.items()],
            )
            con.execute("UPDATE runs SET status = 'KILLED', end_time = ? WHERE run_uuid = ?", (_now(), run_id))

        self._transaction(write)


def metric_rows(run_id: str, metrics: list[tuple[str, float, int, int]]) -> tuple[list[dict], list[dict]]:
    """MLflow's rows for a new run's metrics ``(key, value, timestamp ms, step)``, for both writers:
    each point once (a repeat is stored once), NaN as 0 with ``is_nan``, +-inf as +-max (SQL has no
    infinity), and per key the latest-metric row, the greatest by (step, timestamp, value)."""
    rows, latest = [], {}
    for key, value, timestamp, step in dict.fromkeys(metrics):
        is_nan = math.isnan(value)
        stored = 0.0 if is_nan else max(-_FLOAT_MAX, min(_FLOAT_MAX, value))
        row = {"run_uuid": run_id, "key": key, "value": stored, "timestamp": timestamp, "step": step, "is_nan": is_nan}
        rows.append(row)
        kept = latest.get(key)
        if kept is None or (step, timestamp, stored) > (kept["step"], kept["timestamp"], kept["value"]):
            latest[key] = row
    return rows, list(latest.values())


def select_runs(
    con: sqlite3.Connection, experiment_id: int, tag: str, value: str, keys: tuple[str, ...] | None, limit: int = 50
):
    """The live runs of an experiment whose tag ``tag`` is ``value``, newest first, as MLflow's ORM
    finds them: ``(run_id, status, latest metrics, the tags named in keys)`` (keys None: the ids and
    statuses alone)."""
    rows = con.execute(
        "SELECT runs.run_uuid, runs.status FROM runs JOIN tags ON tags.run_uuid = runs.run_uuid"
        " WHERE tags.key = ? AND tags.value = ? AND runs.experiment_id = ? AND runs.lifecycle_stage = 'active'"
        " ORDER BY runs.start_time DESC, runs.run_uuid LIMIT ?",
        (tag, value, experiment_id, limit),
    ).fetchall()
    ids = [r[0] for r in rows]
    metrics: dict[str, dict[str, float]] = {i: {} for i in ids}
    tags: dict[str, dict[str, str]] = {i: {} for i in ids}
    if ids and keys is not None:
        marks = ",".join("?" * len(ids))
        for run_id, key, val, is_nan in con.execute(
            f"SELECT run_uuid, key, value, is_nan FROM latest_metrics WHERE run_uuid IN ({marks})", ids
        ):
            metrics[run_id][key] = float("nan") if is_nan else float(val)
        for run_id, key, val in con.execute(
            f"SELECT run_uuid, key, value FROM tags"
            f" WHERE run_uuid IN ({marks}) AND key IN ({','.join('?' * len(keys))})",
            [*ids, *keys],
        ):
            tags[run_id][key] = val
    return [(r[0], r[1], metrics[r[0]], tags[r[0]]) for r in rows]


def local_artifact_dir(artifact_uri: str) -> Path | None:
    """The folder of a run's artifacts on this machine (a ``file:`` URI or a plain path, what
    MLflow's ``LocalArtifactRepository`` writes), or None for any other store (``s3://``...)."""
    parsed = urlparse(artifact_uri)
    if parsed.scheme == "file" and parsed.netloc in ("", "localhost"):
        return Path(url2pathname(parsed.path))
    if not parsed.scheme and Path(artifact_uri).is_absolute():
        return Path(artifact_uri)
    return None


def _checked(key: str, value: str, limit: int) -> str:
    """What MLflow's validation refuses, refused here too (a washexp bug, never a silent row)."""
    if not key or len(key) > MAX_KEY:
        raise ValueError(f"a tracking key of {len(key)} characters (MLflow takes 1 to {MAX_KEY}): {key[:80]!r}")
    if limit and len(value) > limit:
        raise ValueError(f"{key}: a value of {len(value)} characters (MLflow takes at most {limit})")
    return value


def _now() -> int:
    return int(time.time() * 1000)
