"""Write ``otlp_genai_openai.jsonl`` beside this file: a real agent session (SWE-agent's
``function_calling_simple`` demonstration, line 2 of ``results/sessions-swe-agent/sessions.jsonl``)
replayed through OpenTelemetry's own GenAI instrumentation and written by its own OTLP JSON file
exporter. Nothing here encodes a span:

- each model call goes through the real ``openai`` client, instrumented by
  ``opentelemetry-instrumentation-genai-openai`` (``chat`` spans with ``gen_ai.input.messages`` and
  ``gen_ai.output.messages``, the latest experimental conventions, content on spans);
- the agent and its tool calls are ``invoke_agent`` and ``execute_tool`` spans of
  ``opentelemetry-util-genai``'s ``TelemetryHandler`` (the result recorded: the opt-in attribute);
- ``opentelemetry-exporter-otlp-json-file``'s ``FileSpanExporter`` writes the file.

The model is a stub on 127.0.0.1 that answers call k with the trajectory's k-th assistant message;
the tools answer with the trajectory's recorded results. The trajectory ends on its ``submit``
result; the replay's last model call (after it) is answered "Submitted." by the stub.

Run it in a venv with ``openai opentelemetry-sdk opentelemetry-exporter-otlp-json-file
opentelemetry-instrumentation-genai-openai`` (not washexp's dependencies)."""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "span_only"

from openai import OpenAI  # noqa: E402
from opentelemetry.exporter.otlp.json.file.trace_exporter import FileSpanExporter  # noqa: E402
from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.util.genai.handler import TelemetryHandler  # noqa: E402

HERE = Path(__file__).parent
SOURCE = HERE.parents[2] / "results" / "sessions-swe-agent" / "sessions.jsonl"
HISTORY = json.loads(SOURCE.read_text().splitlines()[1])["messages"]
ASSISTANT = [m for m in HISTORY if m["role"] == "assistant"]
RESULTS = {m["tool_call_ids"][0]: m["content"] for m in HISTORY if m["role"] == "tool"}


def text(content) -> str:
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


class Stub(BaseHTTPRequestHandler):
    calls = 0

    def do_POST(self):  # noqa: N802 (the stdlib's name)
        self.rfile.read(int(self.headers["Content-Length"]))
        k, Stub.calls = Stub.calls, Stub.calls + 1
        if k < len(ASSISTANT):
            m = ASSISTANT[k]
            message = {"role": "assistant", "content": text(m["content"])}
            calls = [{"id": c["id"], "type": "function", "function": c["function"]} for c in m["tool_calls"]]
            message["tool_calls"] = calls
            finish = "tool_calls"
        else:
            message, finish = {"role": "assistant", "content": "Submitted."}, "stop"
        body = json.dumps(
            {
                "id": f"chatcmpl-{k}",
                "object": "chat.completion",
                "created": 1700000000 + k,
                "model": "gpt-4o",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main() -> None:
    out = HERE / "otlp_genai_openai.jsonl"
    out.unlink(missing_ok=True)
    provider = TracerProvider(resource=Resource.create({"service.name": "swe-agent-replay"}))
    exporter = FileSpanExporter(out)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    handler = TelemetryHandler(tracer_provider=provider)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = OpenAI(base_url=f"http://127.0.0.1:{server.server_port}/v1", api_key="stub")
    messages = [{"role": "user", "content": text(HISTORY[1]["content"])}]
    with handler.invoke_local_agent(request_model="gpt-4o", agent_name="swe-agent"):
        while True:
            reply = client.chat.completions.create(model="gpt-4o", messages=messages).choices[0].message
            messages.append(reply.model_dump(exclude_none=True, include={"role", "content", "tool_calls"}))
            if not reply.tool_calls:
                break
            for call in reply.tool_calls:
                with handler.tool(call.function.name) as tool:
                    tool.tool_call_id = call.id
                    tool.arguments = call.function.arguments
                    tool.tool_result = RESULTS[call.id]
                messages.append({"role": "tool", "tool_call_id": call.id, "content": RESULTS[call.id]})
    server.shutdown()
    provider.shutdown()


if __name__ == "__main__":
    main()
