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

:func:`ensure_store` makes a new store whole or not at all. MLflow makes one by running its schema
migrations on the file, and Python's ``sqlite3`` commits each ``CREATE``, ``DROP`` and ``ALTER``
on its own: a first run killed among them left a store every later run failed on
(``table _alembic_tmp_params already exists``, ``duplicate column name: step``). So a new store is
made by a child process under a temporary name beside the final one (``.mlflow.db.creating-*``)
and linked to its name only once that child has exited 0; a killed creation leaves only a
temporary file, removed by the next run. A *half-made* store (:func:`half_made`, left by a version
before this one) that holds nothing is removed and made again; a store that holds a run is never
removed.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import uuid
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
    if half_made(path):
        if write:
            return  # made again, under the store's lock, before MLflow opens it (ensure_store)
        raise ConfigError(
            f"{path}: a tracking store whose making was cut short, holding no run; the next run remakes it"
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


_REVISION = re.compile(r"^(down_)?revision\s*(?::[^=]*)?=\s*(.+)$", re.M)
_QUOTED = re.compile(r"""['"]([0-9a-f]+)['"]""")


@functools.cache
def schema_head() -> str | None:
    """The alembic revision a store made by the installed MLflow is at: the one migration no
    other names as its ``down_revision``. Read from the files; None when they cannot be found."""
    spec = importlib.util.find_spec("mlflow")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(spec.submodule_search_locations[0]) / "store" / "db_migrations" / "versions"
    revisions, parents = set(), set()
    for file in folder.glob("*.py"):
        for down, value in _REVISION.findall(file.read_text(encoding="utf-8")):
            (parents if down else revisions).update(_QUOTED.findall(value))
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


CREATING = ".creating-"
"""A store being made is ``.<name>.creating-<random>`` beside its final name."""
EMPTY_OK = {"alembic_version", "experiments", "experiment_tags"}
"""Tables a half-made store may have rows in (the Default experiment, the migration's revision)."""


def half_made(path: Path) -> bool:
    """A store whose making was cut short and that holds nothing: MLflow's (an ``experiments``,
    ``alembic_version`` or ``_alembic_tmp_`` table), its schema not whole (a migration's
    ``_alembic_tmp_`` table left, no ``alembic_version``, or a revision other than the installed
    MLflow's head, whose migration it was in the middle of), and no table has a row but the
    Default experiment (id 0) and the revision. False for anything else, or what cannot be read."""
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60)
    except sqlite3.Error:
        return False
    try:
        tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables & {"experiments", "alembic_version"} and not any(t.startswith("_alembic_tmp_") for t in tables):
            return False  # not MLflow's (or no table yet: MLflow makes an empty database a store)
        versions = (
            [row[0] for row in con.execute("SELECT version_num FROM alembic_version")]
            if ("alembic_version" in tables)
            else []
        )
        head = schema_head()
        cut = any(t.startswith("_alembic_tmp_") for t in tables) or not versions or (head and versions != [head])
        if not cut:
            return False
        for table in sorted(tables - EMPTY_OK):
            if not table.startswith("_alembic_tmp_") and con.execute(f'SELECT 1 FROM "{table}" LIMIT 1').fetchone():
                return False
        others = "experiments" in tables and con.execute("SELECT 1 FROM experiments WHERE experiment_id != 0")
        return not (others and others.fetchone())
    except sqlite3.Error:
        return False
    finally:
        con.close()


_MAKE = """import sys
from mlflow.tracking import MlflowClient
MlflowClient(sys.argv[1]).search_experiments(max_results=1)
"""


def ensure_store(path: Path) -> None:
    """Called under the store's lock, before MLflow opens ``path``: leftovers of a killed creation
    are removed, a half-made store that holds nothing too, and a missing store is made whole
    under a temporary name by a child process, then linked into place (never over a store that
    appeared meanwhile). A failure is one line (:class:`ConfigError`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob(f".{path.name}{CREATING}*"):
        stale.unlink(missing_ok=True)
    if path.exists() and half_made(path):
        for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            file.unlink(missing_ok=True)
    if path.exists():
        return
    temp = path.with_name(f".{path.name}{CREATING}{uuid.uuid4().hex[:12]}")
    try:
        done = subprocess.run(
            [sys.executable, "-c", _MAKE, f"sqlite:///{temp}"],
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
