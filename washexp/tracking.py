"""The MLflow layer: the only module that imports mlflow.

One condition = one run. A run is found again by its identity hash (tag ``washexp.hash``), so a
sweep resumes instead of repeating finished work. Every run carries a ``manifest.json`` of
sha256 digests (its artifacts, its fixture files, the package's own source), mirrored as tags
(one tag per artifact; tree digests for the fixture and the source).

The store is real: SQLite metadata at ``<root>/mlruns/mlflow.db`` with artifacts under
``<root>/mlruns`` by default (the plain file store raises from MLflow 3.13), or any tracking
server URI. Experiment creation is guarded by a file lock: parallel jobs racing to create one
experiment, or to migrate a fresh SQLite schema, is a known MLflow failure.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import tempfile
import time
import traceback
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from washexp import PROJECT_ROOT
from washexp.hashing import sha256_bytes, tree_digest

HASH_TAG = "washexp.hash"
_BATCH = 100  # MLflow accepts at most 100 params or tags per batch call


def default_uri(root: Path = PROJECT_ROOT) -> str:
    return f"sqlite:///{root / 'mlruns' / 'mlflow.db'}"


@dataclass(frozen=True)
class FoundRun:
    run_id: str
    status: str
    metrics: dict[str, float]
    parent_id: str | None

    @property
    def finished(self) -> bool:
        return self.status == "FINISHED"


class Run:
    """An open MLflow run: log results once, then it is FINISHED or FAILED. Params, metrics and
    tags go to the store in one batch when it closes (one write instead of two per run)."""

    def __init__(self, tracker: Tracker | NullTracker | None, run_id: str | None, params: dict[str, Any]):
        self._tracker, self.run_id, self._params = tracker, run_id, params

    def finish(
        self,
        metrics: dict[str, float],
        artifacts: dict[str, str | bytes],
        manifest_extra: dict[str, dict[str, str]] | None = None,
        tags: dict[str, str] | None = None,
        tables: dict[str, Any] | None = None,
    ) -> None:
        """``tables``: artifact file (``*.json``) -> DataFrame or column dict, stored as MLflow
        tables (``mlflow.load_table(file, extra_columns=["run_id"])`` gathers one across runs)."""
        if self._tracker:
            artifacts = {**artifacts, **{f: _table_json(d) for f, d in (tables or {}).items()}}
            if tables:
                tags = {**(tags or {}), **_table_tag(tables)}
            self._tracker._close(
                self.run_id, self._params, metrics, artifacts, manifest_extra or {}, tags or {}, "FINISHED"
            )

    def fail(self, error: BaseException) -> None:
        if self._tracker:
            text = "".join(traceback.format_exception(error))
            tags = {"washexp.error": f"{type(error).__name__}: {error}"[:5000]}
            self._tracker._close(self.run_id, self._params, {}, {"error.txt": text}, {}, tags, "FAILED")


class Tracker:
    def __init__(self, uri: str, experiment: str, artifact_root: Path):
        import mlflow
        from filelock import FileLock
        from mlflow.tracking import MlflowClient

        mlflow.set_tracking_uri(uri)
        self.client = MlflowClient(uri)
        artifact_root.mkdir(parents=True, exist_ok=True)
        with FileLock(str(artifact_root / ".washexp.lock")):
            found = self.client.get_experiment_by_name(experiment)
            self.experiment_id = (
                found.experiment_id
                if found
                else self.client.create_experiment(experiment, artifact_location=artifact_root.as_uri())
            )

    def find(self, identity_hash: str) -> FoundRun | None:
        """The newest run with this identity, if any."""
        runs = self.client.search_runs(
            [self.experiment_id],
            filter_string=f"tags.`{HASH_TAG}` = '{identity_hash}'",
            order_by=["attributes.start_time DESC"],
            max_results=1,
        )
        if not runs:
            return None
        r = runs[0]
        return FoundRun(r.info.run_id, r.info.status, dict(r.data.metrics), r.data.tags.get("mlflow.parentRunId"))

    def start(
        self,
        name: str,
        identity_hash: str,
        params: dict[str, Any],
        tags: dict[str, str],
        parent_id: str | None = None,
        resume_id: str | None = None,
    ) -> Run:
        if resume_id:
            self.client.update_run(resume_id, status="RUNNING")
            return Run(self, resume_id, params)
        tags = {**tags, HASH_TAG: identity_hash}
        if parent_id:
            tags["mlflow.parentRunId"] = parent_id
        run = self.client.create_run(self.experiment_id, run_name=name, tags=tags)
        return Run(self, run.info.run_id, params)

    def adopt(self, run_id: str, parent_id: str) -> None:
        """Hang a reused finished run under a new parent (a resumed arm)."""
        self.client.set_tag(run_id, "mlflow.parentRunId", parent_id)

    def _log_batch(self, run_id: str, params=None, metrics=None, tags=None) -> None:
        from mlflow.entities import Metric, Param, RunTag

        now = int(time.time() * 1000)
        ps = [Param(k, _param_value(v)) for k, v in (params or {}).items()]
        ms = [Metric(k, float(v), now, 0) for k, v in (metrics or {}).items() if v is not None]
        ts = [RunTag(k, str(v)) for k, v in (tags or {}).items()]
        for i in range(0, max(len(ps), len(ms), len(ts)), _BATCH):
            self.client.log_batch(
                run_id, metrics=ms[i : i + _BATCH], params=ps[i : i + _BATCH], tags=ts[i : i + _BATCH]
            )

    def _close(self, run_id, params, metrics, artifacts, manifest_extra, tags, status) -> None:
        manifest = {"artifacts": {}, **manifest_extra}
        with tempfile.TemporaryDirectory(prefix="washexp-") as tmp:
            for rel, content in sorted(artifacts.items()):
                data = content.encode("utf-8") if isinstance(content, str) else content
                target = Path(tmp, rel)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
                manifest["artifacts"][rel] = sha256_bytes(data)
            blob = (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode()
            Path(tmp, "manifest.json").write_bytes(blob)
            self.client.log_artifacts(run_id, tmp)
        mirrored = {f"washexp.sha256.{rel}": digest for rel, digest in manifest["artifacts"].items()}
        mirrored["washexp.sha256.manifest"] = sha256_bytes(blob)
        for name, files in manifest_extra.items():
            mirrored[f"washexp.sha256.{name}"] = tree_digest(files)
        self._log_batch(run_id, params=params, metrics=metrics, tags={**tags, **mirrored})
        self.client.set_terminated(run_id, status)


class NullTracker:
    """Tracking off (``tracking.enabled=false``): nothing is stored. Runs finished in this
    process are still found again, so one sweep never repeats identical work (Full under a
    top-N sweep runs once)."""

    def __init__(self) -> None:
        self._ids = itertools.count()
        self._open: dict[str, str] = {}
        self._finished: dict[str, FoundRun] = {}

    def find(self, identity_hash: str) -> FoundRun | None:
        return self._finished.get(identity_hash)

    def start(self, name: str, identity_hash: str, params: dict[str, Any], *args, **kwargs) -> Run:
        run_id = f"untracked-{next(self._ids)}"
        self._open[run_id] = identity_hash
        return Run(self, run_id, params)

    def adopt(self, run_id: str, parent_id: str) -> None:
        pass

    def _close(self, run_id, params, metrics, artifacts, manifest_extra, tags, status) -> None:
        identity = self._open.pop(run_id)
        if status == "FINISHED":
            self._finished[identity] = FoundRun(run_id, status, dict(metrics), None)


def source_files(root: Path = PROJECT_ROOT) -> dict[str, str]:
    """sha256 of the package's own source, prompts and configs (what produced a result)."""
    files = {}
    for pattern in ("washexp/**/*.py", "washexp/prompts/*.txt", "conf/**/*.yaml", "run.py"):
        for p in sorted(root.glob(pattern)):
            if "__pycache__" not in p.parts:
                files[p.relative_to(root).as_posix()] = sha256_bytes(p.read_bytes())
    return files


