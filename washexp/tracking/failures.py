"""A tracking store failing mid-run (full, gone read-only, damaged), said as washexp's one line.

:func:`store_failure` maps what the store raised (the database or the artifact folder) to a
:class:`StoreError`; MLflow's own logged traceback of the same exception is dropped
(:func:`tracebacks_are_our_line`), so a user reads one line, not a page.
"""

from __future__ import annotations

import logging

from washexp.errors import WashexpError, first_line


class StoreError(WashexpError):
    """The tracking store failed mid-run (full, gone read-only, damaged): one line, exit 1. The runs
    in progress end FAILED where the database can still be written (a full artifact folder); those
    it could not end stay RUNNING under this process, and the next start marks them KILLED."""


def store_failure(uri: str, err: BaseException, store_errors: tuple[type, ...] = ()) -> StoreError | None:
    """``err`` as a :class:`StoreError` when the store raised it: an ``OSError`` (the artifact
    folder, a trace the store did not keep) or one of ``store_errors``, the classes MLflow's public
    client raises for a failing store (the tracker's: ``MlflowException``). None for anything else,
    which is a bug and stays itself."""
    if not isinstance(err, (OSError, *store_errors)):
        return None
    root = err
    while (deeper := root.__cause__ or root.__context__) is not None:
        root = deeper
    reason = getattr(root, "strerror", None) or first_line(root)
    return StoreError(f"{uri}: the tracking store failed mid-run ({reason})")


class _NoTraceback(logging.Filter):
    """Drops an MLflow error that carries a traceback: the same exception reaches us and is
    reported as washexp's one line (a store failing mid-run was a page of traceback on stderr).
    MLflow's warnings and tracebackless errors still print on stderr as MLflow formats them."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.levelno >= logging.ERROR and record.exc_info)


def tracebacks_are_our_line() -> None:
    """On the handlers of ``mlflow``, the package logger MLflow documents (its modules' records
    reach them by propagation), never on a module's logger by name."""
    for handler in logging.getLogger("mlflow").handlers:
        if not any(isinstance(f, _NoTraceback) for f in handler.filters):
            handler.addFilter(_NoTraceback())
