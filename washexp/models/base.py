"""The one-method ``Model`` protocol and the small values it takes and returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit, urlunsplit


@dataclass(frozen=True)
class ChatRequest:
    """One chat-completions call, everything that decides its answer (no endpoint, no key)."""

    messages: tuple[dict[str, Any], ...]
    temperature: float
    max_tokens: int | None
    extra_body: dict[str, Any] = field(default_factory=dict)
    generation: int = 0
    """Which independent generation (S/H/Jev/reader) the call belongs to; part of its identity."""
    answer: int = 0
    """Which answer of a context (the reader's two draws at temperature 0 are two calls)."""
    repeat: int = 0
    """Which rerun of the answering step (``model.repeats``): another repeat is another call, never a
    replay of the first; 0 leaves the request (and its recording key) as it was before repeats."""
    response_format: dict[str, Any] | None = None
    """The structured output asked for (the reader's alone); None leaves the request as it was."""
    series: str = ""
    """Which series of draws the call belongs to (a wash measurement's arm): the same words asked in
    two series are two draws, never a replay of one; "" leaves the request as it was."""


@dataclass(frozen=True)
class ChatResponse:
    text: str
    prompt_tokens: int | None
    """Input tokens as the endpoint counted them (None when it reports no usage)."""
    completion_tokens: int | None
    finish_reason: str | None
    key: str | None = None
    """The recording this reply came from (``None`` when no recorder stands between)."""
    cached_tokens: int | None = None
    """Of ``prompt_tokens``, those the endpoint served from its prompt cache (None: not reported)."""


class OverWindow(Exception):
    """The endpoint refused a request longer than the model's context window (HTTP 400
    ``context_length_exceeded``), in its own words. Not a :class:`~washexp.errors.ModelError`: the
    endpoint works, this one context does not fit, so only the condition that needs it fails (and
    scores 0); a record counts these apart, as "over the model's window". The refusal is recorded
    like a reply, so a replay fails the same way without a call."""


@runtime_checkable
class Model(Protocol):
    def chat(self, request: ChatRequest) -> ChatResponse: ...


def safe_url(url: str) -> str:
    """``url`` without user info, query or fragment (what an error message may show)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
