"""Counting a context's input tokens the way its endpoint will: H's "fewer than Full" check.

The study judges H valid only if it uses fewer *actual API* input tokens than Full, and the
check happens before any answer. So a context is counted, before it is sent:

- by the endpoint's own tokenize route when the server offers one: vLLM's ``POST /tokenize``
  (``{"model", "messages"}`` -> ``{"count"}``) or llama.cpp's ``POST /apply-template`` then
  ``POST /tokenize`` (``{"content"}`` -> ``{"tokens"}``); the first count probes for the route;
- else locally, with Qwen3's own chat template (``compaction.qwen_chat``);
- for ``model=local``, with the served GGUF file's own chat template and vocabulary, rendered and
  tokenized by the same llama-cpp-python code its server runs (:func:`gguf_meter`): llama-cpp-python's
  server has no route that counts messages, and this count equals the ``prompt_tokens`` it reports.

Every count says which of the two made it (:class:`Count.source`), and is recorded beside the
chat recordings (``<recordings>/tokenize/``), so a replay (``endpoint.replay=strict`` included)
reproduces every validity decision without the server.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import httpx  # the openai client's own HTTP library

from washexp.compaction.backends import qwen_chat
from washexp.errors import ModelError
from washexp.hashing import canonical_hash

ENDPOINT = "endpoint tokenize route"
_FAILED = (httpx.HTTPError, ValueError, KeyError, TypeError)
"""A route that is absent (404), refuses, or answers in another shape."""
LOCAL = "local Qwen3 chat template"
GGUF = "the served GGUF's own chat template"


@dataclass(frozen=True)
class Count:
    tokens: int
    source: str
    """``ENDPOINT`` or ``LOCAL``: which count decided."""


Meter = Callable[[tuple[dict, ...]], Count]


def local_meter(enable_thinking: bool | None = None) -> Meter:
    def meter(messages: tuple[dict, ...]) -> Count:
        return Count(qwen_chat.count_messages(list(messages), enable_thinking), LOCAL)

    return meter


def gguf_meter(path: Path) -> Meter:
    """The count llama-cpp-python's server makes of a chat request to this GGUF file: its chat
    template (``tokenizer.chat_template``) rendered as the server renders it, then tokenized with
    the file's vocabulary (no weights are loaded)."""
    import llama_cpp
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    from washexp.models.llama_server import quiet_stderr

    with quiet_stderr():
        llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    template = llm.metadata.get("tokenizer.chat_template")
    if not template:  # the server would fall back to a guessed format we cannot reproduce exactly
        llm.close()
        return local_meter()
    special = {
        k: llm._model.token_get_text(t) if t != -1 else ""
        for k, t in (("eos", llm.token_eos()), ("bos", llm.token_bos()))
    }
    render = Jinja2ChatFormatter(template=template, eos_token=special["eos"], bos_token=special["bos"])
    lock = threading.Lock()  # one vocabulary, shared by the sweep's threads

    def meter(messages: tuple[dict, ...]) -> Count:
        prompt = render(messages=list(messages))
        with lock:
            tokens = llm.tokenize(prompt.prompt.encode("utf-8"), add_bos=not prompt.added_special, special=True)
        return Count(len(tokens), GGUF)

    return meter


class EndpointMeter:
    """Counts through the endpoint's tokenize route when it has one; recorded, replayable."""

    def __init__(self, base_url: str, key: str, model: str, template_kwargs: dict, directory: Path, mode: str):
        root = base_url.rstrip("/")
        self.root = root[: -len("/v1")] if root.endswith("/v1") else root
        self.key, self.model, self.kwargs = key, model, dict(template_kwargs)
        self.dir, self.mode = Path(directory) / "tokenize", mode
        self.local = local_meter(self.kwargs.get("enable_thinking"))
        self._route: str | None | Literal[False] = False  # False: not probed yet
        self._lock = threading.Lock()
        self._seen: dict[str, Count] = {}

    def __call__(self, messages: tuple[dict, ...]) -> Count:
        key = canonical_hash({"model": self.model, "messages": list(messages), "template": self.kwargs})
        if key in self._seen:
            return self._seen[key]
        path = self.dir / key[:2] / f"{key}.json"
        if path.is_file():
            record = json.loads(path.read_text(encoding="utf-8"))
            found = Count(record["tokens"], record["source"])
        elif self.mode == "strict":
            raise ModelError(f"endpoint.replay=strict: no recorded token count {key} in {self.dir}")
        else:
            found = self._count(messages)
            _write(
                path,
                {"key": key, "role": "tokenize", "model": self.model, "tokens": found.tokens, "source": found.source},
            )
        self._seen[key] = found
        return found

    def _count(self, messages: tuple[dict, ...]) -> Count:
        with self._lock:
            if self._route is False:
                self._route = None
                for route in ("vllm", "llama.cpp"):
                    try:
                        tokens = self._ask(route, messages)
                    except _FAILED:
                        continue
                    self._route = route
                    return Count(tokens, ENDPOINT)
        if self._route is None:
            return self.local(messages)
        try:
            return Count(self._ask(self._route, messages), ENDPOINT)
        except _FAILED as err:
            raise ModelError(f"{self.root}: the {self._route} tokenize route failed ({type(err).__name__})") from None

    def _ask(self, route: str, messages: tuple[dict, ...]) -> int:
        headers = {"Authorization": f"Bearer {self.key}"}
        with httpx.Client(timeout=30.0, headers=headers) as http:
            if route == "vllm":
                body = {"model": self.model, "messages": list(messages), "add_generation_prompt": True}
                if self.kwargs:
                    body["chat_template_kwargs"] = self.kwargs
                reply = http.post(f"{self.root}/tokenize", json=body)
                reply.raise_for_status()
                return int(reply.json()["count"])
            body = {"messages": list(messages), **({"chat_template_kwargs": self.kwargs} if self.kwargs else {})}
            reply = http.post(f"{self.root}/apply-template", json=body)
            reply.raise_for_status()
            prompt = reply.json()["prompt"]
            reply = http.post(f"{self.root}/tokenize", json={"content": prompt, "add_special": True})
            reply.raise_for_status()
            return len(reply.json()["tokens"])


def _write(path: Path, record: dict) -> None:
    """Atomic, like the chat recorder: a crash leaves no half file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".count-", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(json.dumps(record, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)
