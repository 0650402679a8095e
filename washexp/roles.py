"""The roles a compaction condition needs, and the backends that fill them.

Each role is one call with a small value in and a small value out:

- summarize (S): every source unit once, within the allowance -> summary text;
- rank (Jev): the initial task and the units only -> one score per unit;
- checkpoint writer (H): a checkpoint request -> raw checkpoint text (see ``compaction.hermes``);
- read: a complete context -> one reply (``None`` for a backend that has no reader).

A backend (``model.backend``) builds all roles from the model config; ``reference`` is the
offline deterministic baseline, never a stand-in for a chat model. ``Roles.spec`` is what a
run logs and hashes: the backend and its arguments, never a secret.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from washexp.compaction.hermes import Checkpoint, Writer
from washexp.fixtures.compaction import Unit
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


@dataclass(frozen=True)
class Reply:
    text: str
    prompt_tokens: int | None
    """Input tokens as the endpoint counted them (the study's actual API input tokens)."""


@dataclass(frozen=True)
class Roles:
    spec: dict[str, Any]
    summarize: Callable[[SummaryJob], str]
    rank: Callable[[RankJob], list[float]]
    checkpoint_writer: Callable[[str, int], Writer]
    """(task id, generation) -> the writer H calls for that generation."""
    read: Callable[[ReadJob], Reply] | None = None
    concurrency: int = 1
    """How many conditions may compute at once (an endpoint's parallelism; 1 offline)."""
    records: Callable[[str, str, list[tuple[dict, ...]]], dict[str, dict]] | None = None
    """(task id, method, the condition's contexts) -> the recorded requests/responses behind
    that condition (key -> record), logged as its ``requests/<key>.json`` artifacts."""
    hermes_checkpoint: Callable[[str, int, list[dict], str, int], Checkpoint] | None = None
    """The real Hermes H (task id, generation, turns, focus, allowance), when the backend has
    one (``method.h_impl=hermes``; ``auto`` picks it when present)."""
    calls: Callable[[], str] | None = None
    """A short account of the model calls so far (made, replayed), for progress lines."""


BACKENDS: Registry[Roles] = Registry("model backend")
"""``model.backend`` -> factory(ModelConfig) -> Roles."""


def roles_for(model) -> Roles:
    """The roles of ``model.backend``, built from the model config."""
    import washexp.llm  # noqa: F401  (registers the openai backend)
    import washexp.reference  # noqa: F401  (registers the reference backend)

    return BACKENDS.get(model.backend)(model)
