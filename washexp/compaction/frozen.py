"""What the conditions of a task share for one generation: S, the Jev scores and H, each on its own.

Each is produced once per task and generation and kept for the sweep, so it is byte-identical
across every N (an LLM backend's recorder freezes it across processes as well). Each is made
independently of the others: a reply a role cannot use (a
:class:`~washexp.compaction.backends.roles.ReplyError`, raised only where a reply is read, e.g. a malformed
ranking) is kept as that part's failure, and only the contexts of that generation that use the
part fail (Full uses none of them, Top 0 no ranking). An unreachable model (``ModelError``) is
not a reply: it propagates and stops the run; so does any other exception (a bug in washexp fails
its run, it never becomes a low score). The cache lives as long as the roles that fill it:
one per sweep, passed in.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from washexp.compaction.backends.reference import bm25_scores
from washexp.compaction.backends.roles import Ranking, RankJob, ReplyError, Roles, SummaryJob
from washexp.compaction.inputs.context import to_wire
from washexp.compaction.inputs.fixtures import Task
from washexp.compaction.methods import h_hermes, h_native
from washexp.compaction.methods.checkpoint import Checkpoint
from washexp.errors import ConfigError

H_IMPLS = ("native", "hermes")
RANKERS = ("jev", "bm25")
"""What ranks the Top-N units (``ranker=``): the model's Jev role, or model-free BM25."""
T = TypeVar("T")


@dataclass(frozen=True)
class Made(Generic[T]):
    """One part of a generation: its value, or why the role's reply could not be used."""

    value: T | None
    failure: str | None = None
    keys: tuple[str, ...] = ()
    """The recordings behind it (the failed reply's too)."""

    @property
    def ok(self) -> bool:
        return self.failure is None


def h_impl_for(roles: Roles, requested: str) -> str:
    """``method.h_impl``: ``native`` (the study's H, the default) or ``hermes`` (as installed)."""
    if requested == "auto":
        raise ConfigError(
            "method.h_impl=auto is gone: the study's H is method.h_impl=native (the default); "
            "method.h_impl=hermes runs hermes-agent as installed"
        )
    if requested not in H_IMPLS:
        raise ConfigError(f"method.h_impl={requested!r}: expected native or hermes")
    if requested == "hermes" and roles.hermes_checkpoint is None:
        raise ConfigError("method.h_impl=hermes needs an LLM backend (model=openai) and hermes-agent")
    return requested


def h_label(impl: str) -> str:
    """What H is, as params and records name it."""
    if impl == "native":
        return f"{h_native.PROTOCOL} (the study's H: washexp's implementation of tail_mode=legacy)"
    return f"hermes-agent {h_hermes.version()} as installed (compressor sha256 {h_hermes.source_sha256()})"


def _made(role: str, make: Callable[[], T], keys: Callable[[T], tuple[str, ...]]) -> Made[T]:
    try:
        value = make()
    except ReplyError as err:
        return Made(None, f"{role}: {err}", (err.key,) if err.key else ())
    return Made(value, None, keys(value))


class FrozenCache:
    """S, Jev and H per (task, generation), each computed once for the roles it was made with."""

    def __init__(self, roles: Roles):
        self.roles = roles
        self._items: dict[tuple, Made] = {}
        self._locks: dict[tuple, threading.Lock] = {}
        self._guard = threading.Lock()

    def once(self, key: tuple, make: Callable[[], Made]) -> Made:
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._items:
                self._items[key] = make()
            return self._items[key]

    def summary(self, task: Task, generation: int, allowance: int) -> Made[str]:
        def make() -> Made[str]:
            job = SummaryJob(task.id, task.query, task.units, allowance, generation)
            reply = _made("S", lambda: self.roles.summarize(job), lambda r: (r.key,) if r.key else ())
            if not reply.ok or reply.value is None:
                return Made(None, reply.failure, reply.keys)
            return Made(reply.value.text.strip(), None, reply.keys)

        return self.once(("S", task.digest, generation, allowance), make)

    def ranking(self, task: Task, generation: int, ranker: str = "jev") -> Made[list[float]]:
        """The unit scores of one generation: Jev's (the rank role) or ``bm25``'s (model-free, the
        same for every generation and backend; it sees the task's query and units only)."""
        if ranker == "bm25":
            job = RankJob(task.id, task.query, task.units, 0)
            return self.once(("bm25", task.digest), lambda: Made(bm25_scores(job)))

        def rank() -> Ranking:
            ranking = self.roles.rank(RankJob(task.id, task.query, task.units, generation))
            if len(ranking.scores) != len(task.units):
                raise ReplyError(
                    f"ranker returned {len(ranking.scores)} scores for {len(task.units)} units", ranking.key
                )
            return ranking

        def make() -> Made[list[float]]:
            made = _made("Jev", rank, lambda r: (r.key,) if r.key else ())
            if not made.ok or made.value is None:
                return Made(None, made.failure, made.keys)
            return Made(made.value.scores, None, made.keys)

        return self.once(("Jev", task.digest, generation), make)

    def checkpoint(self, task: Task, generation: int, allowance: int, impl: str) -> Made[Checkpoint]:
        """H of one generation; it sees only the pre-final evidence history, with the original
        task as its focus."""

        def write() -> Checkpoint:
            if impl == "hermes":
                turns = [to_wire(m) for m in task.history]
                assert self.roles.hermes_checkpoint is not None  # h_impl_for refused hermes without it
                return self.roles.hermes_checkpoint(task.id, generation, turns, task.query, allowance)
            writer = self.roles.checkpoint_writer(task.id, generation)
            return h_native.generate_checkpoint(list(task.history), task.query, allowance, writer)

        return self.once(("H", task.digest, generation, allowance, impl), lambda: _made("H", write, lambda c: c.keys))