def git_commit(root: Path = PROJECT_ROOT) -> str | None:
    head = root / ".git" / "HEAD"
    try:
        ref = head.read_text().strip()
        if ref.startswith("ref: "):
            ref_path = root / ".git" / ref[5:]
            if ref_path.exists():
                return ref_path.read_text().strip()
            packed = (root / ".git" / "packed-refs").read_text().splitlines()
            return next((line.split()[0] for line in packed if line.endswith(ref[5:])), None)
        return ref
    except OSError:
        return None


def _table_json(data: Any) -> str:
    """A table in the layout ``MlflowClient.log_table`` writes (pandas ``split``, no index)."""
    import pandas as pd

    frame = data if isinstance(data, pd.DataFrame) else pd.DataFrame(data)
    return frame.to_json(orient="split", index=False, date_format="iso")


def _table_tag(tables: dict[str, Any]) -> dict[str, str]:
    """The tag by which ``mlflow.load_table`` finds a run's tables (what ``log_table`` sets).
    Written with the other artifacts so the tables are in the run's manifest too."""
    from mlflow.utils.mlflow_tags import MLFLOW_LOGGED_ARTIFACTS

    return {MLFLOW_LOGGED_ARTIFACTS: json.dumps([{"path": f, "type": "table"} for f in sorted(tables)])}


# Read side (the exporter and ``washexp ui``): plain lookups, no run is created or changed.


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


def attach(uri: str, run_ids: Iterable[str], files: list[Path], folder: str) -> None:
    """Log ``files`` into ``folder`` of finished runs (the exporter's plots beside the numbers);
    logging the same file again replaces it."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    for run_id in run_ids:
        for f in files:
            client.log_artifact(run_id, str(f), folder)


def _param_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text[:6000]


@contextmanager
def quiet_mlflow() -> Iterator[None]:
    """MLflow logs alembic migrations and warnings at INFO on first use of a store."""
    import logging

    level = logging.getLogger("alembic").level
    logging.getLogger("alembic").setLevel(logging.WARNING)
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    try:
        yield
    finally:
        logging.getLogger("alembic").setLevel(level)


@functools.cache
def open_tracker(enabled: bool, uri: str | None, artifacts: str | None, experiment: str) -> Tracker | NullTracker:
    """One tracker per store and experiment per process (Hydra runs many jobs in one process)."""
    if not enabled:
        return NullTracker()
    artifact_root = Path(artifacts).resolve() if artifacts else PROJECT_ROOT / "mlruns"
    with quiet_mlflow():
        return Tracker(uri or default_uri(), experiment, artifact_root)
