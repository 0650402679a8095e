"""The study's H attempt loop, shared by both H implementations (``h_native`` and ``h_hermes``).

At most three attempts; attempt ``k`` requests ``floor(allowance * 0.8**k)`` tokens with the
study's word limit and gets no feedback. A body is measured in Qwen tokens against the
allowance (the only reason to try again); a provenance failure ends the attempts at once (Hermes'
failure path returns None: no retry). An empty body counts as an attempt. A writer's exception
(an unreachable model) propagates: it is an error, not an invalid checkpoint.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

from washexp.tokens import count

ATTEMPTS = 3
SHRINK = 0.8


class ProvenanceError(ValueError):
    """The body attributes work to a user although the turns contain no user-authored turn."""


@dataclass(frozen=True)
class Attempt:
    target_tokens: int
    body_tokens: int | None
    outcome: str  # "ok" | "over_allowance" | "provenance" | "empty"
    detail: str


@dataclass(frozen=True)
class Checkpoint:
    body: str | None  # the accepted body, prefix stripped; None when invalid
    valid: bool
    failure: str | None  # why it is invalid, one line
    attempts: tuple[Attempt, ...]
    last_body: str | None  # the last body produced even if rejected (kept for the record)
    keys: tuple[str, ...] = ()  # the recordings of the model calls behind it

    @property
    def kind(self) -> str | None:
        """Why it is invalid, as a kind (``provenance``, ``over_allowance``, ``empty``); None if valid."""
        if self.valid:
            return None
        return "empty" if self.last_body is None else self.attempts[-1].outcome


def word_limit(target_tokens: int) -> int:
    """The study's total word limit: 35% of the token target, at least 18 words."""
    return max(18, (35 * target_tokens) // 100)


def attempt_target(allowance: int, k: int, shrink: float = SHRINK) -> int:
    """The target requested at attempt ``k``: floor(allowance * shrink**k), at least 1."""
    return max(1, math.floor(round(allowance * shrink**k, 9)))


Body = Callable[[int, int, int], str | None]
"""(attempt k, target tokens, word limit) -> the body with its prefix stripped, or None/empty."""


def generate(
    allowance: int,
    body_for: Body,
    validate: Callable[[str], None],
    *,
    label: str = "H",
    empty: str = "the writer returned no body",
    attempts: int = ATTEMPTS,
    shrink: float = SHRINK,
    keys: list[str] | None = None,
) -> Checkpoint:
    """Run the attempts (see the module doc); ``validate`` raises :class:`ProvenanceError`.
    ``keys``: filled by ``body_for`` with the recordings it used; the checkpoint carries them."""
    cp = _attempts(allowance, body_for, validate, label, empty, attempts, shrink)
    return dataclasses.replace(cp, keys=tuple(keys or ()))


def _attempts(allowance, body_for, validate, label, empty, attempts, shrink) -> Checkpoint:
    if allowance < 1 or attempts < 1:
        raise ValueError(f"allowance and attempts must be >= 1, got {allowance}, {attempts}")
    record: list[Attempt] = []
    last_body, last_tokens = None, None
    for k in range(attempts):
        target = attempt_target(allowance, k, shrink)
        body = body_for(k, target, word_limit(target))
        if not body:
            record.append(Attempt(target, None, "empty", empty))
            continue
        last_body, last_tokens = body, count(body)
        try:
            validate(body)
        except ProvenanceError as err:
            record.append(Attempt(target, last_tokens, "provenance", str(err)))
            return Checkpoint(None, False, f"{label} provenance: {err}", tuple(record), body)
        if last_tokens <= allowance:
            record.append(Attempt(target, last_tokens, "ok", f"{last_tokens} <= {allowance}"))
            return Checkpoint(body, True, None, tuple(record), body)
        record.append(Attempt(target, last_tokens, "over_allowance", f"{last_tokens} tokens > allowance {allowance}"))
    if last_tokens is None:
        failure = f"{label} returned no body on all {attempts} attempts"
    else:
        failure = f"{label} body {last_tokens} tokens > allowance {allowance} after {attempts} attempts"
    return Checkpoint(None, False, failure, tuple(record), last_body)
