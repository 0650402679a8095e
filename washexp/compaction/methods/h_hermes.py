"""H through hermes-agent as installed: ``agent.context_compressor.ContextCompressor._generate_summary``
(``method.h_impl=hermes``; never the default).

It is not the study's H: the study uses ``tail_mode=legacy``, and hermes-agent 0.19 predates
``tail_mode`` (the older checkpoint template with its four "Historical ..." sections, no no-user
sentinel, no provenance validation; shared/reference/hermes-checkpoint.md, versions A and B).
So params and records label it "hermes-agent <version> as installed" with the sha256 of the
compressor source it ran (:func:`source_sha256`), and the study's rules are applied around it
exactly as around washexp's own implementation (``h_native``, the default H): its body passes the
same provenance validation, a provenance failure ends the attempts, and its model calls get the
same output cap (``model.max_tokens``; Hermes itself sends none).

What is Hermes' own and what is the study's:

- Hermes builds the prompt (preamble, template, focus topic), serializes and redacts the turns,
  sends one user message and prefixes the reply; its static ``_strip_summary_prefix`` removes
  that prefix again before the body enters the ``Summary:`` carrier shared with S.
- Its LLM call (the module-level ``call_llm``) is routed to the washexp model, through the
  recorder like every other call. The route is per thread, so compressors run in parallel;
  calls outside a study compressor still reach the original ``call_llm``.
- A fresh compressor per attempt (so per task and generation): no iterative-update prompt from
  a previous summary, no failure cooldown carried over.
- The study's small budget through a subclass: ``_compute_summary_budget`` returns the
  attempt's target (the per-task allowance, then 0.8x per retry, at most three attempts,
  measured in Qwen tokens as in ``compaction.hermes``), and the study's word limit is appended
  to the prompt Hermes built.
- The prompt's date is frozen (``FROZEN_DATE``), so the request, and with it the recording, is
  the same on any day: 0.19 reads it from ``hermes_time.now()``, other versions from
  ``_today_for_prompt``; 0.16.0 has no date line.
- An exception from the model (an unreachable endpoint) is re-raised: Hermes would swallow it
  and return None, which must not pass for an invalid checkpoint.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import importlib.metadata
import importlib.util
import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from washexp.compaction.methods import checkpoint, h_native
from washexp.compaction.methods.checkpoint import Checkpoint
from washexp.models.base import ChatResponse

CONTEXT_LENGTH = 131_072
"""Passed as ``config_context_length`` so Hermes never probes an endpoint for it."""
FROZEN_DATE = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
LENGTH_LIMIT = (
    "\n\nLength limit: at most {words} words in total. Sections that are not "
    "essential may be left out entirely, but always keep the task section and "
    "## Critical Context."
)

Chat = Callable[[list[dict], int | None], str]
"""(messages, max_tokens) -> reply text: the washexp model, as H's route sees it."""

_route = threading.local()
_install_lock = threading.Lock()


def version() -> str | None:
    """The installed hermes-agent version, or None when it is not installed."""
    try:
        return importlib.metadata.version("hermes-agent")
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.cache
def source_sha256() -> str | None:
    """sha256 of the installed ``agent/context_compressor.py``: the code this H ran."""
    spec = importlib.util.find_spec("agent.context_compressor") if version() else None
    if spec is None or not spec.origin:
        return None
    with open(spec.origin, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def protocol() -> str:
    return f"hermes-agent=={version()} as installed, ContextCompressor._generate_summary (study budget)"


class _Routed:
    """Hermes' ``call_llm``, sent to the calling thread's route while a study compressor runs
    (a class, so an installed one is known)."""

    def __init__(self, original: Callable[..., Any]) -> None:
        self.original = original

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        route = getattr(_route, "fn", None)
        return route(**kwargs) if route else self.original(*args, **kwargs)


def _install() -> None:
    """Route ``call_llm`` in Hermes' compressor module through the calling thread's route."""
    import agent.context_compressor as cc

    with _install_lock:
        if isinstance(cc.call_llm, _Routed):
            return
        cc.call_llm = _Routed(cc.call_llm)
        if hasattr(cc, "_today_for_prompt"):
            cc._today_for_prompt = lambda *a, **k: FROZEN_DATE.strftime("%Y-%m-%d")
        try:
            import hermes_time
        except ImportError:
            return
        original_now = hermes_time.now

        def now(*args, **kwargs):  # frozen only while a study compressor runs on this thread
            return FROZEN_DATE if getattr(_route, "fn", None) else original_now(*args, **kwargs)

        hermes_time.now = now


def _compressor(chat: Chat, model_name: str, target: int, words: int):
    from agent.context_compressor import ContextCompressor

    class StudyCompressor(ContextCompressor):
        """Hermes' compressor with the study's small budget and word limit."""

        error: BaseException | None = None

        def _compute_summary_budget(self, turns_to_summarize):
            return target

        def route(self, *, messages, max_tokens=None, **_runtime):
            # ``_runtime``: Hermes' provider routing (task, main_runtime, model) has no use here.
            *head, last = messages
            prompt = last["content"] + LENGTH_LIMIT.format(words=words)
            try:
                text = chat([*head, {**last, "content": prompt}], max_tokens)
            except BaseException as err:  # Hermes swallows it; we re-raise it after
                self.error = err
                raise
            message = SimpleNamespace(content=text, reasoning_content=None)
            return SimpleNamespace(choices=[SimpleNamespace(message=message, finish_reason="stop")])

    return StudyCompressor(model=model_name, quiet_mode=True, config_context_length=CONTEXT_LENGTH)


def summarize_once(turns: list[dict], focus: str, target: int, words: int, chat: Chat, model_name: str) -> str | None:
    """One call of the real ``_generate_summary``: the body with Hermes' prefix stripped by
    Hermes' own helper, or None when Hermes returned no summary."""
    from agent.context_compressor import ContextCompressor

    _install()
    compressor = _compressor(chat, model_name, target, words)
    _route.fn = compressor.route
    try:
        summary = compressor._generate_summary(turns, focus_topic=focus or None)
    finally:
        _route.fn = None
    if compressor.error is not None:
        raise compressor.error
    if summary is None:
        return None
    return ContextCompressor._strip_summary_prefix(summary).strip()


def generate_checkpoint(
    turns: list[dict],
    focus: str,
    allowance: int,
    chat: Callable[[list[dict], int | None], ChatResponse | str],
    model_name: str,
    attempts: int = 3,
    shrink: float = 0.8,
) -> Checkpoint:
    """The study's length-checked attempts around the real method (:mod:`washexp.compaction.methods.checkpoint`)."""

    keys: list[str] = []

    def recorded(messages: list[dict], max_tokens: int | None) -> str:
        reply = chat(messages, max_tokens)
        if isinstance(reply, ChatResponse):  # a recorded reply: keep its key
            keys.extend([reply.key] if reply.key else [])
            return reply.text
        return reply

    def body_for(k: int, target: int, words: int) -> str | None:
        return summarize_once(turns, focus, target, words, recorded, model_name)

    has_user = h_native.has_real_user_turn(turns)
    return checkpoint.generate(
        allowance,
        body_for,
        lambda body: h_native.validate_provenance(body, has_user),
        label="H (Hermes)",
        empty="Hermes returned no summary",
        attempts=attempts,
        shrink=shrink,
        keys=keys,
    )
