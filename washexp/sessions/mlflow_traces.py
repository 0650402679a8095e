"""MLflow traces (``washexp import mlflow URI --experiment NAME``): each trace of the experiment
is one session, read through MLflow's public trace API (``MlflowClient.search_traces``).

A trace holds a session one of two ways, tried in this order:

- a chat span (``CHAT_MODEL`` or ``LLM``) whose inputs carry OpenAI ``messages`` (what MLflow's
  OpenAI autologging and most agent frameworks record): the last such span holds the whole
  conversation, read as the ``openai`` format reads it, its output message the final report;
- otherwise the ``TOOL`` spans, in start order, each a call (the span's name and inputs) and its
  result (the span's outputs); the query is the root span's input, its output the final report.

A trace with neither has no tool results and is refused. Token counts, latencies, assessments
and span attributes have no place in a task.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from washexp.errors import FixtureError
from washexp.sessions import openai
from washexp.sessions.session import Builder, Session
from washexp.tracking.reader import experiment_id, quiet_mlflow
from washexp.tracking.sqlite import store_path

CHAT_SPANS = ("CHAT_MODEL", "LLM")
PAGE = 200


def sessions(uri: str, experiment: str) -> Iterator[Session]:
    path = store_path(uri)
    if path is not None and not path.is_file():
        raise FixtureError(uri, None, "no tracking store there (a missing store is never created by an import)")
    exp_id = experiment_id(uri, experiment)
    if exp_id is None:
        raise FixtureError(uri, f"experiment {experiment!r}", "no such experiment")
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    client, token, traces = MlflowClient(uri), None, []
    with quiet_mlflow():
        while True:
            try:
                page = client.search_traces(
                    locations=[exp_id], max_results=PAGE, page_token=token, order_by=["timestamp_ms ASC"]
                )
            except MlflowException as err:  # a server that refuses, a store of another schema
                raise FixtureError(
                    uri, f"experiment {experiment!r}", f"traces cannot be read ({err.message.splitlines()[0]})"
                ) from None
            traces.extend(page)
            token = page.token
            if not token:
                break
    if not traces:
        raise FixtureError(uri, f"experiment {experiment!r}", "holds no traces")
    for i, trace in enumerate(traces, start=1):
        yield trace_session(trace, f"{uri}: trace {trace.info.trace_id}", f"{i:03d}")


def trace_session(trace: Any, where: str, name: str) -> Session:
    spans = sorted(trace.data.spans, key=lambda s: s.start_time_ns)
    chats = [
        s
        for s in spans
        if s.span_type in CHAT_SPANS and isinstance(s.inputs, dict) and isinstance(s.inputs.get("messages"), list)
    ]
    if chats:
        last = chats[-1]
        messages = list(last.inputs["messages"])
        reply = _reply(last.outputs)
        if reply is not None:
            messages.append(reply)
        return openai.conversation(messages, f"{where}: span {last.name!r}", name)
    root = next((s for s in spans if s.parent_id is None), None)
    if root is None:
        raise FixtureError(where, None, "has no root span")
    b = Builder(where, name)
    b.user(_text(root.inputs))
    for span in spans:
        if span.span_type == "TOOL":
            arguments = span.inputs if isinstance(span.inputs, dict) else {"raw": span.inputs}
            b.assistant("", [(span.span_id, span.name, arguments)])
            b.tool(span.span_id, _text(span.outputs))
    if root.outputs is not None:
        b.assistant(_text(root.outputs))
    return b.finish()


def _reply(outputs: Any) -> dict[str, Any] | None:
    """The assistant message of a chat span's output (an OpenAI chat completion, or a message)."""
    if isinstance(outputs, dict) and isinstance(outputs.get("choices"), list) and outputs["choices"]:
        message = outputs["choices"][0].get("message") if isinstance(outputs["choices"][0], dict) else None
        return message if isinstance(message, dict) else None
    if isinstance(outputs, dict) and outputs.get("role") == "assistant":
        return outputs
    if isinstance(outputs, str):
        return {"role": "assistant", "content": outputs}
    return None


def _text(value: Any) -> str:
    """A span's input or output as text: a string as it is, a mapping of one string its value,
    anything else its JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1 and isinstance(next(iter(value.values())), str):
        return next(iter(value.values()))
    return json.dumps(value, ensure_ascii=False, indent=1, default=str)
