"""The model layer the model washers (``coalwash``, ``plain``) talk through.

- :func:`open_model` builds it once per sweep from ``model.*`` (what the model is) and
  ``endpoint.*`` (how it is reached): the shared :class:`~washexp.models.recorder.Recorder` in front
  of the ``openai`` client, so every call is recorded content-addressed and
  ``endpoint.replay=strict`` answers from the recordings alone (no client is even built).
  ``model=local`` first starts its llama.cpp server (``washexp.models.local``); the model layer
  owns it and stops it in :meth:`WasherModel.close`.
  ``model=reference`` has no chat model: a washer that needs one is refused in one line
  (:class:`~washexp.errors.ConfigError`, exit 2) before any run starts.
- :meth:`WasherModel.ask` is one fresh conversation: a single user message, no history, no
  system prompt; the request carries ``max_tokens``, the extra body and the model's
  ``generation_temperature``: a model washer samples, as S and H do (issue 49). Each round of a
  loop, wash of a sawtooth arm and repeat of a controlled arm is its own draw
  (:meth:`WasherModel.drawn`: the request's ``generation`` and ``repeat``), so a store left unchanged
  by round 1 is asked again in round 2 as a fresh sample, never replayed as a copy of round 1.
- :class:`Meter` sums what the endpoint reported (prompt + completion tokens) over a proposal's
  calls: the washer's own token cost. A replayed reply reports what was recorded, so a replay
  costs what the run it replays cost; a reply without usage counts 0 and is counted apart.
- Prompts are files in ``washexp/wash/prompts/``; :func:`prompt_digests` gives their sha256,
  which enters the washer's spec and so the run's identity (a changed prompt is a new condition).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from washexp.errors import ConfigError
from washexp.hashing import sha256_bytes
from washexp.models import local
from washexp.models.base import ChatRequest, ChatResponse
from washexp.models.endpoint import open_recorder
from washexp.models.local import Served

PROMPTS = Path(__file__).resolve().parent.parent / "prompts"
SERVED = ("openai", "local")
"""``model.backend`` values whose model a washer can call."""


def prompt(name: str) -> str:
    return (PROMPTS / f"{name}.txt").read_text(encoding="utf-8")


def prompt_digests(names: tuple[str, ...]) -> dict[str, str]:
    """name -> sha256 of ``prompts/<name>.txt``."""
    return {name: sha256_bytes((PROMPTS / f"{name}.txt").read_bytes()) for name in names}


def fill(template: str, **values: Any) -> str:
    """``{name}`` placeholders replaced in one pass: text put in (a store file holding ``{files}``)
    is never filled again."""
    return re.sub(r"\{(\w+)\}", lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), template)


@dataclass
class Meter:
    """Token usage over one proposal's calls, as the endpoint reported it."""

    tokens: int = 0
    calls: int = 0
    unreported: int = 0
    """Replies that carried no usage (they count 0 tokens)."""
    by_seat: dict[str, int] = field(default_factory=dict)
    """Calls per seat (outsider, insider, check; plain): which seats a record names a model for."""

    def add(self, reply: ChatResponse, seat: str) -> ChatResponse:
        self.calls += 1
        self.by_seat[seat] = self.by_seat.get(seat, 0) + 1
        if reply.prompt_tokens is None and reply.completion_tokens is None:
            self.unreported += 1
        self.tokens += (reply.prompt_tokens or 0) + (reply.completion_tokens or 0)
        return reply


@dataclass
class WasherModel:
    """A served model as a washer sees it: ``ask(text, role, meter)``."""

    recorder: Any
    """A :class:`Recorder` (``chat(request, task_id, role)``)."""
    temperature: float = 0.0
    max_tokens: int | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)
    served: Served | None = None
    """``model=local``: the llama.cpp server this model layer owns (stopped by :meth:`close`)."""
    draw: int = 0
    """The round (or the n-th wash of a sawtooth arm) this model answers for: the request's ``generation``."""
    repeat: int = 0
    """The repeat of a stochastic arm (the controlled experiment's plain arm): the request's ``repeat``."""
    series: str = ""
    """The series of draws: a measurement's arm (the request's ``series``), so round 1 of the ceiling
    and round 1 of the infinity loop on one store are two draws, not one answer replayed."""

    def drawn(self, draw: int = 0, repeat: int = 0) -> WasherModel:
        """This model layer (same recorder, same server) answering as draw ``draw``, repeat ``repeat``
        of its series."""
        return replace(self, draw=draw, repeat=repeat)

    def in_series(self, series: str) -> WasherModel:
        """This model layer drawing in series ``series`` (from its first draw)."""
        return replace(self, draw=0, repeat=0, series=series)

    @property
    def spec(self) -> dict[str, Any] | None:
        """What a local model is (GGUF sha256, ``n_ctx``, server version): part of the run's identity."""
        return self.served.spec if self.served else None

    def logs(self) -> dict[str, str]:
        """The local server's log since the last call, as an artifact (nothing for a remote model)."""
        return self.served.new_log() if self.served else {}

    def ask(self, text: str, role: str, meter: Meter) -> ChatResponse:
        """One call, keyed by this layer's draw and repeat."""
        request = ChatRequest(
            ({"role": "user", "content": text},),
            self.temperature,
            self.max_tokens,
            dict(self.extra_body),
            generation=self.draw,
            repeat=self.repeat,
            series=self.series,
        )
        return meter.add(self.recorder.chat(request, None, f"wash {role}"), role)

    def close(self) -> None:
        """End a retry that is backing off, and stop a local server (``Sweep.close()`` calls this
        at the end of the command, also on a failure, Ctrl-C or SIGTERM)."""
        try:
            self.recorder.close()
        finally:
            if self.served is not None:
                self.served.stop()


def needs_served(washer: str, backend: str) -> None:
    """Refuse a washer that needs a chat model on a backend that has none: one line."""
    if backend == "reference":
        raise ConfigError(
            f"washer {washer} needs a served model: model=reference has none "
            "(use model=openai model.name=... endpoint.base_url=...)"
        )
    if backend not in SERVED:
        raise ConfigError(
            f"washer {washer}: model.backend={backend} cannot serve a washer (use model=openai or model=local)"
        )


def open_model(washer: str, model, endpoint, root: Path) -> WasherModel:
    """The sweep's washer model (see the module docstring); ``model``/``endpoint`` are the config nodes."""
    needs_served(washer, model.backend)
    served = local.serve(model, endpoint, root) if model.backend == "local" else None
    try:
        recorder = (
            open_recorder(served.model, served.endpoint, root, served.gone)
            if served
            else open_recorder(model, endpoint, root)
        )
    except BaseException:
        if served is not None:
            served.stop()
        raise
    return WasherModel(recorder, model.generation_temperature, model.max_tokens, dict(model.extra_body or {}), served)


def model_key(model, endpoint) -> str:
    """What makes two jobs of one sweep share a washer model (and its call counts)."""
    return repr(sorted({**asdict(model), **{f"endpoint.{k}": v for k, v in asdict(endpoint).items()}}.items()))
