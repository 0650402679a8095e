"""An unusable endpoint ends the sweep in one line and a non-zero exit, with no run left open."""

from __future__ import annotations

import socket

from mlflow.tracking import MlflowClient

from tests.conftest import run_cli


def _closed_port() -> int:
    with socket.socket() as s:  # bound, then released: nothing listens there
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_endpoint_stops_the_sweep(store):
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    proc = run_cli(
        [
            "-m",
            "topn=0..2",
            "model=openai",
            f"endpoint.base_url={url}",
            "model.name=qwen3.8-max",
            "endpoint.max_retries=0",
            f"endpoint.recordings={store / 'rec'}",
            "task=[backup,refactor]",
        ],
        store,
        check=False,
        env={"CI": "1"},
    )
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"washexp: {url}: gave up after 1 attempt;")
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("compaction").experiment_id])
    # The first arm stopped. The second may have started beside its last conditions (arms overlap)
    # and stopped with it; the third job never started (it would only have waited and failed alike).
    names = sorted(r.info.run_name for r in runs)
    assert names[:3] == ["S top0 · arm", "S top0 · backup", "S top0 · refactor"]
    assert names[3:] in ([], ["S top1 · arm", "S top1 · backup", "S top1 · refactor"]), names
    assert {r.info.status for r in runs} == {"FAILED"}
    assert all("gave up" in r.data.tags["washexp.error"] for r in runs)


def test_unreachable_washer_endpoint_stops_the_wash_sweep(store):
    """A model washer whose endpoint cannot be used is not a failed round of each store in turn
    (every one would wait and fail alike): the sweep ends, exit 1, its runs FAILED."""
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    proc = run_cli(
        [
            "benchmark=wash",
            "measurement=ceiling",
            "washer=plain",
            "gates=false",
            "model=openai",
            f"endpoint.base_url={url}",
            "model.name=qwen3.8-max",
            "endpoint.max_retries=0",
            f"endpoint.recordings={store / 'rec'}",
            "store=[superseded,dup-heavy]",
        ],
        store,
        check=False,
        env={"CI": "1"},
    )
    assert proc.returncode == 1, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("washexp:")]
    assert lines == [f"washexp: {url}: gave up after 1 attempt; last error: connection failed (ConnectError)"]
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("wash").experiment_id])
    assert runs and {r.info.status for r in runs} == {"FAILED"}, [(r.info.run_name, r.info.status) for r in runs]
