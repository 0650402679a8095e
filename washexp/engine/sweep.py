"""What the jobs of one command share, in each process that runs them.

With Hydra's basic launcher every job runs in the launching process and shares one
:class:`Sweep`. A parallel launcher (``hydra/launcher=joblib``, Ray, submitit) ships the job
function, and with it the sweep, to worker processes, and a pickled copy would be a different
sweep for every job: roles and frozen summaries built again per job, a local model server started
per job and never stopped, and error lines and exit codes lost with the copy. So a shipped sweep
carries only its project root and an *outbox* (a folder in the Hydra sweep dir, shared with the
workers), and each worker keeps one sweep of its own for all the jobs it runs
(:meth:`Sweep.here`): it is closed when the worker exits, and after each job it writes its error
lines and exit code to the outbox, which the launching process reads back (:meth:`Sweep.collect`).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from washexp.engine.ledger import Entry
from washexp.engine.runner import Schedule

_STOPS: list[BaseException] = []
"""The stops signals asked for in this command. Python drops an exception raised inside a
finalizer (``Exception ignored in ...``), and a handler can run in one: its stop would be lost and
the command would go on and end 0. So each stop is also kept here and raised again at the next
check (:func:`raise_if_stopped`: the schedule's loop, each job's start, the command's end)."""


INTERRUPTED, TERMINATED = 130, 143
"""The exit codes of a command stopped by Ctrl-C or SIGTERM: the shell's own (128 + the signal)."""
STOPS = {INTERRUPTED: "Ctrl-C", TERMINATED: "SIGTERM"}
"""Each stop's exit code, and the word a user knows it by."""


def sigterm_as_exit(*_):
    raise _stop(SystemExit(TERMINATED))  # unwinds like Ctrl-C: open runs end KILLED, servers stop


def sigint_as_interrupt(*_):
    raise _stop(KeyboardInterrupt())


def _stop(err: BaseException) -> BaseException:
    _STOPS.append(err)
    return err


def raise_if_stopped() -> None:
    """Raise again a stop a signal asked for, in case its own exception was dropped."""
    if _STOPS:
        raise type(_STOPS[0])(*_STOPS[0].args)


def watch_stops() -> None:
    """A new command: no stop asked for yet (a test may run several in one process)."""
    _STOPS.clear()


@dataclass
class Sweep:
    """What the jobs of one command share, for as long as the command (or a worker) runs."""

    root: Path
    errors: list[str] = field(default_factory=list)
    """One line per job that ended in a user error (a multirun goes on with its other jobs)..."""
    exit_code: int = 0
    endpoint_down: str | None = None
    """...unless the model endpoint is unusable: then the remaining jobs are skipped."""
    ledger: list[Entry] = field(default_factory=list)
    """Each arm or measurement that ended: where its runs went (what the command prints last)."""
    outbox: Path | None = None
    """Where worker processes report; made when the sweep is first shipped to one."""
    schedule: Schedule = field(default_factory=lambda: Schedule(check=raise_if_stopped))
    """The groups (arms) jobs handed over and left running (``runner.start_group``): the next job
    starts while one ends; :meth:`drain` runs them to their end once the jobs are over."""
    _shared: dict[Any, Any] = field(default_factory=dict)
    _home: int = field(default_factory=os.getpid)
    """The process this sweep belongs to; a copy unpickled elsewhere has none (0)."""

    def shared(self, key: Any, make):
        """The object ``make()`` built the first time ``key`` was asked for in this sweep."""
        if key not in self._shared:
            self._shared[key] = make()
        return self._shared[key]

    def fail(self, line: str, code: int) -> None:
        self.errors.append(line)
        self.exit_code = max(self.exit_code, code)

    def drain(self) -> None:
        """Run what the jobs left running to its end."""
        self.schedule.drain()

    def flush(self) -> None:
        """Wait until what the jobs handed to a store is stored (``flush`` of each shared value
        that has one); raise the first failure."""
        for value in list(self._shared.values()):
            flush = getattr(value, "flush", None)
            if flush:
                flush()

    def close(self) -> None:
        """End runs still open (KILLED: the command stopped), then close what the jobs shared
        (servers, pools, the tracker's writes), each even if one before it fails (that failure is
        raised after); a second call does nothing."""
        self.schedule.close()
        shared, self._shared = self._shared, {}
        failed: list[Exception] = []
        for value in shared.values():
            close = getattr(value, "close", None)
            if close:
                try:
                    close()
                except Exception as err:  # each must get its turn
                    failed.append(err)
        if failed:
            raise failed[0]

    # -- across processes ---------------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        """Shipped to a worker: only the root and the outbox travel (see the module doc)."""
        if self.outbox is None:
            self.outbox = _new_outbox()
        return {"root": self.root, "outbox": self.outbox}

    def __setstate__(self, state: dict[str, Any]) -> None:
        Sweep.__init__(self, state["root"], outbox=state["outbox"], _home=0)

    def here(self) -> Sweep:
        """The sweep the jobs of this process share: this one in the process that made it, in a
        worker the worker's own (one per shipped sweep, closed when the worker exits)."""
        if self._home == os.getpid():
            return self
        assert self.outbox is not None  # a shipped sweep carries its outbox (__getstate__)
        with _WORKER_GUARD:
            local = _WORKER_SWEEPS.get(self.outbox)
            if local is None:
                local = _WORKER_SWEEPS[self.outbox] = Sweep(self.root, outbox=self.outbox)
                atexit.register(local.close)
                if threading.current_thread() is threading.main_thread():
                    signal.signal(signal.SIGTERM, sigterm_as_exit)  # a stopped worker ends its runs KILLED
        return local

    def report(self) -> None:
        """In a worker: write this process's error lines and exit code so far to the outbox
        (one file per process, replaced whole)."""
        if self.outbox is None:
            return
        ledger = [e.to_dict() for e in self.ledger]
        data = json.dumps({"errors": self.errors, "exit_code": self.exit_code, "ledger": ledger})
        fd, tmp = tempfile.mkstemp(dir=self.outbox, prefix=".tmp-")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(data)
        os.replace(tmp, self.outbox / f"{os.getpid()}.json")

    def collect(self) -> None:
        """In the launching process, once the jobs are over: take in what the workers reported,
        then remove the outbox."""
        if self.outbox is None:
            return
        for path in sorted(self.outbox.glob("*.json")):
            report = json.loads(path.read_text(encoding="utf-8"))
            self.errors.extend(report["errors"])
            self.exit_code = max(self.exit_code, report["exit_code"])
            self.ledger.extend(Entry(**e) for e in report["ledger"])
        shutil.rmtree(self.outbox, ignore_errors=True)
        self.outbox = None


_WORKER_SWEEPS: dict[Path, Sweep] = {}
"""A worker process's own sweeps, by outbox: process-wide by nature (a worker's jobs arrive as
separate pickled copies), so this is the one place a sweep is kept in a module global."""
_WORKER_GUARD = threading.Lock()


def _new_outbox() -> Path:
    """A fresh folder in the Hydra sweep dir (a cluster's workers see it), else in the temp dir."""
    try:
        from hydra.core.hydra_config import HydraConfig

        base = Path(HydraConfig.get().sweep.dir).resolve()
    except ValueError:  # "HydraConfig was not set": not inside a Hydra run
        base = Path(tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=".washexp-jobs-", dir=base))
