"""A record's bundle: the runs and artifacts a record reads, as a folder beside it, read the way
the tracking store is read (``bundle:<folder>`` stands where a store URI goes).

Layout of ``results/<stem>.bundle/`` (a folder, not a tar: each file diffs and reads on its own in
git, and there is no archive format to parse from untrusted input)::

    bundle.json                    schema, the export options the record was built with
    runs.json                      the runs table (columns, dtypes, rows) of the record's sweeps;
                                   its ``washexp.sha256.*`` tags are each run's manifest
    runs/<run_id>/<table>.json     each table the record reads, byte for byte
    runs/<run_id>/answers/g<N>.json  the reader's raw replies beside a run's grades (regraded by
                                   ``washexp verify`` against the tasks: :mod:`washexp.regrade`)

Everything here is untrusted input: run ids are hex, file names are the code's own, no symlink is
followed, sizes are capped, and every table is checked against its run's manifest before use (the
``washexp.sha256.<file>`` tags the writer mirrors from ``manifest.json``; the manifest file itself,
16 kB of fixture and source digests per run, stays in the store: the bundle keeps what the record
reads).
"""

from __future__ import annotations

import os
import re
import stat
from functools import lru_cache
from pathlib import Path
from typing import Any

from washexp.errors import ConfigError, FixtureError, WashexpError
from washexp.hashing import sha256_bytes

SCHEMA = 1
PREFIX = "bundle:"
"""A tracking URI of this form reads a bundle folder instead of a store."""
INFO = "bundle.json"
RUNS = "runs.json"
TAG = "tags.washexp.sha256."
"""A run's manifest, as its tags mirror it: ``washexp.sha256.<file>`` is the file's digest."""
RUN_ID = re.compile(r"^[0-9a-f]{8,64}$")
FILE = re.compile(r"^(?:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}|answers/g[0-9]{1,4}\.json)$")
"""An artifact the bundle may hold: a plain name in the run's folder (no ``..``), or a reply
file of one generation (``answers/g<N>.json``, the model's raw replies ``washexp verify`` regrades)."""
REPLIES = re.compile(r"^answers/g([0-9]{1,4})\.json$")


def reply_files(columns) -> list[str]:
    """The reply files (``answers/g<N>.json``) some run's manifest lists, from a runs table's columns."""
    return sorted(c.removeprefix(TAG) for c in columns if REPLIES.match(c.removeprefix(TAG)))


MAX_FILE = 32 * 1024 * 1024
MAX_RUNS = 128 * 1024 * 1024
MAX_DEPTH = 64
"""How deep a bundle's JSON may nest (its own: four levels)."""


class BundleMismatch(WashexpError):
    """A bundle file that is not what its manifest says (or is missing, or unsafe)."""


def is_bundle(uri: str | None) -> bool:
    return isinstance(uri, str) and uri.startswith(PREFIX)


def folder(uri: str) -> Path:
    return Path(uri.removeprefix(PREFIX))


def read_safe(root: Path, parts: tuple[str, ...], cap: int = MAX_FILE) -> bytes:
    """The bytes of ``root/parts...``: every part a plain name, no part a symlink, a regular file
    of at most ``cap`` bytes. Anything else is a :class:`BundleMismatch` naming the path."""
    rel = "/".join(parts)
    for part in parts:
        if part in ("", ".", "..") or "/" in part or "\\" in part or "\0" in part:
            raise BundleMismatch(f"bundle path {rel!r} leaves its folder: refused")
    path = root
    for part in parts:
        path = path / part
        try:
            st = os.lstat(path)
        except OSError:
            raise BundleMismatch(f"bundle artifact {rel}: missing") from None
        if stat.S_ISLNK(st.st_mode):
            raise BundleMismatch(f"bundle artifact {rel}: a symlink (never followed): refused")
    if not stat.S_ISREG(st.st_mode):
        raise BundleMismatch(f"bundle artifact {rel}: not a regular file")
    if st.st_size > cap:
        raise BundleMismatch(f"bundle artifact {rel}: {st.st_size} bytes, over the cap of {cap}")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(cap + 1)
    if len(data) > cap:
        raise BundleMismatch(f"bundle artifact {rel}: over the cap of {cap} bytes")
    return data


def check_folder(root: Path) -> None:
    try:
        st = os.lstat(root)
    except OSError:
        raise ConfigError(f"{root}: no bundle there (export with --bundle)") from None
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"{root}: a bundle is a plain folder (not a symlink or a file)")


def info(root: Path) -> dict[str, Any]:
    """``bundle.json``: its schema and the export options the record was built with."""
    check_folder(root)
    found = _parse(read_safe(root, (INFO,), 1024 * 1024), root / INFO)
    if not isinstance(found, dict) or found.get("schema") != SCHEMA or not isinstance(found.get("options"), dict):
        raise BundleMismatch(f"bundle {INFO}: not a washexp bundle of schema {SCHEMA}")
    return found


