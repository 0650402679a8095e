"""A real HTTP server on 127.0.0.1 speaking the OpenAI chat-completions wire format, with
scripted behaviours. It is test equipment: its replies are scripted, never a model's result.

Requests are recognised by their content: the reader (a system message, then the task's
query), Jev (``prompts/jev.txt``), S (``prompts/summarize.txt``) and H (a checkpoint prompt,
native or Hermes': "TURNS TO SUMMARIZE"). Replies by kind:

- reader: ``Script.reader[task]``: ``correct`` (the expected facts, the default),
  ``wrong_types`` (every value as the wrong JSON type) or ``malformed`` (prose around JSON);
- Jev: a score per unit, or a malformed ranking for tasks in ``Script.bad_jev``;
- S and H: a short scripted body (H's is a valid no-user checkpoint within any allowance).

``Script.forced`` holds behaviours for the next requests, whatever their kind: ``"429:<s>"``
(with ``Retry-After: <s>``), ``"500"``, ``"408"``, ``"409"``, ``"400"``, ``"hang:<s>"`` (answer after s seconds,
past a short client timeout), ``"drop"`` (close the connection without a response).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from washexp.compaction.fixtures import load_tasks

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "compaction"
S_BODY = "Scripted summary from the test server (not a model): {n} units were read."
H_BODY = (
    "## Historical Task Snapshot\nNone. This session contains no user-authored turns.\n\n"
    "## Critical Context\n- scripted checkpoint body from the test server"
)


def wrong_type(value):
    """The same value as another JSON type (strict grading must score it 0)."""
    return [value] if isinstance(value, str) else json.dumps(value)


class Script:
    def __init__(self, latency: float = 0.0, tasks_root: Path = FIXTURES):
        self.latency = latency
        self.forced: deque[str] = deque()
        self.reader: dict[str, str] = {}
        self.bad_jev: set[str] = set()
        self.tasks = {t.query: t for t in load_tasks(tasks_root)}
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.in_flight = self.peak = 0

    def count(self, kind: str | None = None) -> int:
        with self.lock:
            return sum(1 for r in self.requests if kind in (None, r["kind"]))

    def task_in(self, text: str):
        found = [t for q, t in self.tasks.items() if q in text]
        return max(found, key=lambda t: len(t.query)) if found else None

    def classify(self, messages: list[dict]) -> tuple[str, object]:
        first = messages[0].get("content") or ""
        if messages[0].get("role") == "system":
            return "read", self.tasks.get(messages[1].get("content"))
        if first.startswith("You are rating evidence"):
            return "Jev", self.task_in(first)
        if first.startswith("You are compressing the evidence"):
            return "S", self.task_in(first)
        if "TURNS TO SUMMARIZE" in first:
            return "H", self.task_in(first)
        return "other", None

    def reply(self, kind: str, task, messages: list[dict]) -> str:
        prompt = messages[0].get("content") or ""
        if kind == "read":
            mode = self.reader.get(task.id, "correct") if task else "malformed"
            expected = task.expected if task else {}
            if mode == "wrong_types":
                return json.dumps({"facts": {k: wrong_type(v) for k, v in expected.items()}})
            if mode == "malformed":
                return "Here are the facts: " + json.dumps({"facts": expected})
            return json.dumps({"facts": expected})
        units = prompt.count("\n### Unit ")
        if kind == "Jev":
            if task and task.id in self.bad_jev:
                return '{"scores": [50, "high"'
            return json.dumps({"scores": [(i * 37) % 101 for i in range(units)]})
        if kind == "S":
            return S_BODY.format(n=units)
        if kind == "H":
            return H_BODY
        return "ok"


class _Handler(BaseHTTPRequestHandler):
    script: Script
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall

    def log_message(self, *args):  # quiet
        pass

    def _send(self, status: int, payload: dict, headers: dict | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):  # noqa: N802 (http.server's naming)
        s = self.script
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        messages = body.get("messages") or [{}]
        kind, task = s.classify(messages)
        with s.lock:
            forced = s.forced.popleft() if s.forced else None
            s.requests.append(
                {
                    "kind": kind,
                    "task": task.id if task else None,
                    "body": body,
                    "headers": dict(self.headers),
                    "forced": forced,
                }
            )
            s.in_flight += 1
            s.peak = max(s.peak, s.in_flight)
        try:
            if s.latency:
                time.sleep(s.latency)
            if forced == "drop":
                self.close_connection = True
                return
            if forced and forced.startswith("hang:"):
                time.sleep(float(forced.split(":")[1]))
            elif forced and forced.startswith("429:"):
                return self._send(
                    429, {"error": {"message": "scripted rate limit"}}, {"Retry-After": forced.split(":")[1]}
                )
            elif forced in ("500", "408", "409"):
                return self._send(int(forced), {"error": {"message": f"scripted status {forced}"}})
            elif forced == "400":
                return self._send(400, {"error": {"message": "scripted: this model does not accept that request"}})
            text = s.reply(kind, task, messages)
            prompt_tokens = sum(len(str(m.get("content") or "")) for m in messages) // 4
            self._send(
                200,
                {
                    "id": "chatcmpl-scripted",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model", "?"),
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                    ],
                    "usage": {
                        "prompt_tokens": prompt_tokens,
                        "completion_tokens": len(text) // 4,
                        "total_tokens": prompt_tokens + len(text) // 4,
                    },
                },
            )
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            with s.lock:
                s.in_flight -= 1


@contextmanager
def serve(script: Script):
    """Run the server in a thread; yields the ``base_url`` (``http://127.0.0.1:<port>/v1``)."""
    handler = type("Handler", (_Handler,), {"script": script})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
