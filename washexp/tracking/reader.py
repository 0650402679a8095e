"""Read side (the exporter and ``washexp ui``): plain lookups, no run is created or changed."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from washexp.errors import ConfigError, WashexpError, first_line


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


def refuse_file_store(uri: str) -> None:
    """MLflow's file store (a plain path or a ``file:`` URI) is refused from MLflow 3.13 unless
    MLflow's own ``MLFLOW_ALLOW_FILE_STORE`` opts back in: an input error, asked of the URI alone,
    so a sweep says it before any work (MLflow itself raises at the first run, mid-sweep)."""
    scheme = urlsplit(uri).scheme
    # a path ("C:" a drive) is the file store to MLflow; the bare word "databricks" is not a path
    file_store = scheme == "file" or (len(scheme) <= 1 and "://" not in uri and uri != "databricks")
    if file_store and os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").strip().lower() not in ("true", "1"):
        raise ConfigError(
            f"{uri}: MLflow's file store takes no new runs; name a SQLite file (sqlite:///PATH/mlflow.db) "
            "or a tracking server, or set MLFLOW_ALLOW_FILE_STORE=true to keep the file store"
        )


def client(uri: str):
    """MLflow's client on the store at ``uri``. Making it opens the store, and a URI MLflow opens
    no store at (the file store, an unknown scheme) is an input error naming it, found before any
    work; a server is not asked until the first call."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    refuse_file_store(uri)
    try:
        return MlflowClient(uri)
    except MlflowException as err:
        raise ConfigError(f"{uri}: not a tracking store MLflow can open ({first_line(err)})") from None


def experiment_id(uri: str, name: str) -> str | None:
    """The id of experiment ``name`` in the store at ``uri``, or None if it has none."""
    from washexp.tracking.sqlite import check_store, store_path

    path = store_path(uri)
    if path is not None and not path.exists():  # a reader holds no experiment there: MLflow would make a store
        return None
    check_store(uri, write=False)  # MLflow would make an empty file a store, and retry a damaged one
    with quiet_mlflow():
        found = client(uri).get_experiment_by_name(name)
    return found.experiment_id if found else None


def search(uri: str, experiment: str, filter_string: str = ""):
    """Every run of ``experiment`` as a pandas DataFrame (``mlflow.search_runs``: columns
    ``run_id, status, start_time, end_time, metrics.*, params.*, tags.*``); None if the
    experiment does not exist."""
    from washexp.tracking import bundle

    if bundle.is_bundle(uri):  # a record's bundle stands where the store would (washexp verify)
        return bundle.search(uri, experiment)
    import mlflow

    exp_id = experiment_id(uri, experiment)
    if exp_id is None:
        return None
    mlflow.set_tracking_uri(uri)
    with quiet_mlflow():
        runs = mlflow.search_runs([exp_id], filter_string=filter_string, output_format="pandas", max_results=100_000)
    if "artifact_uri" in runs.columns:
        ROOTS.update(((uri, run_id), root) for run_id, root in zip(runs["run_id"], runs["artifact_uri"], strict=True))
    return runs


ROOTS: dict[tuple[str, str], str] = {}
"""(store URI, run id) -> the run's artifact URI, as a search of that store gave it: an artifact of
a run found by a search is read from its root, with no lookup of the run first (an export of 2,200
conditions read 6,600 tables, and each lookup cost six times the read)."""


def has_run_tagged(uri: str, experiment: str, tag: str, value: str) -> bool:
    """Whether any live run of ``experiment`` has tag ``tag`` = ``value``: one run asked for, no
    table built."""
    exp_id = experiment_id(uri, experiment)
    if exp_id is None:
        return False
    with quiet_mlflow():
        return bool(client(uri).search_runs([exp_id], filter_string=f"tags.`{tag}` = '{value}'", max_results=1))


def load_table(uri: str, artifact_file: str, run_ids: list[str]):
    """One MLflow table (``log_table``'s ``split`` JSON) gathered across runs, a ``run_id`` column
    added. Every run named must have it: a run without it, or a table that does not parse, is a
    :class:`~washexp.errors.WashexpError` naming the run (a record built without it would be blind).
    Read file by file, not by ``mlflow.load_table``: that one searches the active experiment, not
    the runs', and turns a missing table into a warning."""
    import pandas as pd

    READS.extend((run_id, artifact_file) for run_id in run_ids)
    frames = [_read(uri, artifact_file, run_id).assign(run_id=run_id) for run_id in run_ids]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["run_id"])


READS: list[tuple[str, str]] = []
"""Every (run id, table) read, in order: ``export --bundle`` copies what a record read, no more."""
ROWS: set[str] = set()
"""Every run id whose row a record builder's run selection looked at (``export.selection``):
``export --bundle`` keeps those rows, so the record rebuilt from its bundle chooses among the same
runs and says the same of those it left out."""


