"""SQLite stores in write-ahead-log mode: a commit appends to the log instead of waiting on the
disk several times (rollback journal, ``synchronous=FULL``).

MLflow commits several transactions per logged run; with the default journal each one costs
fsyncs, which on a busy disk was most of what tracking a run cost. In WAL mode with
``synchronous=NORMAL`` the database stays consistent after a crash; a power cut can lose the last
commits, which the runner's resume redoes (a run's identity is its config, not its row). WAL is
a property of the database file (MLflow's server and readers use it as is); it needs the file on
a local disk, not a network share.

:func:`check_store` reads a store file before MLflow opens it: MLflow makes a 0-byte file a new
empty store (orphaning the artifacts beside it), and retries a damaged one for about 100 s before
its traceback.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from pathlib import Path

from washexp.errors import ConfigError

_registered = False


def _on_connect(dbapi_connection, _record) -> None:
    if isinstance(dbapi_connection, sqlite3.Connection):
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()


def write_ahead_log() -> None:
    """Every SQLite connection SQLAlchemy opens from now on in this process uses WAL mode."""
    global _registered
    if not _registered:
        from sqlalchemy import event
        from sqlalchemy.engine import Engine

        event.listen(Engine, "connect", _on_connect)
        _registered = True


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
