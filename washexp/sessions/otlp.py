"""OpenTelemetry GenAI spans exported as OTLP JSON (``{"resourceSpans": [...]}``, or JSONL with
one such request a line, as the collector's file exporter writes): each trace is one session.

Read by the GenAI semantic conventions: a trace's last chat span (``gen_ai.operation.name`` =
``chat`` with ``gen_ai.input.messages``) holds the conversation, its
``gen_ai.input.messages`` then ``gen_ai.output.messages`` (messages of typed ``parts``: ``text``,
``tool_call`` with ``id``/``name``/``arguments``, ``tool_call_response`` with ``id``/``response``).
Without one, the ``execute_tool`` spans in start order are the calls (``gen_ai.tool.name``,
``gen_ai.tool.call.id``, ``gen_ai.tool.call.arguments``) and their results
(``gen_ai.tool.call.result``, opt-in in the conventions: a span without it has no result), the query
is the first user text of any span's input messages (an ``invoke_agent`` span's), the final report
the last assistant text of any span's output messages. Events of the older conventions
(``gen_ai.user.message``...), token usage and other attributes have no place in a task.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from washexp.errors import FixtureError
from washexp.sessions import openai
from washexp.sessions.reader import read_json, read_jsonl
from washexp.sessions.session import Builder, Session

INPUT, OUTPUT = "gen_ai.input.messages", "gen_ai.output.messages"


def sessions(path: Path) -> Iterator[Session]:
    requests = [v for _, v in read_jsonl(path)] if path.suffix in openai.JSONL_SUFFIXES else [read_json(path)]
    traces: dict[str, list[dict[str, Any]]] = {}
    for request in requests:
        if not isinstance(request, dict) or not isinstance(request.get("resourceSpans"), list):
            raise FixtureError(path, None, "not OTLP JSON (expected an object with resourceSpans)")
        for resource in request["resourceSpans"]:
            for scope in resource.get("scopeSpans") or [] if isinstance(resource, dict) else []:
                for span in scope.get("spans") or [] if isinstance(scope, dict) else []:
                    if isinstance(span, dict):
                        traces.setdefault(str(span.get("traceId")), []).append(span)
    if not traces:
        raise FixtureError(path, None, "holds no spans")
    for i, (trace_id, spans) in enumerate(traces.items(), start=1):
        yield trace_session(spans, f"{path}: trace {trace_id}", f"{i:03d}")


def attributes(span: dict[str, Any]) -> dict[str, Any]:
    """An OTLP span's attributes as a mapping (``{"key", "value": {"stringValue": ...}}`` each)."""
    return {
        a["key"]: _value(a.get("value") or {})
        for a in span.get("attributes") or []
        if isinstance(a, dict) and "key" in a
    }


def _value(v: dict[str, Any]) -> Any:
    if "arrayValue" in v:
        return [_value(x) for x in (v["arrayValue"] or {}).get("values") or []]
    if "kvlistValue" in v:
        return {x["key"]: _value(x.get("value") or {}) for x in (v["kvlistValue"] or {}).get("values") or []}
    if "intValue" in v:
        return int(v["intValue"])  # a string in OTLP JSON (64-bit)
    for key in ("stringValue", "boolValue", "doubleValue", "bytesValue"):
        if key in v:
            return v[key]
    return None


def _messages(raw: Any, where: str) -> list[dict[str, Any]]:
    """GenAI messages (a JSON string or a structured value) as OpenAI chat messages."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except (ValueError, RecursionError):
            raise FixtureError(where, None, "gen_ai messages are not JSON") from None
    if not isinstance(raw, list):
        raise FixtureError(where, None, "gen_ai messages must be a list")
    out: list[dict[str, Any]] = []
    for m in raw:
        if not isinstance(m, dict) or not isinstance(m.get("parts"), list):
            raise FixtureError(where, None, "each gen_ai message needs a role and parts")
        texts = [p.get("content") for p in m["parts"] if isinstance(p, dict) and p.get("type") == "text"]
        text = "\n".join(t for t in texts if isinstance(t, str))
        calls = [p for p in m["parts"] if isinstance(p, dict) and p.get("type") == "tool_call"]
        responses = [p for p in m["parts"] if isinstance(p, dict) and p.get("type") == "tool_call_response"]
        if responses:
            for p in responses:
                content = p.get("response")
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": p.get("id"),
                        "content": content if isinstance(content, str) else json.dumps(content),
                    }
                )
        else:
            message: dict[str, Any] = {"role": m.get("role"), "content": text}
            if calls:
                message["tool_calls"] = [
                    {"id": c.get("id"), "name": c.get("name"), "arguments": c.get("arguments") or {}} for c in calls
                ]
            out.append(message)
    return out


def trace_session(spans: list[dict[str, Any]], where: str, name: str) -> Session:
    spans = sorted(spans, key=lambda s: int(s.get("startTimeUnixNano") or 0))
    attrs = [attributes(s) for s in spans]
    chats = [
        (s, a) for s, a in zip(spans, attrs, strict=True) if INPUT in a and a.get("gen_ai.operation.name") == "chat"
    ]
    if chats:
        span, a = chats[-1]
        at = f"{where}: span {span.get('spanId')}"
        messages = _messages(a[INPUT], at) + (_messages(a[OUTPUT], at) if OUTPUT in a else [])
        return openai.conversation(messages, at, name)
    b = Builder(where, name)
    said = [m for s, a in zip(spans, attrs, strict=True) if INPUT in a for m in _messages(a[INPUT], where)]
    b.user(next((m["content"] for m in said if m["role"] == "user" and m["content"]), ""))
    for s, a in zip(spans, attrs, strict=True):
        if a.get("gen_ai.operation.name") != "execute_tool":
            continue
        call_id = str(a.get("gen_ai.tool.call.id") or s.get("spanId"))
        arguments = openai.parse_arguments(a.get("gen_ai.tool.call.arguments", {}))
        b.assistant("", [(call_id, str(a.get("gen_ai.tool.name") or s.get("name")), arguments)])
        if "gen_ai.tool.call.result" in a:
            result = a["gen_ai.tool.call.result"]
            b.tool(call_id, result if isinstance(result, str) else json.dumps(result))
    replies = [m for s, a in zip(spans, attrs, strict=True) if OUTPUT in a for m in _messages(a[OUTPUT], where)]
    final = next((m["content"] for m in reversed(replies) if m["role"] == "assistant" and m["content"]), None)
    if final:
        b.assistant(final)
    return b.finish()
