"""The MLflow layer: the only package that imports mlflow or writes its store.

- :class:`Tracker` (:mod:`~washexp.tracking.runs`): the protocol the runner and the studies use,
  implemented by the store's :class:`MlflowTracker` and the untracked :class:`NullTracker`;
- :mod:`~washexp.tracking.writer`: the MLflow tracker, a run's lifecycle (opened, found again, closed:
  sha256 manifests, MLflow tables, the rows, the status), its writes handed to
  :mod:`~washexp.tracking.write_queue` (the writer thread); the store set up by
  :mod:`~washexp.tracking.setup` (a file lock on experiment creation); runs as context managers
  (FINISHED, FAILED or KILLED, never left RUNNING by an exception) in
  :mod:`~washexp.tracking.runs`; what is stored in :mod:`~washexp.tracking.serialise`; a store
  failure as one line, :mod:`~washexp.tracking.failures`; signals held while a run is written,
  :mod:`~washexp.tracking.signals`; tracking off, :mod:`~washexp.tracking.null`;
- :mod:`~washexp.tracking.traces`: a run's model calls as MLflow traces;
- :mod:`~washexp.tracking.sqlite`: a SQLite store file checked (read only) before MLflow opens it,
  and made whole or not at all;
- :mod:`~washexp.tracking.reader`: plain lookups for the exporter and ``washexp ui``.

Every store is written and read through MLflow's public Python API only (``MlflowClient``, the
tracing API) and nothing beneath it; a SQLite file, another database and a tracking server
take one path.

The store is real: SQLite metadata at ``<project>/mlruns/mlflow.db`` with artifacts under
``<project>/mlruns`` by default (the plain file store raises from MLflow 3.13), or any tracking
server URI (``tracking=server``: runs and their artifacts go to it over HTTP; ``washexp server``
starts one, :mod:`~washexp.tracking.server`).
"""

from __future__ import annotations

from pathlib import Path

from washexp.tracking.null import NullTracker
from washexp.tracking.runs import FoundRun, Run, Tracker
from washexp.tracking.writer import MlflowTracker


def default_uri(root: Path) -> str:
    return f"sqlite:///{root / 'mlruns' / 'mlflow.db'}"


def open_tracker(enabled: bool, uri: str | None, artifacts: str | None, experiment: str, root: Path) -> Tracker:
    """A tracker for ``experiment`` in the store at ``uri`` (default: the project's SQLite)."""
    if not enabled:
        return NullTracker()
    uri = uri or default_uri(root)
    served = uri.startswith(("http://", "https://"))  # a tracking server keeps the artifacts it is sent
    artifact_root = Path(artifacts).resolve() if artifacts else None if served else root / "mlruns"
    return MlflowTracker(uri, experiment, artifact_root, lock_dir=root / "mlruns")  # MLflow set up on a thread


__all__ = ["FoundRun", "MlflowTracker", "NullTracker", "Run", "Tracker", "default_uri", "open_tracker"]