def search(uri: str, experiment: str):
    """The bundle's runs table as ``tracking.reader.search`` gives a store's (None for another
    experiment). Each run's ``washexp.sha256.manifest`` tag is what its manifest is checked by."""
    return _runs(str(folder(uri)), experiment).copy()


@lru_cache(maxsize=16)
def _runs(root_text: str, experiment: str):
    import pandas as pd

    root = Path(root_text)
    if info(root)["options"].get("experiment") != experiment:
        return None
    doc = _parse(read_safe(root, (RUNS,), MAX_RUNS), root / RUNS)
    columns, dtypes, rows = (doc.get(k) if isinstance(doc, dict) else None for k in ("columns", "dtypes", "rows"))
    if not (isinstance(columns, list) and all(isinstance(c, str) for c in columns) and "run_id" in columns):
        raise ConfigError(f"bundle {RUNS}: columns is not a list of column names with run_id: not a runs table")
    if not (isinstance(dtypes, dict) and all(isinstance(t, str) for t in dtypes.values())):
        raise ConfigError(f"bundle {RUNS}: dtypes is not an object of column -> type name: not a runs table")
    if not (isinstance(rows, list) and all(isinstance(r, list) and len(r) == len(columns) for r in rows)):
        raise ConfigError(f"bundle {RUNS}: rows is not a list of rows of {len(columns)} cells: not a runs table")
    try:
        frame = pd.DataFrame(rows, columns=columns)
        for col in columns:
            kind = dtypes.get(col, "object")
            if kind.startswith("datetime64"):
                frame[col] = pd.to_datetime(frame[col], utc=True, format="ISO8601")
            elif kind != "object":
                frame[col] = frame[col].astype(kind)
    except (KeyError, TypeError, ValueError, OverflowError) as err:
        raise ConfigError(f"bundle {RUNS}: cannot be read ({str(err)[:120]})") from None
    bad = [r for r in frame["run_id"] if not isinstance(r, str) or not RUN_ID.match(r)]
    if bad:
        raise BundleMismatch(f"bundle {RUNS}: run id {str(bad[0])!r} is not a run id (a path?): refused")
    repeated = frame["run_id"][frame["run_id"].duplicated()]
    if not repeated.empty:
        raise ConfigError(f"bundle {RUNS}: run {repeated.iloc[0]} has two rows: one run, one row")
    return frame


def _parse(data: bytes, path: Path) -> Any:
    """A bundle file's JSON (untrusted: :func:`washexp.inputs.parse_json`, nesting capped), or one line."""
    from washexp.inputs import parse_json

    try:
        return parse_json(data, path, max_depth=MAX_DEPTH)
    except FixtureError as err:
        raise ConfigError(str(err)) from None


def lists(uri: str, run_id: str, name: str) -> bool:
    """Whether the run's manifest names ``name``: a file the run wrote (a bundled run's manifest
    lists every artifact it has)."""
    return name in _manifests(str(folder(uri))).get(run_id, {})


def artifact(uri: str, run_id: str, name: str) -> bytes:
    """One artifact of one run, checked against the run's manifest. A mismatch names the file and
    both digests."""
    root = folder(uri)
    if not RUN_ID.match(run_id) or not FILE.match(name):
        raise BundleMismatch(f"bundle artifact {run_id}/{name}: not a plain run id and file name: refused")
    check_folder(root)  # still a plain folder at every read, as when the manifests were read
    manifests = _manifests(str(root))
    if run_id not in manifests:
        raise BundleMismatch(f"bundle artifact {run_id}/{name}: run {run_id} is not in the bundle's {RUNS}")
    listed = manifests[run_id].get(name)
    if listed is None:
        raise BundleMismatch(f"bundle artifact {run_id}/{name}: not in the run's manifest")
    data = read_safe(root, ("runs", run_id, *name.split("/")))
    if sha256_bytes(data) != listed:
        raise BundleMismatch(
            f"bundle artifact {run_id}/{name}: sha256 {sha256_bytes(data)} is not the manifest's {listed}"
        )
    return data


@lru_cache(maxsize=16)
def _manifests(root_text: str) -> dict[str, dict[str, str]]:
    """Each run's manifest (file name -> sha256), built once per bundle (until :func:`clear_cache`),
    so that reading an artifact is a lookup rather than a filter of the wide runs table."""
    runs = _runs(root_text, str(info(Path(root_text))["options"].get("experiment")))
    if runs is None:
        return {}
    names = [c for c in runs.columns if c.startswith(TAG)]
    return {
        row[0]: {c.removeprefix(TAG): v for c, v in zip(names, row[1:], strict=True) if isinstance(v, str)}
        for row in runs[["run_id", *names]].itertuples(index=False, name=None)
    }


def clear_cache() -> None:
    _runs.cache_clear()
    _manifests.cache_clear()
