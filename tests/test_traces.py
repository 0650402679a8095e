"""Every model call of a condition a span of an MLflow trace attached to its run (``tracking.traces``).

Against the scripted loopback server, as the real command line: a small sweep (S top0 and top1
share their summaries and rankings) gives a chat span for every call behind every condition run,
in one trace per role and task, found by ``mlflow.search_traces(run_id=...)``; each grade names
the trace of the answer it graded; a second sweep from the same recordings into a fresh store
makes no HTTP call and marks every trace replayed; ``tracking.traces=false`` writes none and
keeps every identity. Then calls written by :class:`TraceStore` (MLflow's public tracing API) are
read back by a fresh client: the grouping, a chat span, usage, masking, the run a trace came from
and the run it is linked to, and a refusal making its trace ERROR.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import run_cli, scripted_model
from tests.openai_server import Script, serve
from washexp.tracking.traces import ModelCall, TraceStore, TraceWriteError

SECRET = "sk-test-SECRET-traces-0123456789"


def _sweep(url: str, store: Path, recordings: Path, *extra: str):
    return run_cli(
        [
            "-m",
            "method=S",
            "topn=0,1",
            *scripted_model(url, recordings, "qwen3.8-max", generations=2, answers=2),
            "task=backup",
            *extra,
        ],
        store,
        env={"OPENAI_API_KEY": SECRET, "CI": "1"},
        premade=True,  # the store is a container here: its making is tests/test_first_run_kills.py's
    )


def _conditions(store: Path):
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    exp = client.get_experiment_by_name("compaction")
    runs = client.search_runs([exp.experiment_id], "tags.`washexp.kind` = 'condition'", max_results=100)
    return client, exp.experiment_id, runs


def _traces(store: Path, experiment_id: str, run_id: str | None = None):
    mlflow.set_tracking_uri(f"sqlite:///{store / 'mlflow.db'}")
    return mlflow.search_traces(locations=[experiment_id], run_id=run_id, return_type="list", max_results=1000)


def _calls(traces) -> list:
    """The chat spans of ``traces``: one per model call."""
    return [span for t in traces for span in t.data.spans if span.span_type == "CHAT_MODEL"]


def _keys(client, run_id: str) -> set[str]:
    return {Path(a.path).stem for a in client.list_artifacts(run_id, "requests")}


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    root = tmp_path_factory.mktemp("traces")
    stores = {name: root / name for name in ("live", "replay", "off")}
    for folder in stores.values():
        folder.mkdir()
    script = Script()
    with serve(script) as url:
        _sweep(url, stores["live"], root / "rec")
        live_calls = script.count()
        _sweep(url, stores["replay"], root / "rec")
        replay_calls = script.count() - live_calls
        _sweep(url, stores["off"], root / "rec", "tracking.traces=false")
    return stores, live_calls, replay_calls


def test_every_call_of_every_condition_is_a_span_of_a_trace_of_its_run(sweeps):
    stores, live_calls, _ = sweeps
    client, exp, runs = _conditions(stores["live"])
    assert len(runs) == 2 and live_calls > 0
    every = _traces(stores["live"], exp)
    assert len(_calls(every)) == live_calls  # every call once, however many conditions share it
    assert len(every) < live_calls  # grouped: a trace per role and task a run brought
    for t in every:
        root, calls = t.data.spans[0], _calls([t])
        assert root.span_type == "CHAIN" and root.parent_id is None and t.info.tags["washexp.replayed"] == "false"
        assert {(c.attributes["washexp.role"], c.attributes["washexp.task"]) for c in calls} == {
            (t.info.tags["washexp.role"], t.info.tags["washexp.task"])
        }
        assert all(c.parent_id == root.span_id for c in calls)
        assert t.info.token_usage["input_tokens"] > 0 and t.info.execution_duration is not None
    by_run = {}
    for run in runs:
        traces = _traces(stores["live"], exp, run.info.run_id)
        calls = _calls(traces)
        keys = [c.attributes["washexp.recording_key"] for c in calls]
        assert set(keys) == _keys(client, run.info.run_id) and len(keys) == len(set(keys))
        by_run[run.info.run_id] = {t.info.trace_id for t in traces}
        for span in calls:
            assert span.inputs["messages"] and span.outputs["choices"][0]["message"]["content"]
            assert span.attributes["washexp.replayed"] is False
    shared = {t.info.trace_id for t in every if t.info.tags["washexp.role"] in ("S", "Jev")}
    assert shared and all(shared <= ids for ids in by_run.values())  # top0 and top1 share S and Jev
    owned = [ids - shared for ids in by_run.values()]
    assert all(owned) and not set.intersection(*owned)  # each its own reader calls


def test_a_grade_names_the_trace_of_the_answer_it_graded(sweeps):
    stores, *_ = sweeps
    client, exp, runs = _conditions(stores["live"])
    mlflow.set_tracking_uri(f"sqlite:///{stores['live'] / 'mlflow.db'}")
    for run in runs:
        grades = client.load_table(exp, "grade_traces.json", run_ids=[run.info.run_id])
        assert grades["trace_id"].notna().all()
        own = {t.info.trace_id for t in _traces(stores["live"], exp, run.info.run_id)}
        for (g, a), tid in grades.groupby(["generation", "answer"])["trace_id"].first().items():
            trace = mlflow.get_trace(tid)
            assert tid in own and trace.info.tags["washexp.role"] == "read"
            slots = {(s.attributes["washexp.generation"], s.attributes["washexp.answer"]) for s in _calls([trace])}
            assert (g, a) in slots


def test_a_replayed_sweep_marks_every_trace_replayed(sweeps):
    stores, live_calls, replay_calls = sweeps
    assert replay_calls == 0
    client, exp, runs = _conditions(stores["replay"])
    every = _traces(stores["replay"], exp)
    assert len(_calls(every)) == live_calls
    assert {t.info.tags["washexp.replayed"] for t in every} == {"true"}
    assert {s.attributes["washexp.replayed"] for s in _calls(every)} == {True}
    for run in runs:
        assert len(_calls(_traces(stores["replay"], exp, run.info.run_id))) == len(_keys(client, run.info.run_id))


def test_traces_off_writes_none_and_keeps_every_identity(sweeps):
    stores, *_ = sweeps
    client, exp, runs = _conditions(stores["off"])
    assert runs and _traces(stores["off"], exp) == []
    assert "grade_traces.json" not in {a.path for a in client.list_artifacts(runs[0].info.run_id)}
    _, _, live = _conditions(stores["live"])
    hashes = {r.data.tags["washexp.hash"] for r in runs}
    assert hashes == {r.data.tags["washexp.hash"] for r in live}


# -- one call written by TraceStore, read back through MLflow's public API -----------------------


def _call(key: str, replayed: bool = False, refused: bool = False, role: str = "read") -> ModelCall:
    end = time.time_ns()
    record = {
        "key": key,
        "model": "qwen3.8-max",
        "role": role,
        "request": {
            "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": f"q {SECRET}"}],
            "generation": 1,
            "answer": 0,
        },
        "response": {"text": '{"facts": {}}', "prompt_tokens": 12, "completion_tokens": 5, "finish_reason": "stop"},
    }
    if refused:
        record["over_window"] = f"too long for the window ({SECRET})"
    return ModelCall.of(record, end - 250_000_000, end, replayed, task="backup", cost_usd=0.25)


@pytest.mark.parametrize("async_logging", ["true", "false"])
def test_written_traces_read_back_through_a_fresh_client(tmp_path, monkeypatch, async_logging):
    monkeypatch.setenv("WASHEXP_TEST_API_KEY", SECRET)  # a secret variable: masked wherever written
    monkeypatch.setenv("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", async_logging)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    client = MlflowClient(uri)
    exp = client.create_experiment("t", artifact_location=(tmp_path / "art").as_uri())
    first, second = client.create_run(exp).info.run_id, client.create_run(exp).info.run_id
    store = TraceStore(lambda: (client, exp))
    call, refused, summary = _call("k" * 64), _call("r" * 64, refused=True), _call("s" * 64, role="S")
    placeholder = store.trace_id(call.key)
    store.write(first, (call, summary, refused))
    store.write(second, (call,))  # the same call in a second condition: linked, not written twice
    stored = store.stored(call.key)
    assert store.stored_ids((call,)) == {placeholder: stored} and stored != placeholder
    assert store.stored(refused.key) == stored != store.stored(summary.key)  # one trace per role and task
    assert store.stored_ids((summary,)).keys() == {store.trace_id(summary.key)}  # a run's own calls only

    reader = MlflowClient(uri)  # what a user's reader sees
    every = reader.search_traces(locations=[exp], max_results=100)
    assert len(every) == 2
    trace = reader.get_trace(stored)
    info, (root, span, bad) = trace.info, trace.data.spans
    assert info.state == "ERROR" and info.trace_metadata["mlflow.sourceRun"] == first  # it holds a refusal
    assert info.token_usage == {"input_tokens": 24, "output_tokens": 10, "total_tokens": 34}
    assert info.tags["washexp.replayed"] == "false"
    assert info.tags["washexp.role"] == "read" and info.tags["washexp.task"] == "backup"
    assert root.span_type == "CHAIN" and root.name == "read backup" and root.status.status_code == "ERROR"
    assert root.inputs == {"calls": [call.name, refused.name]} and root.outputs == {"answered": 1, "refused": 1}
    assert span.span_type == "CHAT_MODEL" and span.name == call.name and span.parent_id == root.span_id
    assert span.attributes["washexp.recording_key"] == call.key and span.status.status_code == "OK"
    assert span.inputs["messages"][1]["content"] == "q ***"
    assert span.outputs["choices"][0]["message"]["content"] == '{"facts": {}}'
    assert (span.start_time_ns, span.end_time_ns) == (call.started_ns, call.ended_ns)
    assert span.attributes["washexp.replayed"] is False and span.attributes["washexp.cost_usd"] == 0.25
    assert (span.attributes["washexp.generation"], span.attributes["washexp.answer"]) == (1, 0)
    assert bad.status.status_code == "ERROR" and bad.outputs == {"error": "too long for the window (***)"}
    ranked = reader.get_trace(store.stored(summary.key))
    assert ranked.info.state == "OK" and ranked.info.tags["washexp.role"] == "S"
    assert [s.name for s in ranked.data.spans] == ["S backup", summary.name]
    dumped = json.dumps([t.to_dict() for t in (trace, ranked)])
    assert SECRET not in dumped and "***" in dumped
    assert {t.info.trace_id for t in reader.search_traces(locations=[exp], run_id=first)} == {
        stored,
        store.stored(summary.key),
    }
    assert {t.info.trace_id for t in reader.search_traces(locations=[exp], run_id=second)} == {stored}


def test_a_trace_the_store_did_not_keep_fails_the_write(tmp_path, monkeypatch):
    """MLflow's exporter only logs a trace it could not store: the write asks the store after."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    client = MlflowClient(uri)
    exp = client.create_experiment("t", artifact_location=(tmp_path / "art").as_uri())
    run = client.create_run(exp).info.run_id
    monkeypatch.setattr(mlflow.tracing.export.mlflow_v3.MlflowV3SpanExporter, "export", lambda self, spans: None)
    store = TraceStore(lambda: (client, exp))
    with pytest.raises(TraceWriteError, match="did not store 1 of its 1 traces"):
        store.write(run, (_call("k" * 64),))


