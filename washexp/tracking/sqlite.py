"""SQLite stores in write-ahead-log mode: a commit appends to the log instead of waiting on the
disk several times (rollback journal).

MLflow commits several transactions per logged run; with the default journal each one costs
fsyncs, which on a busy disk was most of what tracking a run cost. WAL is a property of the
database file, set once by the child that makes a new store (:data:`_MAKE`), so MLflow's own
connections, its server and readers use it with no hook into MLflow's engine; it needs the file
on a local disk, not a network share.

:func:`check_store` reads a store file before MLflow opens it: MLflow makes a 0-byte file a new
empty store (orphaning the artifacts beside it), and retries a damaged one for about 100 s before
its traceback.

:func:`ensure_store` makes a new store whole or not at all. MLflow makes one by running its schema
migrations on the file, and Python's ``sqlite3`` commits each ``CREATE``, ``DROP`` and ``ALTER``
on its own: a first run killed among them left a store every later run failed on
(``table _alembic_tmp_params already exists``, ``duplicate column name: step``). So a new store is
made by a child process under a temporary name beside the final one (``.mlflow.db.creating-*``)
and linked to its name only once that child has exited 0; a killed creation leaves only a
temporary file, removed by the next run. A store cut short by a version before this one (a
migration's ``_alembic_tmp_`` table left, seen in SQLite's own catalogue) is refused in one line,
never removed or made again: only SQLite's own catalogue is read.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from washexp.errors import ConfigError


def store_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI (None for any other store)."""
    if not uri.startswith("sqlite:///"):
        return None
    return Path(uri.removeprefix("sqlite:///").partition("?")[0])


def check_store(uri: str, write: bool) -> None:
    """A SQLite store that exists is a whole MLflow database this process can read (and, with
    ``write``, write): else one line naming the file, before any work. A missing file is a new store."""
    path = store_path(uri)
    if path is None or not path.exists():
        return
    if path.is_file() and path.stat().st_size == 0:
        raise ConfigError(
            f"{path}: an empty file (0 bytes), not a tracking store; washexp will not make it a new one "
            "(the runs' artifacts beside it would be orphaned): move it away to start a new store"
        )
    if write:
        _check_writable(path)
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60)
        try:
            checked = con.execute("PRAGMA quick_check(1)").fetchone()[0]
            tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            con.close()
    except sqlite3.OperationalError as err:  # read-only, locked past the timeout, unopenable, full
        raise ConfigError(f"{path}: the tracking store cannot be {'written' if write else 'read'} ({err})") from None
    except sqlite3.DatabaseError as err:  # truncated, overwritten: not a whole SQLite database
        raise ConfigError(f"{path}: the tracking store is damaged ({err}); restore it from a copy") from None
    if checked != "ok":
        raise ConfigError(f"{path}: the tracking store is damaged ({checked}); restore it from a copy")
    if any(table.startswith(LEFTOVER) for table in tables):
        raise ConfigError(
            f"{path}: a tracking store whose making or upgrade was cut short (a {LEFTOVER}* table is left, "
            "left by an older washexp or a killed MLflow upgrade); move it away to start a new store"
        )
    if tables and "runs" not in tables:
        raise ConfigError(f"{path}: a SQLite file, but not an MLflow tracking store (it has no runs table)")


def _check_writable(path: Path) -> None:
    """The store, its write-ahead log and its folder (where SQLite and the lock make files) open for
    writing, as the OS says for this process: a permission bit says nothing to root, nor about a
    read-only mount; nothing is written."""
    try:
        for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            if file.exists():
                os.close(os.open(file, os.O_RDWR))
        with tempfile.TemporaryFile(dir=path.parent):
            pass
    except OSError as err:
        why = err.strerror or type(err).__name__
        raise ConfigError(f"{path}: the tracking store cannot be written ({why})") from None


CREATING = ".creating-"
"""A store being made is ``.<name>.creating-<random>`` beside its final name."""
LEFTOVER = "_alembic_tmp_"
"""The prefix of the table a migration rebuilds a table in: left only when one was killed midway."""


_MAKE = """import sqlite3
import sys
from mlflow.tracking import MlflowClient
MlflowClient("sqlite:///" + sys.argv[1]).search_experiments(max_results=1)
# WAL is a property of the file: set once here, every later connection (ours, MLflow's) uses it
sqlite3.connect(sys.argv[1]).execute("PRAGMA journal_mode=WAL").fetchone()
"""


def ensure_store(path: Path) -> None:
    """Called under the store's lock, before MLflow opens ``path``: leftovers of a killed creation
    are removed, and a missing store is made whole
    under a temporary name by a child process, then linked into place (never over a store that
    appeared meanwhile). A failure is one line (:class:`ConfigError`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob(f".{path.name}{CREATING}*"):
        stale.unlink(missing_ok=True)
    if path.exists():
        return
    temp = path.with_name(f".{path.name}{CREATING}{uuid.uuid4().hex[:12]}")
    try:
        done = subprocess.run(
            [sys.executable, "-c", _MAKE, str(temp)],
            capture_output=True,
            text=True,
            timeout=600,
            stdin=subprocess.DEVNULL,
        )
        if done.returncode != 0:
            why = next((line for line in reversed(done.stderr.splitlines()) if line.strip()), "")
            raise ConfigError(f"{path}: a new tracking store could not be made ({why.strip()[:300]})")
        fd = os.open(temp, os.O_RDONLY)
        try:
            os.fsync(fd)  # whole on the disk before it has its name
        finally:
            os.close(fd)
        with contextlib.suppress(FileExistsError):  # a store that appeared meanwhile is kept, not replaced
            os.link(temp, path)
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    finally:
        for file in path.parent.glob(f"{temp.name}*"):  # with its -journal, if any
            file.unlink(missing_ok=True)
