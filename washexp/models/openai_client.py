"""``OpenAIModel``: any OpenAI-compatible chat-completions endpoint through the official client.

The client's own retries are off; this module retries, so the policy is one visible loop:

- what the openai client itself would retry (408, 409, 429, 5xx, timeouts, connection errors)
  is retried with exponential backoff and full jitter (``backoff_s * 2**attempt``, capped), a
  ``Retry-After`` header taking precedence; the loop is ours rather than the client's so a
  waiting request gives its concurrency slot back;
- a 400 with the code ``context_length_exceeded`` (the context is longer than the model's window)
  is :class:`~washexp.models.base.OverWindow` with the endpoint's own message: a property of this
  request, not of the endpoint, so only the condition that sent it fails;
- any other 4xx fails at once: the endpoint said no, asking again will not change that;
- a 200 whose body is not a chat completion (an HTML page from a proxy, an empty body, broken
  JSON, no choices) is retried like a 5xx: a gateway in front of the model often says so once;
- every failure ends in a one-line :class:`~washexp.errors.ModelError` naming the endpoint
  (with any credentials in the URL removed) and the last error. The key never appears;
- an endpoint whose owner can tell it is gone (``gone``: a local server whose process exited)
  ends at its first failed request with the owner's line, never retried.

At most ``max_concurrency`` requests are in flight at once, however many threads call.
"""

from __future__ import annotations

import email.utils
import logging
import os
import random
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import openai

from washexp.errors import ModelError
from washexp.masking import declare
from washexp.models.base import ChatRequest, ChatResponse, OverWindow, safe_url

log = logging.getLogger("washexp")
logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request: a panel's 908 were most of its log

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
PLACEHOLDER_KEY = "not-needed-for-a-local-endpoint"
BACKOFF_CAP_S = 60.0
OVER_WINDOW = "context_length_exceeded"
"""The error code OpenAI's API, and servers that copy it (llama.cpp's), give a too-long context."""
RETRIED = (408, 409, 429)
"""Below 500, the statuses the openai client retries too (request timeout, conflict, rate limit)."""


def api_key(base_url: str, env_name: str) -> str:
    """The key from ``$env_name``; a placeholder is fine for a local endpoint only."""
    declare(env_name)  # whatever the endpoint echoes of it is masked before it is written
    key = os.environ.get(env_name)
    if key:
        return key
    if urlsplit(base_url).hostname in LOCAL_HOSTS:
        return PLACEHOLDER_KEY
    raise ModelError(
        f"set {env_name} to the API key of {safe_url(base_url)} "
        f"(or point endpoint.api_key_env at the variable that holds it)"
    )


