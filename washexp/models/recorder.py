"""The recorder: every request and its response, content-addressed, replayable offline.

A request's key is the sha256 of the canonical JSON (sorted keys, no spaces) of the model name,
messages, temperature, max_tokens, extra body, generation and answer index, the repeat index
when it is not 0 (``model.repeats``: every repeat its own recording; repeat 0 keeps the key a
request had before repeats existed), the structured output asked for and the draw series
(``ChatRequest.series``) when set. Its record lives at
``<dir>/<key[:2]>/<key>.json``; it holds the request and the response, never a key, header or
endpoint. A record is written to a temporary file in the same folder and then linked into place,
so a crash leaves no half file. A request is sent under a lock file beside its record: another
process (a parallel launcher's job) or thread asking the same request waits for that record and
replays it, so a request is paid for once. Should two writers still race on one key (a
filesystem that ignores the lock), the first link wins and the other adopts the winner's
response: every caller of a key sees the same answer.

A refusal for length (:class:`~washexp.models.base.OverWindow`) is a property of the request, so it
is recorded too, as ``"over_window": message`` in place of a response, and replays as the same
refusal.

Modes: ``auto`` replays what is recorded and calls the model for the rest; ``strict`` never
calls out and fails with the missing key.

Money (:mod:`washexp.models.cost`): with a price, each call this recorder sends costs what its
reply's usage says; a replay costs nothing. With a budget, a request's estimate is reserved before
it is sent (a request over the budget is never sent) and settled with its cost after.
:meth:`Recorder.charge` counts the calls behind a condition's recordings, each once.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any, NamedTuple

from washexp.errors import ConfigError, ModelError
from washexp.hashing import canonical_hash
from washexp.masking import mask
from washexp.models.base import ChatRequest, ChatResponse, Model, OverWindow
from washexp.models.cost import Budget, Charge, Price, RoleSpend, call_row

MODES = ("auto", "strict")


def request_key(model_name: str, request: ChatRequest) -> str:
    return canonical_hash({"model": model_name, **_request_dict(request)})


def _request_dict(request: ChatRequest) -> dict[str, Any]:
    return {
        "messages": list(request.messages),
        "temperature": request.temperature,
        "max_tokens": request.max_tokens,
        "extra_body": request.extra_body,
        "generation": request.generation,
        "answer": request.answer,
        **({"repeat": request.repeat} if request.repeat else {}),
        **({"response_format": request.response_format} if request.response_format else {}),
        **({"series": request.series} if request.series else {}),
    }


class Timing(NamedTuple):
    """How this process got a key's answer the first time it asked (a trace's latency)."""

    started_ns: int
    ended_ns: int
    replayed: bool
    """Answered from a recording (this process did not send it)."""


class Recorder:
    """A ``Model`` that answers from recordings first (``mode=auto``) or only (``strict``).

    ``model`` may be None in strict mode: nothing will be called.
    """

    def __init__(
        self,
        model: Model | None,
        model_name: str,
        directory: str | Path,
        mode: str = "auto",
        price: Price | None = None,
        budget: Budget | None = None,
    ):
        if mode not in MODES:
            raise ConfigError(f"endpoint.replay={mode!r}: expected one of {', '.join(MODES)}")
        self.model, self.model_name, self.mode = model, model_name, mode
        self.dir = Path(directory)
        self._lock = threading.Lock()
        self.calls = 0
        """Requests sent to the model by this recorder."""
        self.hits = 0
        """Requests answered from a recording."""
        self._seen: dict[str, dict] = {}  # key -> record, for records this process has used
        self._texts: dict[str, str] = {}  # key -> artifact text, made once per key (see artifact)
        self.price, self.budget = price, budget
        self._live: dict[str, float | None] = {}  # key -> cost of the call sent for it (None: unknown)
        self._charged: set[str] = set()  # keys a charge has counted
        self._timings: dict[str, Timing] = {}  # key -> its first answer in this process
        self._collecting = threading.local()  # the keys a unit of work asks, on its own thread

    def path(self, key: str) -> Path:
        return self.dir / key[:2] / f"{key}.json"

    def chat(self, request: ChatRequest, task_id: str | None = None, role: str = "") -> ChatResponse:
        started = time.time_ns()
        key = request_key(self.model_name, request)
        record, sent = self.load(key), False
        if record is None:
            if self.mode == "strict" or self.model is None:
                raise ModelError(
                    f"endpoint.replay=strict: no recording for request {key} "
                    f"({role or 'call'}{f' of task {task_id}' if task_id else ''}) "
                    f"in {self.dir}"
                )
            with self._sending(key):
                record = self.load(key)  # sent meanwhile by another process or thread
                if record is None:
                    entry = {"key": key, "model": self.model_name, "role": role, "request": _request_dict(request)}
                    cost = self._send(request, entry, role, task_id)
                    record, sent = self._write(key, entry), True
                    with self._lock:
                        self._live[key] = cost
        counter = "calls" if sent else "hits"
        with self._lock:
            setattr(self, counter, getattr(self, counter) + 1)
            self._seen[key] = record
            if key not in self._timings:
                self._timings[key] = Timing(started, time.time_ns(), not sent)
        collected = getattr(self._collecting, "keys", None)
        if collected is not None:
            collected.append(key)
        if "over_window" in record:
            where = f"{role or 'call'}{f' of task {task_id}' if task_id else ''}"
            raise OverWindow(f"{record['over_window']} ({where}, request {key[:12]})")
        return ChatResponse(**{**record["response"], "key": key})

    def _send(self, request: ChatRequest, entry: dict, role: str, task_id: str | None) -> float | None:
        """Send ``request`` (within the budget), fill ``entry``'s response or refusal; its cost."""
        assert self.model is not None  # chat() sends only with a model, else it raises ModelError
        held = None
        if self.budget is not None and self.price is not None:
            where = f"{role or 'call'}{f' of task {task_id}' if task_id else ''}"
            held = self.budget.reserve(self.price.estimate(request), where)
        cost: float | None = 0.0
        try:
            started = time.monotonic()
            try:
                response = self.model.chat(request)
            except OverWindow as err:  # refused for length: nothing was generated, nothing charged
                entry["over_window"] = str(err)
                return 0.0 if self.price is not None else None
            entry["response"] = {
                k: v for k, v in asdict(response).items() if k != "key" and not (k == "cached_tokens" and v is None)
            }
            # what the answer took, retries included: a replay reports what the first run spent
            entry["elapsed_s"] = round(time.monotonic() - started, 3)
            cost = self.price.cost(response) if self.price is not None else None
            return cost
        finally:
            if held is not None and self.budget is not None:  # a failed call costs 0; an unreported one its estimate
                self.budget.settle(held, held if cost is None else cost)

    def used(self) -> list[str]:
        """The keys this recorder has answered, in the order each was first asked."""
        with self._lock:
            return list(self._seen)

    def call_rows(self, keys) -> list[dict]:
        """What each call behind ``keys`` spent when it was made (:func:`~washexp.models.cost.call_row`),
        each key once, whichever run it was charged to: a run's ``calls.json`` table."""
        with self._lock:
            return [call_row(key, self._seen.get(key, {})) for key in dict.fromkeys(keys)]

    def charge(self, keys) -> Charge:
        """What the calls behind ``keys`` cost, each key counted once per recorder (in the first
        charge that names it): a call this recorder sent is live (its cost), any other recording
        replayed (0). ``cost_usd`` is None without a price or when a live reply had no usage.
        Per role, what the calls spent when they were made (tokens and time, as recorded), live or
        replayed: a replayed record still says what its protocol costs."""
        live = replayed = unpriced = 0
        costs: list[float] = []
        roles: dict[str, RoleSpend] = {}
        with self._lock:
            for key in dict.fromkeys(keys):
                if key in self._charged:
                    continue
                self._charged.add(key)
                row = call_row(key, self._seen.get(key, {}))
                roles.setdefault(row["role"], RoleSpend()).add(row)
                if key in self._live:
                    live += 1
                    cost = self._live[key]
                    if cost is not None:
                        costs.append(cost)
                    elif self.price is not None:
                        unpriced += 1
                else:
                    replayed += 1
        total = math.fsum(costs) if self.price is not None and not unpriced else None
        return Charge(total, live, replayed, unpriced, roles)

    @contextmanager
    def collecting(self) -> Iterator[list[str]]:
        """The keys this thread asks for inside the block, in order (a wash condition's calls)."""
        previous = getattr(self._collecting, "keys", None)
        keys: list[str] = []
        self._collecting.keys = keys
        try:
            yield keys
        finally:
            self._collecting.keys = previous

    def timing(self, key: str) -> Timing | None:
        """When this process first asked for ``key`` and got its answer, and how (None: never)."""
        return self._timings.get(key)

    def cost_of(self, key: str) -> float | None:
        """What the call this recorder sent for ``key`` cost (None: replayed, unpriced or unreported)."""
        with self._lock:
            return self._live.get(key)

    def close(self) -> None:
        """Stop calling out (an in-flight retry gives up); replays still answer."""
        close = getattr(self.model, "close", None)
        if close:
            close()

    def artifact(self, key: str) -> str | None:
        """The recording as a run artifact: its JSON indented by one, keys in stored order. Made
        once per key and process: a panel logs one summary's recording in a dozen conditions."""
        text = self._texts.get(key)
        if text is None:
            record = self.load(key)
            if record is None:
                return None
            text = self._texts.setdefault(key, json.dumps(record, indent=1, ensure_ascii=False) + "\n")
        return text

    @contextmanager
    def _sending(self, key: str) -> Iterator[None]:
        """Hold the request's lock file while it is sent and recorded (``flock``: a waiter wakes
        the moment it is let go; filelock's polling cost 3 ms a request). The file is removed
        before the lock is let go: a waiter then finds the record and replays it, and a later
        caller finds the record without locking."""
        import fcntl

        lock = self.path(key).with_suffix(".lock")
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                lock.unlink(missing_ok=True)
        finally:
            os.close(fd)  # lets the lock go

    def load(self, key: str) -> dict | None:
        if key in self._seen:  # a record never changes once written
            return self._seen[key]
        path = self.path(key)
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except json.JSONDecodeError as err:
            raise ModelError(f"{path}: not a valid recording ({err.msg}); delete it to ask the model again") from None

    def _write(self, key: str, record: dict) -> dict:
        target = self.path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        data = mask(json.dumps(record, indent=1, ensure_ascii=False, sort_keys=True) + "\n")
        fd, tmp = tempfile.mkstemp(prefix=f".{key[:12]}-", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, target)  # atomic and never clobbers: the first writer wins
            except FileExistsError:
                return self.load(key) or record
            except OSError:  # a filesystem without hard links: atomic, last writer wins
                os.replace(tmp, target)
            return json.loads(data)  # as a later process reads it: a request artifact is the same bytes
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