# -- a wash condition's calls (a model washer) ----------------------------------------------------


def test_a_model_washers_calls_are_traces_of_their_store_runs(tmp_path):
    from tests.test_wash_model_washers import MODEL, SUPERSEDED_FAT
    from tests.wash_model_server import WashScript
    from tests.wash_model_server import serve as serve_wash

    script = WashScript(fat=SUPERSEDED_FAT)
    args = ["-m", "benchmark=wash", "measurement=ceiling", "store=[superseded]", "model=openai", "washer=coalwash"]
    with serve_wash(script) as url:
        run_cli(
            [*args, f"model.name={MODEL}", f"endpoint.base_url={url}", f"endpoint.recordings={tmp_path / 'rec'}"],
            tmp_path,
        )
    assert script.requests
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = client.get_experiment_by_name("wash").experiment_id
    stores = client.search_runs([exp], "tags.`washexp.kind` = 'wash-store'")
    every = _traces(tmp_path, exp)
    assert len(_calls(every)) == len(list((tmp_path / "rec").glob("*/*.json")))  # every recorded call, once
    per_run = [_traces(tmp_path, exp, r.info.run_id) for r in stores]
    assert sum(len(t) for t in per_run) >= len(every) > 0
    for traces in per_run:
        assert all(t.info.tags["washexp.role"].startswith("wash ") for t in traces)
        assert all(t.info.tags["washexp.task"] == "superseded" for t in traces)
        assert {t.info.tags["washexp.replayed"] for t in traces} <= {"false"}
