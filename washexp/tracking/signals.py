"""Ctrl-C and SIGTERM held while a run is created or closed, then delivered: a run is never left
half-written."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def holding(held: list) -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM while a run is created or closed (``held`` collects them, with the
    handlers to deliver them to): a run is never left half-written. ``deliver(held)`` after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {s: signal.getsignal(s) for s in signals}
    for s in signals:
        signal.signal(s, lambda n, _f: held.append((n, previous[signal.Signals(n)])))
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def deliver(held: list) -> None:
    """Raise the first held signal as its handler would have (Ctrl-C: ``KeyboardInterrupt``)."""
    for n, handler in held[:1]:
        if callable(handler):
            handler(n, None)
        elif n == signal.SIGINT:
            raise KeyboardInterrupt