def retry_after(err: openai.APIStatusError) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date), if any."""
    value = err.response.headers.get("retry-after") if err.response is not None else None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time()) if when else None


def _code(err: openai.APIStatusError) -> str | None:
    body = err.body
    inner = body.get("error", body) if isinstance(body, dict) else None
    return getattr(err, "code", None) or (inner.get("code") if isinstance(inner, dict) else None)


def _message(err: openai.APIStatusError) -> str:
    body = err.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        text = inner.get("message") if isinstance(inner, dict) else inner
        if text:
            return " ".join(str(text).split())
    return " ".join(str(err.message or err).split())


class _BadReply(Exception):
    """A 200 whose body is no chat completion: retried, then the last error of a ModelError."""


class OpenAIModel:
    """A served chat model: ``chat(request) -> response``, retried and bounded."""

    def __init__(
        self,
        name: str,
        base_url: str,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 120.0,
        max_retries: int = 5,
        max_concurrency: int = 8,
        backoff_s: float = 1.0,
        gone: Callable[[int], str | None] | None = None,
    ):
        """``gone(answered)``: how the endpoint ended, given the requests it answered, or None
        while it may still answer; asked after a failed request instead of retrying a dead one."""
        if not base_url:
            raise ModelError("endpoint.base_url is not set (e.g. endpoint.base_url=http://127.0.0.1:8000/v1)")
        self.name, self.endpoint = name, safe_url(base_url)
        self.max_retries, self.backoff_s = max_retries, backoff_s
        self._slots = threading.BoundedSemaphore(max(1, max_concurrency))
        self._closed = threading.Event()
        self._gone, self._answered, self._count_lock = gone, 0, threading.Lock()
        self._client = openai.OpenAI(
            base_url=base_url, api_key=api_key(base_url, api_key_env), timeout=timeout_s, max_retries=0
        )

    def close(self) -> None:
        """No more attempts: a retry waiting on an endpoint that is going away (the sweep ends,
        Ctrl-C, SIGTERM) gives up at once instead of backing off against it."""
        self._closed.set()

    def chat(self, request: ChatRequest) -> ChatResponse:
        last = ""
        for attempt in range(self.max_retries + 1):
            if self._closed.is_set():
                raise ModelError(f"{self.endpoint}: the sweep is ending{f' (last error: {last})' if last else ''}")
            try:
                with self._slots:
                    response = self._once(request)
                with self._count_lock:
                    self._answered += 1
                return response
            except openai.APIStatusError as err:
                last = f"HTTP {err.status_code}: {_message(err)}"
                if err.status_code == 400 and _code(err) == OVER_WINDOW:
                    raise OverWindow(f"over the model's window: {last}") from None
                if err.status_code not in RETRIED and err.status_code < 500:
                    raise ModelError(f"{self.endpoint} refused the request ({last})") from None
                wait = retry_after(err)
            except openai.APITimeoutError:
                last, wait = "timed out", None
            except openai.APIConnectionError as err:
                last, wait = f"connection failed ({type(err.__cause__ or err).__name__})", None
            except _BadReply as err:
                last, wait = str(err), None
            died = self._gone(self._answered) if self._gone else None
            if died:
                raise ModelError(died)
            if attempt == self.max_retries:
                break
            if wait is None:
                wait = random.uniform(0, min(BACKOFF_CAP_S, self.backoff_s * 2**attempt))
            # the job's log only: a retry that works is no news, and one that does not ends in one error line
            log.info("%s: %s; retry %d/%d in %.1fs", self.endpoint, last, attempt + 1, self.max_retries, wait)
            self._closed.wait(min(wait, BACKOFF_CAP_S))
        tries = self.max_retries + 1
        raise ModelError(
            f"{self.endpoint}: gave up after {tries} attempt{'s' if tries > 1 else ''}; last error: {last}"
        )

    def _once(self, request: ChatRequest) -> ChatResponse:
        params: dict[str, Any] = {
            "model": self.name,
            "messages": list(request.messages),
            "temperature": request.temperature,
        }
        if request.max_tokens is not None:
            params["max_tokens"] = request.max_tokens
        if request.extra_body:
            params["extra_body"] = dict(request.extra_body)
        if request.response_format:
            params["response_format"] = request.response_format
        try:
            completion = self._client.chat.completions.create(**params)
        except (ValueError, openai.APIResponseValidationError) as err:  # JSON that does not parse
            raise _BadReply(f"the reply is not a chat completion ({type(err).__name__}: {err})") from None
        if isinstance(completion, str):  # the client hands back a non-JSON body (HTML, empty) as text
            body = " ".join(completion.split())
            raise _BadReply(f"the reply is not a chat completion ({repr(body[:60]) if body else 'an empty body'})")
        if not completion.choices or completion.choices[0].message is None:
            raise _BadReply("the reply is not a chat completion (it has no choices)")
        choice = completion.choices[0]
        usage = completion.usage
        return ChatResponse(
            text=choice.message.content or "",
            prompt_tokens=usage.prompt_tokens if usage else None,
            completion_tokens=usage.completion_tokens if usage else None,
            finish_reason=choice.finish_reason,
            cached_tokens=_cached(usage),
        )


def _cached(usage) -> int | None:
    """``usage.prompt_tokens_details.cached_tokens``, when the endpoint reports it."""
    details = getattr(usage, "prompt_tokens_details", None) if usage else None
    cached = getattr(details, "cached_tokens", None) if details else None
    return cached if isinstance(cached, int) else None
