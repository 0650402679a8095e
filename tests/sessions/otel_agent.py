"""Write ``otlp_genai.json`` beside this file: two agent sessions as GenAI spans made by the
OpenTelemetry SDK, exported in the OTLP JSON shape. One trace is an ``invoke_agent`` span with a
``chat`` span per model call (the last holding the whole conversation); the other an
``invoke_agent`` span with ``execute_tool`` spans only (results recorded, the opt-in attribute)."""

from __future__ import annotations

import json
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

HERE = Path(__file__).parent
SAMPLE = json.loads((HERE / "openai_chat.json").read_text())[0]["messages"]
QUESTION = SAMPLE[1]["content"]


def genai(messages: list[dict]) -> str:
    """OpenAI chat messages in the GenAI conventions' message shape (role, typed parts)."""
    out = []
    for m in messages:
        if m["role"] == "tool":
            parts = [{"type": "tool_call_response", "id": m["tool_call_id"], "response": m["content"]}]
        else:
            parts = [{"type": "text", "content": m["content"]}] if m.get("content") else []
            for c in m.get("tool_calls", []):
                args = json.loads(c["function"]["arguments"])
                parts.append({"type": "tool_call", "id": c["id"], "name": c["function"]["name"], "arguments": args})
        out.append({"role": m["role"], "parts": parts})
    return json.dumps(out)


def sessions(tracer) -> None:
    with tracer.start_as_current_span("invoke_agent batch-agent") as agent:
        agent.set_attribute("gen_ai.operation.name", "invoke_agent")
        for end in range(3, len(SAMPLE) + 1, 2):  # a chat call after each tool result
            with tracer.start_as_current_span("chat gpt-4o") as chat:
                chat.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"})
                chat.set_attribute("gen_ai.input.messages", genai(SAMPLE[: end - 1]))
                chat.set_attribute("gen_ai.output.messages", genai([SAMPLE[end - 1]]))
    with tracer.start_as_current_span("invoke_agent batch-agent") as agent:
        agent.set_attribute("gen_ai.operation.name", "invoke_agent")
        agent.set_attribute("gen_ai.input.messages", genai([SAMPLE[1]]))
        agent.set_attribute("gen_ai.output.messages", genai([SAMPLE[-1]]))
        for call, result in zip(SAMPLE[2:-1:2], SAMPLE[3:-1:2], strict=True):
            c = call["tool_calls"][0]
            with tracer.start_as_current_span(f"execute_tool {c['function']['name']}") as span:
                span.set_attributes(
                    {
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": c["function"]["name"],
                        "gen_ai.tool.call.id": c["id"],
                        "gen_ai.tool.call.arguments": c["function"]["arguments"],
                        "gen_ai.tool.call.result": result["content"],
                    }
                )


def otlp_json(spans) -> dict:
    """The OTLP/JSON ``ExportTraceServiceRequest`` of ``spans`` (hex ids, typed attribute values)."""

    def value(v):
        if isinstance(v, bool):
            return {"boolValue": v}
        if isinstance(v, int):
            return {"intValue": str(v)}
        return {"stringValue": str(v)}

    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "batch-agent"}}]},
                "scopeSpans": [
                    {
                        "scope": {"name": "batch-agent"},
                        "spans": [
                            {
                                "traceId": f"{s.context.trace_id:032x}",
                                "spanId": f"{s.context.span_id:016x}",
                                **({"parentSpanId": f"{s.parent.span_id:016x}"} if s.parent else {}),
                                "name": s.name,
                                "kind": 3 if s.name.startswith("chat") else 1,
                                "startTimeUnixNano": str(s.start_time),
                                "endTimeUnixNano": str(s.end_time),
                                "attributes": [{"key": k, "value": value(v)} for k, v in s.attributes.items()],
                            }
                            for s in spans
                        ],
                    }
                ],
            }
        ]
    }


if __name__ == "__main__":
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sessions(provider.get_tracer("batch-agent"))
    (HERE / "otlp_genai.json").write_text(json.dumps(otlp_json(exporter.get_finished_spans()), indent=1) + "\n")
