"""OpenAI chat messages: ``{"messages": [...]}``, a bare array of messages, an array of
``{"messages": [...]}``, or JSONL (``.jsonl``/``.ndjson``) with one ``{"messages": [...]}`` a line.

An assistant message's ``tool_calls`` are ``{"id", "type": "function", "function": {"name",
"arguments"}}`` with ``arguments`` a JSON string (washexp's own ``{"id", "name", "arguments": {}}``
is read too); a ``tool`` message answers one by ``tool_call_id`` (SWE-agent's ``tool_call_ids``, a
list of one id, is read as that id). ``system``/``developer`` messages and the legacy ``function``
role have no place in a task: counted, left out.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from washexp.errors import FixtureError
from washexp.sessions.reader import read_json, read_jsonl, text_of
from washexp.sessions.session import Builder, Session

JSONL_SUFFIXES = (".jsonl", ".ndjson")


def sessions(path: Path) -> Iterator[Session]:
    if path.suffix in JSONL_SUFFIXES:
        for number, value in read_jsonl(path):
            yield conversation(_messages(value, f"{path}: line {number}"), f"{path}: line {number}", f"{number:03d}")
        return
    value = read_json(path)
    if isinstance(value, list) and value and all(isinstance(v, dict) and "messages" in v for v in value):
        for i, item in enumerate(value):
            yield conversation(_messages(item, f"{path}: [{i}]"), f"{path}: [{i}]", f"{i + 1:03d}")
    else:
        yield conversation(_messages(value, str(path)), str(path), "001")


def _messages(value: Any, where: str) -> list[Any]:
    messages = value.get("messages") if isinstance(value, dict) else value
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) and "role" in m for m in messages):
        raise FixtureError(where, None, "not OpenAI chat messages (expected a list of objects with a role)")
    return messages


def conversation(messages: list[dict[str, Any]], where: str, name: str) -> Session:
    b = Builder(where, name)
    for i, m in enumerate(messages):
        at = f"{where}: messages[{i}]"
        role = m["role"]
        if role == "user":
            b.user(text_of(m.get("content"), at, b.drop))
        elif role == "assistant":
            b.assistant(
                text_of(m.get("content"), at, b.drop), [_call(c, f"{at}.tool_calls") for c in m.get("tool_calls") or []]
            )
        elif role == "tool":
            call_id = m.get("tool_call_id")
            ids = m.get("tool_call_ids")  # SWE-agent writes a list of the ids a result answers
            if call_id is None and isinstance(ids, list) and len(ids) == 1:
                call_id = ids[0]
            if not isinstance(call_id, str):
                raise FixtureError(at, "tool_call_id", "a tool message needs the id of the one call it answers")
            b.tool(call_id, text_of(m.get("content"), at, b.drop))
        elif role in ("system", "developer", "function"):
            b.drop(f"{role} message")
        else:
            raise FixtureError(at, "role", f"{role!r} is not an OpenAI chat role")
    return b.finish()


def _call(call: Any, where: str) -> tuple[str, str, dict[str, Any]]:
    if not isinstance(call, dict) or not isinstance(call.get("id"), str):
        raise FixtureError(where, None, "each tool call needs an id")
    function = call.get("function", call)
    name, arguments = function.get("name"), function.get("arguments", {})
    if not isinstance(name, str):
        raise FixtureError(where, None, f"call {call['id']!r} has no function name")
    return call["id"], name, parse_arguments(arguments)


def parse_arguments(arguments: Any) -> dict[str, Any]:
    """A call's arguments as a mapping: a JSON string is parsed; what is not an object (a
    model's malformed arguments) is kept verbatim under ``raw``."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError):
            return {"raw": arguments}
    return arguments if isinstance(arguments, dict) else {"raw": arguments}
