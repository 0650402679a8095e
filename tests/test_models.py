"""The model path through the real ``openai`` client against the scripted local server:
retries and backoff, one-line failures, bounded concurrency, the recorder, no secret on disk."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.openai_server import Script, serve
from washexp.compaction.backends.openai_roles import parse_scores
from washexp.errors import ModelError
from washexp.models.base import ChatRequest, ChatResponse, safe_url
from washexp.models.openai_client import OpenAIModel, api_key
from washexp.models.recorder import Recorder, request_key

SECRET = "sk-test-SECRET-feedface0123456789"
REQ = ChatRequest(({"role": "user", "content": "hello"},), 0.0, 16)


@pytest.fixture
def server():
    script = Script()
    with serve(script) as url:
        yield script, url


def _model(url: str, **kw) -> OpenAIModel:
    return OpenAIModel("qwen-test", url, **{"timeout_s": 5.0, "backoff_s": 0.01, **kw})


def test_429_then_ok_waits_for_retry_after(server):
    script, url = server
    script.forced.append("429:1")
    start = time.monotonic()
    assert _model(url).chat(REQ).text == "ok"
    assert time.monotonic() - start >= 1.0  # the header, not the 0.01 s backoff
    assert [r["forced"] for r in script.requests] == ["429:1", None]


@pytest.mark.parametrize("behaviour", ["500", "408", "409", "drop", "hang:3"])
def test_server_errors_drops_and_timeouts_are_retried(server, behaviour):
    script, url = server
    script.forced.append(behaviour)
    response = _model(url, timeout_s=1.0).chat(REQ)
    assert response == ChatResponse("ok", 1, 0, "stop")  # "hello" is 5 chars: 1 scripted token
    assert script.count() == 2


def test_a_400_fails_at_once_with_the_endpoints_message(server):
    script, url = server
    script.forced.extend(["400", "400"])
    with pytest.raises(ModelError) as err:
        _model(url).chat(REQ)
    assert script.count() == 1
    text = str(err.value)
    assert "\n" not in text and "HTTP 400" in text and "does not accept that request" in text
    assert url in text


def test_giving_up_names_endpoint_and_last_error(server):
    script, url = server
    script.forced.extend(["500"] * 3)
    with pytest.raises(ModelError, match=r"gave up after 3 attempts; last error: HTTP 500"):
        _model(url, max_retries=2).chat(REQ)
    assert script.count() == 3


def test_closing_the_client_ends_a_retry_that_is_backing_off(server):
    """Ctrl-C or SIGTERM closes the sweep's client while a call is backing off from a gone endpoint:
    the call gives up at once instead of sleeping through its remaining retries."""
    script, url = server
    script.forced.extend(["500"] * 5)
    model = _model(url, max_retries=4, backoff_s=600.0)  # ~an hour of backoff if left alone
    with ThreadPoolExecutor(1) as pool:
        call = pool.submit(model.chat, REQ)
        while script.count() < 1:
            time.sleep(0.01)
        start = time.monotonic()
        model.close()
        with pytest.raises(ModelError, match="the sweep is ending.*HTTP 500"):
            call.result(timeout=300)
    assert time.monotonic() - start < 120  # far from both sides: 600 s of backoff, or at once
    assert script.count() == 1


def test_requests_in_flight_never_exceed_max_concurrency(server):
    script, url = server
    three = threading.Event()

    def three_in_flight() -> bool:  # the first requests are held until three are in flight at once
        if script.in_flight >= 3:
            three.set()
        return three.is_set()

    script.hold["other"] = three_in_flight
    model = _model(url, max_concurrency=3)
    with ThreadPoolExecutor(12) as pool:
        list(pool.map(lambda _: model.chat(REQ), range(12)))
    assert script.peak == 3


def test_key_rules(monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    assert api_key("http://127.0.0.1:8000/v1", "NO_SUCH_KEY_VAR")  # a local server needs none
    with pytest.raises(ModelError, match="set NO_SUCH_KEY_VAR"):
        api_key("https://dashscope.example.com/v1", "NO_SUCH_KEY_VAR")
    # Trap: a URL can carry credentials of its own; messages show it without them.
    assert safe_url("https://user:pw@api.example.com:8443/v1?key=abc#x") == "https://api.example.com:8443/v1"


def test_strict_replay_refuses_a_missing_key(tmp_path):
    recorder = Recorder(None, "qwen-test", tmp_path, mode="strict")
    with pytest.raises(ModelError, match=request_key("qwen-test", REQ)):
        recorder.chat(REQ, "payment", "read")


def test_auto_replays_what_is_recorded(server, tmp_path):
    script, url = server
    recorder = Recorder(_model(url), "qwen-test", tmp_path)
    first = recorder.chat(REQ)
    again = Recorder(None, "qwen-test", tmp_path, mode="strict").chat(REQ)
    assert first == again and script.count() == 1
    other = ChatRequest(REQ.messages, 0.0, 16, generation=1)  # another generation: another call
    assert request_key("qwen-test", other) != request_key("qwen-test", REQ)


class _Slow:
    """A model that takes a while to answer and counts what it was asked."""

    def __init__(self, text: str):
        self.text, self.asked = text, 0

    def chat(self, request: ChatRequest) -> ChatResponse:
        self.asked += 1
        time.sleep(0.3)
        return ChatResponse(self.text, 1, 1, "stop")


def test_a_request_asked_by_several_recorders_at_once_is_sent_once(tmp_path):
    """Parallel jobs (one recorder each, here threads with their own lock handles, as processes
    have) asking one request: one is sent, the others wait for its record and replay it."""
    models = [_Slow(f"answer {i}") for i in range(4)]
    recorders = [Recorder(m, "m", tmp_path) for m in models]
    with ThreadPoolExecutor(4) as pool:
        replies = list(pool.map(lambda r: r.chat(REQ), recorders))
    assert sum(m.asked for m in models) == 1
    assert [r.calls for r in recorders].count(1) == 1 and sum(r.hits for r in recorders) == 3
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) == 1 and files[0].name == request_key("m", REQ) + ".json"  # no lock or temp file left
    stored = json.loads(files[0].read_text())["response"]["text"]
    assert {r.text for r in replies} == {stored}


def test_racing_writers_leave_one_valid_winner(tmp_path):
    """Should two writers still race (a filesystem that ignores the lock), the first record
    linked in place wins and the other adopts it."""
    key = request_key("m", REQ)
    first, second = (Recorder(None, "m", tmp_path) for _ in range(2))
    kept = first._write(key, {"key": key, "response": {"text": "first"}})
    assert second._write(key, {"key": key, "response": {"text": "second"}}) == kept
    assert json.loads(first.path(key).read_text())["response"]["text"] == "first"
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == [f"{key}.json"]


def test_no_secret_in_recordings_or_errors(server, tmp_path, monkeypatch):
    script, url = server
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    recorder = Recorder(_model(url), "qwen-test", tmp_path)
    recorder.chat(REQ)
    script.forced.append("400")
    with pytest.raises(ModelError) as err:
        recorder.chat(ChatRequest(REQ.messages, 0.0, 16, generation=2))
    assert script.requests[0]["headers"]["Authorization"] == f"Bearer {SECRET}"
    assert SECRET not in str(err.value)
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes() and b"Authorization" not in path.read_bytes()


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ('{"scores": [10, 90"', "not JSON"),
        # One fenced object is that object (issue 11, tests/test_study_fidelity.py); two are ambiguous.
        ('```json\n{"scores": [10, 90]}\n```\n```json\n{"scores": [90, 10]}\n```', "not JSON"),
        ('{"scores": [10]}', "1 scores for 2 units"),
        ('{"scores": [10, true]}', "unit 2 is True"),  # Trap: bool is an int in Python
        ('{"scores": [10, 101]}', "unit 2 is 101"),
        ('{"ranking": [10, 90]}', 'not {"scores"'),
    ],
)
def test_jev_ranking_is_parsed_strictly(reply, problem):
    with pytest.raises(ValueError, match=problem):
        parse_scores(reply, 2)


def test_jev_ranking_accepts_exact_json():
    assert parse_scores('{"scores": [0, 55.5]}', 2) == [0.0, 55.5]


def test_a_corrupt_recording_is_one_clear_error(tmp_path):
    recorder = Recorder(None, "qwen-test", tmp_path, mode="strict")
    path = recorder.path(request_key("qwen-test", REQ))
    path.parent.mkdir(parents=True)
    path.write_text('{"key": "trunc', encoding="utf-8")
    with pytest.raises(ModelError, match=r"not a valid recording .* delete it to ask the model again"):
        recorder.chat(REQ)
