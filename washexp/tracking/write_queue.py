"""The writer thread: a run's writes handed over and stored in the order they were closed."""

from __future__ import annotations

import queue
import threading


class WriteQueue:
    """One daemon thread running writes in the order they were handed over. At most ``BACKLOG``
    closes wait: a sweep that computes faster than its store writes waits for the store, so a
    stop never waits on a long queue and a kill loses little (a run's creation, handed over while
    the store is still being set up, is small and never waits). Each write names the identity it
    stores, so a lookup waits only when its own identity is still on the way."""

    BACKLOG = 4

    def __init__(self) -> None:
        self._queue: queue.Queue = queue.Queue()
        self._room = threading.BoundedSemaphore(self.BACKLOG)
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._pending: dict[str, int] = {}

    def submit(self, key: str, write, bounded: bool = True, closing: bool = False) -> None:
        """Hand ``write`` over; raise an earlier write's failure. A ``closing`` write (a run's end)
        is handed over first and the failure raised after: a run whose store failed (a full disk)
        still ends FAILED where the store can still be written, never left RUNNING."""
        if not closing:
            self._raise()
        self._put(key, write, bounded)
        if closing:
            self._raise()

    def _put(self, key: str, write, bounded: bool) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="washexp-tracking-writer", daemon=True)
            self._thread.start()
        if bounded:
            self._room.acquire()
        with self._lock:
            self._pending[key] = self._pending.get(key, 0) + 1
        self._queue.put((key, write, bounded))

    def drain(self) -> None:
        """Wait until every write handed over is stored; raise the first that failed."""
        self._queue.join()
        self._raise()

    def wait_for(self, key: str) -> None:
        """Wait for the writes before and of ``key`` if one is still queued; raise a failure."""
        with self._lock:
            queued = key in self._pending
        if queued:
            self._queue.join()
        self._raise()

    def _raise(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise error

    def _loop(self) -> None:
        while True:
            key, write, bounded = self._queue.get()
            try:
                write()
            except BaseException as err:  # reported to the calling thread, never lost
                self._error = self._error or err
            finally:
                with self._lock:
                    self._pending[key] -= 1
                    if not self._pending[key]:
                        del self._pending[key]
                if bounded:
                    self._room.release()
                self._queue.task_done()
