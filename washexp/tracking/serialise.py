"""A run's params, tables and artifacts as the bytes and texts stored: params as text (a long one
whole in an artifact a param points to, never cut), tables as frames masked before MLflow writes
them, files written into a folder for one upload."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import urlparse
from urllib.request import url2pathname

from washexp.hashing import canonical_json, sha256_bytes
from washexp.masking import mask


def write_tree(folder: Path, files: dict[str, bytes]) -> None:
    made: set[str] = set()
    for rel, data in files.items():
        target = os.path.join(folder, rel)
        parent = os.path.dirname(target)
        if parent not in made:  # each folder made once (a run's requests/ holds a dozen files)
            os.makedirs(parent, exist_ok=True)
            made.add(parent)
        with open(target, "wb") as f:
            f.write(data)


def frame_of(data: Any):
    import pandas as pd

    return data if isinstance(data, pd.DataFrame) else pd.DataFrame(data)


def _is_text(dtype) -> bool:
    import pandas as pd

    return pd.api.types.is_object_dtype(dtype) or pd.api.types.is_string_dtype(dtype)


def with_ids(frame, ids: dict[str, str]):
    """``frame`` with every cell that is a key of ``ids`` (a trace's placeholder) replaced by its
    value; only the columns holding one are copied (pandas' ``replace`` scanned every cell of
    every table: 4 ms a table, 6 % of the writer on the tracked panel)."""
    if not ids:
        return frame
    # a set lookup per cell: pandas' isin per text column cost 5 ms a table (5 % of the writer)
    hits = [
        i
        for i, t in enumerate(frame.dtypes)
        if _is_text(t) and any(isinstance(v, str) and v in ids for v in frame.iloc[:, i].to_numpy())
    ]
    if not hits:
        return frame
    frame = frame.copy()
    for i in hits:
        frame.iloc[:, i] = frame.iloc[:, i].map(lambda v: ids.get(v, v) if isinstance(v, str) else v)
    return frame


def masked_frame(frame, secrets: list[str]):
    """``frame`` with every secret masked out of its text (column names and string cells, nested
    ones too) before MLflow writes it: a table is written by ``log_table``, not as our bytes."""
    if not secrets:
        return frame

    def masked(value):
        if isinstance(value, str):
            return mask(value, secrets)
        if isinstance(value, (list, tuple)):
            return type(value)(masked(v) for v in value)
        if isinstance(value, dict):
            return {masked(k): masked(v) for k, v in value.items()}
        return value

    frame = frame.rename(columns=masked)  # a copy: the caller's table is left as it was
    for i, dtype in enumerate(frame.dtypes):
        if _is_text(dtype):
            frame.iloc[:, i] = frame.iloc[:, i].map(masked)
    return frame


def table_json(frame) -> str:
    """A table as ``MlflowClient.log_table`` writes a ``.json`` file (pandas ``split``, no index)."""
    return frame.to_json(orient="split", index=False, date_format="iso")


def table_digest(artifact_uri: str, rel: str, frame) -> str:
    """The sha256 of the table ``log_table`` just stored as ``rel``: its file read where the run's
    artifacts are a folder on this machine (a ``file:`` URI), else ``frame`` serialised as MLflow
    serialised it. Reading the file (0.02 ms a table) spares serialising the frame a second
    time (0.7 ms; the tracked panel stores 728 tables)."""
    where = urlparse(artifact_uri)
    if where.scheme != "file" or where.netloc not in ("", "localhost"):
        return sha256_bytes(table_json(frame).encode("utf-8"))
    with open(os.path.join(url2pathname(where.path), rel), "rb") as f:
        return sha256_bytes(f.read())


MAX_PARAM_CHARS = 6000
"""MLflow's longest param value (its documented 6,000-character limit, 3.x): a
longer one is stored whole as the artifact :func:`param_artifact` names, and the param points to it."""


def param_texts(params: dict[str, Any]) -> dict[str, str]:
    """Each param as the text MLflow stores: a string as is, anything else as canonical JSON."""
    return {k: v if isinstance(v, str) else canonical_json(v) for k, v in params.items()}


def param_artifact(key: str) -> str:
    """Where a param too long for MLflow is stored whole (in the run's sha256 manifest)."""
    return f"params/{key}.txt"


def pointer(key: str, data: bytes) -> str:
    return f"see artifact {param_artifact(key)} (sha256 {sha256_bytes(data)}, {len(data)} bytes)"


def unstored(text: str) -> str:
    """A long value whose artifact could not be stored: said so, never cut silently."""
    if len(text) <= MAX_PARAM_CHARS:
        return text
    return f"not stored: {len(text)} characters, over MLflow's {MAX_PARAM_CHARS}, and the run's artifacts failed"
