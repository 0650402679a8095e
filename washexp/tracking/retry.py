"""Several processes writing one SQLite store (``hydra/launcher=joblib``): retry what it refuses.

SQLite allows one writer at a time. A writer that waits longer than the driver's busy timeout,
or one whose read transaction must become a write while another process writes (SQLite answers
that at once, a busy wait would deadlock), gets ``database is locked``. MLflow's SQLAlchemy store
rolls the transaction back and raises, so the same call can simply be made again: every call
retried here is one transaction, and a refused one wrote nothing.
"""

from __future__ import annotations

import functools
import logging
import random
import time
from typing import Any

log = logging.getLogger("washexp")

LOCKED = ("database is locked", "database table is locked")
PATIENCE_S = 120.0
"""How long one call keeps trying before its error goes up (a sweep's writes are short)."""


def is_locked(err: BaseException) -> bool:
    """``database is locked`` anywhere in the chain (MLflow wraps SQLAlchemy wraps sqlite3)."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if any(text in str(err) for text in LOCKED):
            return True
        err = err.__cause__ or err.__context__
    return False


def retrying(call, *args, patience_s: float = PATIENCE_S, **kwargs) -> Any:
    """``call(*args, **kwargs)``, made again after a short, growing, jittered pause while SQLite
    answers ``database is locked``."""
    deadline = time.monotonic() + patience_s
    pause = 0.05
    while True:
        try:
            return call(*args, **kwargs)
        except Exception as err:
            if not is_locked(err) or time.monotonic() + pause > deadline:
                raise
            log.debug("%s: database is locked; retrying in %.2f s", getattr(call, "__name__", call), pause)
            time.sleep(pause * (0.5 + random.random()))  # jitter: two waiting writers do not collide again
            pause = min(pause * 2, 2.0)


def patient(client) -> None:
    """Make every call of ``client``'s SQLite store go through :func:`retrying`.

    The retry sits on the store, not the client: one store call is one transaction, while one
    client call may be several (``log_table`` writes its file, then tags the run; retrying it
    whole would append the table twice). MLflow keeps one store per URI in a process, so this
    wraps that store once. The store is reached through MLflow's private ``_tracking_client``;
    when that is not there (another MLflow, a server URI), nothing changes.
    """
    store = getattr(getattr(client, "_tracking_client", None), "store", None)
    if store is None or getattr(store, "_washexp_patient", False) or "sqlite" not in str(getattr(store, "db_uri", "")):
        return
    for name in dir(type(store)):
        if name.startswith("_") or not callable(getattr(type(store), name, None)):
            continue
        setattr(store, name, functools.partial(retrying, getattr(store, name)))
    store._washexp_patient = True
