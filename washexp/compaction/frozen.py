"""What every condition of a task shares for one generation: S, the Jev scores and H.

They are produced once per task and generation and kept for the sweep, so they are
byte-identical across every N (an LLM backend's recorder freezes them across processes as well).
The cache lives as long as the roles that fill it: one per sweep, passed in.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from washexp.compaction import h_native
from washexp.compaction.checkpoint import Checkpoint
from washexp.compaction.context import to_wire
from washexp.compaction.fixtures import Task
from washexp.compaction.roles import RankJob, Roles, SummaryJob
from washexp.errors import ConfigError

H_IMPLS = ("native", "hermes")


@dataclass
class Frozen:
    """One task's generation: the S summary, the Jev scores, H by implementation."""

    s_summary: str
    scores: list[float]
    keys: tuple[str, ...]
    """The recordings behind S and the scores (every arm's sizes depend on them)."""
    h: dict[str, Checkpoint] = field(default_factory=dict)


def h_impl_for(roles: Roles, requested: str) -> str:
    """``method.h_impl`` resolved: ``auto`` is the real Hermes when the backend has it."""
    if requested == "auto":
        return "hermes" if roles.hermes_checkpoint else "native"
    if requested not in H_IMPLS:
        raise ConfigError(f"method.h_impl={requested!r}: expected auto, native or hermes")
    if requested == "hermes" and roles.hermes_checkpoint is None:
        raise ConfigError("method.h_impl=hermes needs an LLM backend (model=openai) and hermes-agent")
    return requested


class FrozenCache:
    """S, Jev and H per (task, generation), computed once for the roles it was made with."""

    def __init__(self, roles: Roles):
        self.roles = roles
        self._items: dict[tuple[str, int], Frozen] = {}
        self._locks: dict[tuple, threading.Lock] = {}
        self._guard = threading.Lock()

    def _lock(self, key: tuple) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def get(self, task: Task, generation: int, allowance: int) -> Frozen:
        key = (task.digest, generation)
        with self._lock(key):
            if key not in self._items:
                s = self.roles.summarize(SummaryJob(task.id, task.query, task.units, allowance, generation))
                ranking = self.roles.rank(RankJob(task.id, task.query, task.units, generation))
                if len(ranking.scores) != len(task.units):
                    raise ValueError(f"ranker returned {len(ranking.scores)} scores for {len(task.units)} units")
                keys = tuple(k for k in (s.key, ranking.key) if k)
                self._items[key] = Frozen(s_summary=s.text.strip(), scores=ranking.scores, keys=keys)
            return self._items[key]

    def checkpoint(self, task: Task, generation: int, allowance: int, impl: str) -> Checkpoint:
        """H of one generation; it sees only the pre-final evidence history, with the original
        task as its focus."""
        frozen = self.get(task, generation, allowance)
        with self._lock((task.digest, generation, impl)):
            if impl not in frozen.h:
                if impl == "hermes":
                    turns = [to_wire(m) for m in task.history]
                    cp = self.roles.hermes_checkpoint(task.id, generation, turns, task.query, allowance)
                else:
                    writer = self.roles.checkpoint_writer(task.id, generation)
                    cp = h_native.generate_checkpoint(list(task.history), task.query, allowance, writer)
                frozen.h[impl] = cp
            return frozen.h[impl]
