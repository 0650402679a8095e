"""Write two agent sessions as MLflow traces through MLflow's own tracing API (``python
mlflow_agent.py URI``): one traced as TOOL spans under an AGENT span, one as a CHAT_MODEL span
holding the OpenAI messages (what autologging records)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import mlflow
from mlflow.entities import SpanType

SAMPLE = json.loads((Path(__file__).parent / "openai_chat.json").read_text())[0]["messages"]


def tool_spans(question: str) -> None:
    with mlflow.start_span("batch-agent", span_type=SpanType.AGENT) as root:
        root.set_inputs({"question": question})
        for call, result in zip(SAMPLE[2::2], SAMPLE[3::2], strict=False):
            if call["role"] != "assistant" or "tool_calls" not in call:
                break
            function = call["tool_calls"][0]["function"]
            with mlflow.start_span(function["name"], span_type=SpanType.TOOL) as span:
                span.set_inputs(json.loads(function["arguments"]))
                span.set_outputs(result["content"])
        root.set_outputs(SAMPLE[-1]["content"])


def chat_span() -> None:
    with mlflow.start_span("chat.completions", span_type=SpanType.CHAT_MODEL) as span:
        span.set_inputs({"model": "gpt-4o", "messages": SAMPLE[:-1]})
        span.set_outputs({"object": "chat.completion", "choices": [{"index": 0, "message": SAMPLE[-1]}]})


if __name__ == "__main__":
    mlflow.set_tracking_uri(sys.argv[1])
    mlflow.set_experiment("agent")
    tool_spans("Why did the nightly batch run slowly?")
    chat_span()
    mlflow.flush_trace_async_logging()
