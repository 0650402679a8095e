"""SQLite stores in write-ahead-log mode: a commit appends to the log instead of waiting on the
disk several times (rollback journal, ``synchronous=FULL``).

MLflow commits several transactions per logged run; with the default journal each one costs
fsyncs, which on a busy disk was most of what tracking a run cost. In WAL mode with
``synchronous=NORMAL`` the database stays consistent after a crash; a power cut can lose the last
commits, which the runner's resume redoes (a run's identity is its config, not its row). WAL is
a property of the database file (MLflow's server and readers use it as is); it needs the file on
a local disk, not a network share.
"""

from __future__ import annotations

import sqlite3

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
