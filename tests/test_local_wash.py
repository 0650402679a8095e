"""The model washers on ``model=local``, as a user runs them: ``python run.py -m benchmark=wash ...
washer=coalwash model=local``: the real llama.cpp server washexp starts itself, the real
Qwen2.5-Coder-0.5B-Instruct file (the default tier), the real openai client, a real store copy washed, gated and scored.

Traps guarded: ``model=local`` refused for washers (it was, until the washers shared the local
server with the compaction roles); a local model's file and window missing from the wash runs'
identity and params (two GGUF files would share a result); the server's log lost; a server left
running after the sweep; a strict replay that starts a server or changes a number.

What the model proposes is its own: the test asserts the runs finished, the model was asked (the
endpoint reported tokens) and every round was scored, never what it cut.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import run_cli, without_calls
from tests.local_gate import DEFAULT_NAME, N_CTX, default_gguf, gate
from tests.test_local_model import _gone, _servers

COMMON = [
    "benchmark=wash",
    "measurement=ceiling",
    "store=[superseded]",
    "wash.measurement.rounds=1",
    "model=local",
    "model.max_tokens=256",  # a bound on a small model's rambling
    "endpoint.threads=2",
]
WASHERS = (["washer=coalwash"], ["washer=plain", "gates=false"])


def _runs(store: Path):
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    exp = client.get_experiment_by_name("wash")
    return client, client.search_runs([exp.experiment_id], max_results=1000)


@pytest.fixture(scope="module")
def washed(request, tmp_path_factory):
    gate(request)
    root = tmp_path_factory.mktemp("local-wash")
    rec = root / "rec"
    first, again = root / "store", root / "store-again"
    first.mkdir(), again.mkdir()
    for washer in WASHERS:
        run_cli(["-m", *COMMON, *washer, f"endpoint.recordings={rec}"], first, env={"CI": "1"})
    servers = _servers(root / "llama-server")
    for washer in WASHERS:  # a fresh store, the same recordings: no server, no call
        run_cli(
            ["-m", *COMMON, *washer, f"endpoint.recordings={rec}", "endpoint.replay=strict"], again, env={"CI": "1"}
        )
    return root, rec, first, again, servers


@pytest.mark.local
def test_both_model_washers_wash_a_store_on_the_local_model(washed):
    _root, _rec, first, _again, _servers_started = washed
    _client, runs = _runs(first)
    stores = [r for r in runs if r.data.tags["washexp.kind"] == "wash-store"]
    assert {r.data.tags["washer"] for r in stores} == {"coalwash", "plain"}
    assert all(r.info.status == "FINISHED" for r in runs)
    for run in stores:
        assert run.data.metrics["cost_tokens"] > 0  # the model was asked and the server counted it
        assert run.data.metrics["rounds"] == 1 and run.data.metrics["muscle_total"] == 10
        assert 0 <= run.data.metrics["muscle_lost"] <= 10  # scored: what it cut is the model's own


@pytest.mark.local
def test_the_gguf_file_and_window_are_in_every_runs_params_and_recording(washed):
    from washexp.models.llama_server import file_sha256

    _root, rec, first, _again, _ = washed
    _client, runs = _runs(first)
    sha = file_sha256(default_gguf())
    for run in runs:
        served = json.loads(run.data.params["served"])
        assert served["gguf"]["sha256"] == sha and served["n_ctx"] == N_CTX
        assert served["server"].startswith("llama-cpp-python ")
    models = {json.loads(p.read_text())["model"] for p in rec.rglob("*.json")}
    assert models == {f"{DEFAULT_NAME}@gguf-sha256:{sha}/n_ctx:{N_CTX}"}
    assert {run.data.params["gguf_sha256"] for run in runs} == {sha}  # flat: the MLflow UI filters on it


@pytest.mark.local
def test_strict_replay_starts_no_server_and_gives_identical_metrics(washed):
    root, _rec, first, again, servers = washed
    assert len(_servers(root / "llama-server")) == len(servers) == 2  # one per command, none for the replays
    by_name = lambda runs: {r.data.tags["mlflow.runName"]: without_calls(r.data.metrics) for r in runs}  # noqa: E731
    assert by_name(_runs(again)[1]) == by_name(_runs(first)[1])


@pytest.mark.local
def test_the_server_log_is_a_measurement_artifact_and_no_server_is_left(washed):
    _root, _rec, first, _again, servers = washed
    client, runs = _runs(first)
    parents = [r for r in runs if r.data.tags["washexp.kind"] == "measurement"]
    assert len(parents) == 2
    for parent in parents:
        text = Path(client.download_artifacts(parent.info.run_id, "llama-server.log")).read_text()
        assert "POST /v1/chat/completions" in text
    assert all(_gone(pid, port) for pid, port in servers)
