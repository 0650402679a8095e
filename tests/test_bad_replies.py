"""An endpoint that answers 200 with something that is no chat completion (a proxy's HTML page, an
empty body, an object without choices) is retried; when it never answers sensibly the sweep ends in
one line and exit 1, the condition recorded FAILED, no reply recorded, never a traceback."""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import scripted_model
from tests.openai_server import Script, serve
from tests.test_bad_input import TASK, make_project
from washexp.app import main as run_py
from washexp.errors import ModelError
from washexp.models.base import ChatRequest, ChatResponse
from washexp.models.openai_client import OpenAIModel

REQ = ChatRequest(({"role": "user", "content": "hello"},), 0.0, 16)
BAD_BODIES = {
    "html": "'<html><head><title>502 Bad Gateway</title>",
    "empty": "JSONDecodeError: Expecting value",
    "no-choices": "it has no choices",
}


@pytest.fixture
def server():
    script = Script()
    with serve(script) as url:
        yield script, url


@pytest.mark.parametrize("body", list(BAD_BODIES))
def test_a_bad_body_once_is_retried(server, body):
    script, url = server
    script.forced.append(body)
    model = OpenAIModel("qwen-test", url, timeout_s=5.0, backoff_s=0.01)
    assert model.chat(REQ) == ChatResponse("ok", 1, 0, "stop")
    assert [r["forced"] for r in script.requests] == [body, None]


@pytest.mark.parametrize("body", list(BAD_BODIES))
def test_a_bad_body_every_time_is_one_line_naming_it(server, body):
    script, url = server
    script.forced.extend([body] * 3)
    model = OpenAIModel("qwen-test", url, timeout_s=5.0, max_retries=2, backoff_s=0.01)
    with pytest.raises(ModelError) as err:
        model.chat(REQ)
    text = str(err.value)
    assert "\n" not in text and script.count() == 3
    assert text.startswith(f"{url}: gave up after 3 attempts; last error: the reply is not a chat completion")
    assert BAD_BODIES[body] in text


def test_a_sweep_whose_endpoint_answers_html_ends_in_one_line_exit_1(tmp_path, capfd):
    root = make_project(tmp_path)
    store, recordings = tmp_path / "store", tmp_path / "recordings"
    script = Script(tasks_root=root / "fixtures" / "compaction")
    script.forced.extend(["html"] * 10)  # more than the sweep asks: it never answers sensibly
    with serve(script) as url:
        code = run_py(
            [
                "method=full",
                f"task={TASK}",
                *scripted_model(url, recordings, "qwen-test", platform=None),
                "endpoint.max_retries=1",
                f"tracking.uri=sqlite:///{store / 'mlflow.db'}",
                f"tracking.artifacts={store / 'mlruns'}",
                f"hydra.run.dir={tmp_path / 'outputs'}",
            ],
            root=root,
        )
    _, err = capfd.readouterr()
    assert code == 1, err
    assert "Traceback" not in err
    washexp_lines = [line for line in err.splitlines() if line.startswith("washexp: ")]
    assert washexp_lines == [
        f"washexp: {url}: gave up after 2 attempts; last error: the reply is not a chat completion "
        "('<html><head><title>502 Bad Gateway</title></head><body><h1>5')"
    ]
    assert script.count("read") == 2
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("compaction").experiment_id])
    assert runs and {r.info.status for r in runs} == {"FAILED"}, "the failure is recorded, no run left open"
    assert not [p for p in recordings.rglob("*") if p.is_file()], "a reply that is no completion is never recorded"