def _read(uri: str, artifact_file: str, run_id: str):
    """One run's table; from a bundle, checked against its manifest on every read (never cached:
    a bundle is untrusted and may change between two verifies in one process)."""
    import pandas as pd

    from washexp.tracking import bundle

    if bundle.is_bundle(uri):
        import io

        data = bundle.artifact(uri, run_id, artifact_file)
        try:
            return pd.read_json(io.BytesIO(data), orient="split", dtype=False)
        except ValueError as err:
            raise WashexpError(f"run {run_id}: table {artifact_file} cannot be read ({first_line(err)})") from None
    return _table(uri, artifact_file, run_id)


@lru_cache(maxsize=65536)
def _table(uri: str, artifact_file: str, run_id: str):
    """One run's table from a store, parsed once per process (a record reads each condition's
    tables three times and more; a parse costs as much as the read). Callers get a copy (they
    ``assign`` and ``concat``)."""
    import io

    import pandas as pd

    data = _stored(uri, run_id, artifact_file)
    if data is None:
        raise WashexpError(f"run {run_id}: no table {artifact_file}")
    try:
        return pd.read_json(io.BytesIO(data), orient="split", dtype=False)
    except ValueError as err:  # pandas: not a split-orient table
        raise WashexpError(f"run {run_id}: table {artifact_file} cannot be read ({first_line(err)})") from None


def _stored(uri: str, run_id: str, artifact_file: str) -> bytes | None:
    """One run artifact's bytes as stored, None when the run has no such file (not remembered: a
    running run may write it yet)."""
    try:
        return _downloaded(uri, run_id, artifact_file)
    except _Missing:
        return None


class _Missing(Exception):
    """The run has no such artifact."""


@lru_cache(maxsize=65536)
def _downloaded(uri: str, run_id: str, artifact_file: str) -> bytes:
    """:func:`_stored`, read once per process, as a logged artifact never changes: a record reads
    the same conditions' tables for several of its parts, ``compare`` of a sweep with itself builds
    its record twice, and ``export --bundle`` builds it again and copies the very bytes read. Sized
    for a sweep of 20,000 conditions' three tables: a smaller cache read in order misses every
    time. Read from the run's artifact root when a search gave it (:data:`ROOTS`), else through the
    run."""
    import mlflow
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    root = ROOTS.get((uri, run_id))
    with quiet_mlflow(), tempfile.TemporaryDirectory(prefix="washexp-artifact-") as tmp:
        try:
            if root is None:
                local = MlflowClient(uri).download_artifacts(run_id, artifact_file, tmp)
            else:
                local = mlflow.artifacts.download_artifacts(artifact_uri=f"{root}/{artifact_file}", dst_path=tmp)
            return Path(local).read_bytes()
        except MlflowException as err:
            if err.error_code == "RESOURCE_DOES_NOT_EXIST":
                raise _Missing from None
            raise WashexpError(f"run {run_id}: artifact {artifact_file} cannot be read ({first_line(err)})") from None
        except OSError as err:  # e.g. a folder where the file should be
            raise WashexpError(f"run {run_id}: artifact {artifact_file} cannot be read ({first_line(err)})") from None


def json_artifact(uri: str, run_id: str, artifact_file: str) -> Any:
    """One run's JSON artifact, parsed; None when the run has no such file (one a failed run never
    wrote). Any other failure of the store, or a file that is not JSON, is a
    :class:`~washexp.errors.WashexpError` naming the run: never a record built blind. From a
    bundle: checked against the run's manifest on every read (a file it does not list is one the
    run never wrote)."""
    from washexp.tracking import bundle

    if bundle.is_bundle(uri):
        if not bundle.lists(uri, run_id, artifact_file):
            return None
        return _parsed(run_id, artifact_file, bundle.artifact(uri, run_id, artifact_file))
    data = _stored(uri, run_id, artifact_file)
    if data is None:
        return None
    READS.append((run_id, artifact_file))  # what export --bundle copies
    return _parsed(run_id, artifact_file, data)


def _parsed(run_id: str, artifact_file: str, data: bytes) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except ValueError as err:  # UnicodeDecodeError is one
        raise WashexpError(f"run {run_id}: artifact {artifact_file} is not JSON ({first_line(err)})") from None


def artifact_bytes(uri: str, run_id: str, artifact_file: str) -> bytes:
    """One run artifact's bytes as stored: those the record was built from (``export --bundle``
    copies them)."""
    data = _stored(uri, run_id, artifact_file)
    if data is None:
        raise WashexpError(f"run {run_id}: no artifact {artifact_file}")
    return data
