"""A real HTTP server on 127.0.0.1 speaking the OpenAI chat-completions wire format, with
scripted behaviours. It is test equipment: its replies are scripted, never a model's result.

Requests are recognised by their content: the reader (a system message, then the task's
query), Jev (``prompts/jev.txt``), S (``prompts/summarize.txt``) and H (a checkpoint prompt,
native or Hermes': "TURNS TO SUMMARIZE"). Replies by kind:

- reader: ``Script.reader[task]``: ``correct`` (the expected facts, the default),
  ``wrong_types`` (every value as the wrong JSON type), ``malformed`` (prose around JSON) or
  ``fenced`` (the correct object inside a code fence); ``Script.models[name]`` sets the reader's
  mode for every task of requests naming that model (two scripted models on one server):
  ``context`` (the expected facts whose value is written in the request's context, the rest left
  out) or ``empty`` (``{"facts": {}}``); ``Script.reader[task] = "inverted"``: each fact whose
  needles are all in the request's context answered wrong (its value as another JSON type), each
  fact whose needles are not answered right (a reader that misreads what it has and guesses what
  it lacks: every fact lands in a loss cell);
- Jev: a score per unit; ``Script.jev[task]``: ``fenced`` (prose, then the object in a code
  fence), ``malformed`` (every reply; also ``Script.bad_jev``) or ``malformed_first`` (only the
  task's first Jev request);
- S and H: a short scripted body (H's is a valid no-user checkpoint within any allowance);
  ``Script.h[task] = "user_asked"`` attributes the work to a user instead;
- sampling: S, H and Jev requests at a temperature above 0 get a reply that differs per request
  (like a sampled generation); at temperature 0 the same request gets the same reply;
- the tokenize routes (``Script.tokenize``): ``vllm`` (``POST /tokenize`` with messages ->
  ``{"count"}``), ``llama.cpp`` (``POST /apply-template`` -> ``{"prompt"}``, ``POST /tokenize``
  with content -> ``{"tokens"}``) or None (404, as DashScope or OpenAI). Counts are scripted
  (the same formula as the chat replies' ``prompt_tokens``), never a tokenizer's.

``Script.hold[kind] = s`` answers each request of that kind after s seconds, so callers in other
processes ask while it is in flight (a cross-process race made real); ``s`` may instead be a
condition (a function of no argument), polled until it is true (at most ``HOLD_LIMIT_S``), so a test
holds a reply until what it waits for has happened instead of guessing how long that takes. Every
request keeps its arrival time (``at``: ``perf_counter``, ``wall``: ``time.time``) and the time
its hold ended (``released``: ``time.time``).

``Script.cached = n`` reports n of each reply's prompt tokens as cached
(``usage.prompt_tokens_details.cached_tokens``, at most its ``prompt_tokens``); ``Script.usage =
False`` sends replies without a ``usage`` object.

``Script.forced`` holds behaviours for the next requests, whatever their kind: ``"429:<s>"``
(with ``Retry-After: <s>``), ``"500"``, ``"408"``, ``"409"``, ``"400"``, ``"hang:<s>"`` (answer after s seconds,
past a short client timeout), ``"drop"`` (close the connection without a response), and bodies
that are no chat completion, all with status 200: ``"html"`` (a proxy's HTML error page),
``"empty"`` (a JSON content type and no body), ``"no-choices"`` (a JSON object without choices);
``"<status>-echo"`` (``401-echo``, ``400-echo``, ``429-echo``) answers that status with the
request's API key in the message (as some endpoints echo a key they refuse; a 429 with
``Retry-After: 0``).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from washexp.compaction.inputs.fixtures import load_tasks
from washexp.needles import norm

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "compaction"
S_BODY = "Scripted summary from the test server (not a model): {n} units were read."
H_BODY = (
    "## Historical Task Snapshot\nNone. This session contains no user-authored turns.\n\n"
    "## Critical Context\n- scripted checkpoint body from the test server"
)

HOLD_LIMIT_S = 300.0

HTML_PAGE = b"<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>\n"


def wrong_type(value):
    """The same value as another JSON type (strict grading must score it 0)."""
    return [value] if isinstance(value, str) else json.dumps(value)


def _written(value, context: str) -> bool:
    """Whether a value (each item of a list) is written in the context as text."""
    items = value if isinstance(value, list) else [value]
    return all(json.dumps(v).strip('"') in context or str(v) in context for v in items)


class Script:
    def __init__(self, latency: float = 0.0, tasks_root: Path = FIXTURES):
        self.latency = latency
        self.forced: deque[str] = deque()
        self.reader: dict[str, str] = {}
        self.models: dict[str, str] = {}
        self.bad_jev: set[str] = set()
        self.jev: dict[str, str] = {}
        self.h: dict[str, str] = {}
        self.tokenize: str | None = None
        self.serial: dict[tuple[str, str | None], int] = {}
        self.tasks = {t.query: t for t in load_tasks(tasks_root)}
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.in_flight = self.peak = 0
        self.hold: dict[str, float | Callable[[], bool]] = {}
        self.cached = 0
        self.usage = True

    def count_locked(self, kind: str | None = None) -> int:
        return sum(1 for r in self.requests if kind in (None, r["kind"]))

    def count(self, kind: str | None = None) -> int:
        with self.lock:
            return self.count_locked(kind)

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

    def reply(self, kind: str, task, messages: list[dict], temperature: float = 0.0, model: str = "") -> str:
        prompt = messages[0].get("content") or ""
        if kind == "read":
            mode = self.models.get(model) or (self.reader.get(task.id, "correct") if task else "malformed")
            expected = task.expected if task else {}
            if mode == "empty":
                return json.dumps({"facts": {}})
            if mode == "inverted":
                context = norm("\n".join(str(m.get("content") or "") for m in messages[2:]))
                kept = {f: all(norm(n) in context for n in task.needles[f]) for f in expected}
                return json.dumps({"facts": {k: wrong_type(v) if kept[k] else v for k, v in expected.items()}})
            if mode == "context":  # what a reader could answer from the evidence it was given
                context = "\n".join(str(m.get("content") or "") for m in messages[2:])
                return json.dumps({"facts": {k: v for k, v in expected.items() if _written(v, context)}})
            if mode == "wrong_types":
                return json.dumps({"facts": {k: wrong_type(v) for k, v in expected.items()}})
            if mode == "malformed":
                return "Here are the facts: " + json.dumps({"facts": expected})
            if mode == "fenced":
                return "```json\n" + json.dumps({"facts": expected}) + "\n```"
            return json.dumps({"facts": expected})
        units = prompt.count("\n### Unit ")
        tid = task.id if task else None
        with self.lock:
            n = self.serial[kind, tid] = self.serial.get((kind, tid), -1) + 1
        sample = n if temperature > 0 else 0  # a sampled generation differs; temperature 0 does not
        if kind == "Jev":
            mode = "malformed" if tid in self.bad_jev else self.jev.get(tid)
            if mode == "malformed" or (mode == "malformed_first" and n == 0):
                return '{"scores": [50, "high"'
            scores = json.dumps({"scores": [(i * 37 + sample) % 101 for i in range(units)]})
            return f"Here is my rating.\n```json\n{scores}\n```\nDone." if mode == "fenced" else scores
        if kind == "S":
            return S_BODY.format(n=units) + (f" (sample {sample})" if sample else "")
        if kind == "H":
            if self.h.get(tid) == "user_asked":
                return "## Historical Task Snapshot\nUser asked: investigate the incident\n\n## Critical Context\n- x"
            return H_BODY + (f" (sample {sample})" if sample else "")
        return "ok"

    def count_tokens(self, messages: list[dict]) -> int:
        """The scripted count: the chat replies' ``prompt_tokens`` formula."""
        return sum(len(str(m.get("content") or "")) for m in messages) // 4


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

    def _send_raw(self, content_type: str, data: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _tokenize(self, body: dict) -> None:
        """The scripted tokenize routes (see the module doc); 404 when the script has none."""
        s, route = self.script, self.path.rstrip("/").rsplit("/", 1)[-1]
        with s.lock:
            headers = {k.title(): v for k, v in self.headers.items()}
            s.requests.append({"kind": "tokenize", "task": None, "body": body, "headers": headers})
        if s.tokenize == "vllm" and route == "tokenize" and "messages" in body:
            return self._send(200, {"count": s.count_tokens(body["messages"]), "max_model_len": 32768})
        if s.tokenize == "llama.cpp" and route == "apply-template":
            text = "\n".join(str(m.get("content") or "") for m in body["messages"])
            return self._send(200, {"prompt": text})
        if s.tokenize == "llama.cpp" and route == "tokenize" and "content" in body:
            return self._send(200, {"tokens": list(range(len(body["content"]) // 4))})
        self._send(404, {"error": {"message": f"scripted: no route {self.path}"}})

    def do_POST(self):  # noqa: N802 (http.server's naming)
        s = self.script
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if not self.path.endswith("/chat/completions"):
            return self._tokenize(body)
        messages = body.get("messages") or [{}]
        kind, task = s.classify(messages)
        with s.lock:
            forced = s.forced.popleft() if s.forced else None
            entry = {
                "kind": kind,
                "task": task.id if task else None,
                "body": body,
                "headers": {k.title(): v for k, v in self.headers.items()},  # names are case-insensitive
                "forced": forced,
                "at": time.perf_counter(),
                "wall": time.time(),
            }
            s.requests.append(entry)
            s.in_flight += 1
            s.peak = max(s.peak, s.in_flight)
        try:
            hold = s.hold.get(kind, s.latency)
            if callable(hold):
                deadline = time.monotonic() + HOLD_LIMIT_S  # a bound, not a timing: the condition ends it
                while not hold() and time.monotonic() < deadline:
                    time.sleep(0.05)
            elif hold:
                time.sleep(hold)
            entry["released"] = time.time()
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
            elif forced == "html":
                return self._send_raw("text/html", HTML_PAGE)
            elif forced == "empty":
                return self._send_raw("application/json", b"")
            elif forced == "no-choices":
                return self._send_raw("application/json", b'{"id": "chatcmpl-scripted", "object": "chat.completion"}')
            elif forced and forced.endswith("-echo"):
                key = self.headers.get("Authorization", "").removeprefix("Bearer ")
                message = f"scripted: Incorrect API key provided: {key}. You passed {key!r}."
                status = int(forced.removesuffix("-echo"))
                headers = {"Retry-After": "0"} if status == 429 else None
                return self._send(status, {"error": {"message": message, "code": "invalid_api_key"}}, headers)
            elif forced == "400":
                return self._send(400, {"error": {"message": "scripted: this model does not accept that request"}})
            text = s.reply(kind, task, messages, body.get("temperature") or 0.0, str(body.get("model") or ""))
            prompt_tokens = s.count_tokens(messages)
            usage = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": len(text) // 4,
                "total_tokens": prompt_tokens + len(text) // 4,
            }
            if s.cached:
                usage["prompt_tokens_details"] = {"cached_tokens": min(s.cached, prompt_tokens)}
            reply = {
                "id": "chatcmpl-scripted",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "?"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            }
            self._send(200, {**reply, "usage": usage} if s.usage else reply)
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
