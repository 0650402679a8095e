"""The roles a compaction condition needs, and the backends that fill them.

Each role is one call with a small value in and a small value out:

- summarize (S): every source unit once, within the allowance -> a reply (the summary text);
- rank (Jev): the initial task and the units only -> one score per unit;
- checkpoint writer (H): a checkpoint request -> raw checkpoint text (see ``compaction.h_native``);
- read: a complete context -> one reply (``None`` for a backend that has no reader).

Replies carry the key of the recording behind them (``ChatResponse.key``), so a condition
collects the requests it used instead of guessing them afterwards. A backend
(``model.backend``) builds all roles from the model and endpoint config; ``reference`` is the
offline deterministic baseline, never a stand-in for a chat model. What a run logs and hashes
is :meth:`Roles.spec_for` the roles its condition calls: the backend and its arguments
(``spec``) and each called role's own (``parts``: a prompt's sha256, hermes-agent's version),
never a secret and never a role the condition does not call. Roles live for one sweep:
``close()`` releases the call pool.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from washexp.compaction.inputs.fixtures import Unit
from washexp.compaction.inputs.meter import Meter, local_meter
from washexp.compaction.methods.checkpoint import Checkpoint
from washexp.compaction.methods.h_native import Writer
from washexp.models.base import ChatResponse
from washexp.registry import Registry


@dataclass(frozen=True)
class SummaryJob:
    task_id: str
    query: str
    units: tuple[Unit, ...]
    allowance: int
    generation: int


@dataclass(frozen=True)
class RankJob:
    task_id: str
    query: str
    units: tuple[Unit, ...]
    generation: int


@dataclass(frozen=True)
class ReadJob:
    task_id: str
    messages: tuple[dict, ...]
    generation: int
    answer: int
    repeat: int = 0
    """Which rerun of the answering step (``model.repeats``); each is its own recorded call."""
    fields: tuple[str, ...] = ()
    """The task's fact keys (names only): the reader's structured output is built from them."""


@dataclass(frozen=True)
class Ranking:
    scores: list[float]
    key: str | None = None
    """The recording behind the scores (None for the offline ranker)."""


class ReplyError(ValueError):
    """A role's reply that cannot be used (an empty summary, a malformed ranking). It fails only
    the contexts of its generation that use that role; ``key`` names the recording behind it."""

    def __init__(self, message: str, key: str | None = None):
        super().__init__(message)
        self.key = key


def offline(text: str) -> ChatResponse:
    """A reference role's output as a reply: no endpoint, no tokens counted, no recording."""
    return ChatResponse(text=text, prompt_tokens=None, completion_tokens=None, finish_reason=None)


ROLE_NAMES = ("summarize", "rank", "checkpoint", "hermes", "read")
"""The parts a backend may spec; ``hermes`` is hermes-agent's compressor (``method.h_impl=hermes``)."""


@dataclass(frozen=True)
class Roles:
    spec: dict[str, Any]
    """What every role shares: the backend and the model's arguments (a served model's file)."""
    parts: dict[str, Any] = field(default_factory=dict, kw_only=True)
    """role (one of :data:`ROLE_NAMES`) -> what that role is beyond ``spec`` (its prompt's sha256...)."""
    summarize: Callable[[SummaryJob], ChatResponse]
    rank: Callable[[RankJob], Ranking]
    checkpoint_writer: Callable[[str, int], Writer]
    """(task id, generation) -> the writer H calls for that generation."""
    read: Callable[[ReadJob], ChatResponse] | None = None
    concurrency: int = 1
    """How many conditions may compute at once (an endpoint's parallelism; 1 offline)."""
    recording: Callable[[str], str | None] | None = None
    """key -> the recorded request and response as the text of a condition's ``requests/<key>.json``."""
    hermes_checkpoint: Callable[[str, int, list[dict], str, int], Checkpoint] | None = None
    """hermes-agent's compressor as installed (task id, generation, turns, focus, allowance),
    when the backend has it; only ``method.h_impl=hermes`` uses it."""
    meter: Meter = field(default_factory=local_meter, compare=False)
    """Counts a context as its endpoint will, before it is sent (H's "fewer than Full" check)."""
    chat: Callable[[str, int, list[dict], str], ChatResponse] | None = None
    """(task id, generation, messages, role) -> one recorded call of the configured model, for a
    plugin method; None on a backend without a chat model (the offline reference)."""
    calls: Callable[[], str] | None = None
    """A short account of the model calls so far (made, replayed), for progress lines."""
    pool: ThreadPoolExecutor | None = field(default=None, compare=False)
    """The model calls of every condition share it, so an endpoint stays busy while a
    condition waits on its summaries or answers; None offline (calls run in order)."""
    logs: Callable[[], dict[str, str]] | None = None
    """name -> text a backend keeps beside its calls since the last ask (the local server's log),
    logged with each arm run."""

    def spec_for(self, calls: set[str]) -> dict[str, Any]:
        """The spec of the roles a condition calls: ``spec`` and the ``parts`` of ``calls``."""
        unknown = calls - set(ROLE_NAMES)
        if unknown:
            raise ValueError(f"unknown roles {sorted(unknown)}")
        return {**self.spec, "roles": {r: self.parts[r] for r in ROLE_NAMES if r in calls and r in self.parts}}

    def each(self, fn: Callable[[int], Any], n: int) -> list[Any]:
        """``fn(g)`` for g in 0..n-1, through the pool when there is one. ``fn`` must not itself
        wait on the pool."""
        if self.pool is None:
            return [fn(g) for g in range(n)]
        return list(self.pool.map(fn, range(n)))

    stop: Callable[[], None] | None = None
    """Ends the backend's calls (its client): a retry in flight gives up instead of backing off."""

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
        if self.stop is not None:
            self.stop()


BACKENDS = Registry(
    "model backend",
    {
        "reference": "washexp.compaction.backends.reference:reference_backend",
        "openai": "washexp.compaction.backends.openai_roles:openai_backend",
        "local": "washexp.compaction.backends.local_roles:local_backend",
    },
)
"""``model.backend`` -> ``factory(model, endpoint, root) -> Roles``."""


def roles_for(model, endpoint=None, root=None) -> Roles:
    """The roles of ``model.backend``, built from the model and endpoint config."""
    return BACKENDS.get(model.backend)(model, endpoint, root)
