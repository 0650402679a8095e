"""What a sweep shares between its jobs changes how much work is done, never what is logged.

Two arms against the scripted server in one multirun, which shares fixtures, the recorder and its
artifact texts between arms (the second arm logs the first arm's S and Jev recordings from memory),
then the second arm alone in a separate command, which reads every recording back from disk.
Traps it guards: a request artifact whose bytes depend on whether the call was made in this
process or replayed (the recorder once handed on the record as built, unsorted), an artifact text
made once per sweep that is not the text each condition used to serialise, a shared object that
leaks one arm's state into another (metrics or artifacts would differ).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import run_cli, without_calls
from tests.openai_server import Script, serve
from washexp.compaction.artifacts import to_json
from washexp.hashing import sha256_bytes

ARMS = ("S", "H")
COMMON = [
    "topn=1",
    "model=openai",
    "model.name=qwen3.8-max",
    "model.platform=scripted-test-server",
    "model.generations=1",
    "model.answers_per_context=2",
    "model.generation_temperature=0",  # the scripted server's sampled replies depend on arrival order
    "endpoint.max_concurrency=2",
    "task=[backup,payment,refactor]",
]


def _conditions(store: Path, experiment: str) -> dict[str, tuple[dict, dict]]:
    """run name -> (metrics, sha256 of every artifact but config.yaml, which names the recordings
    folder), from each condition's manifest."""
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    exp = client.get_experiment_by_name(experiment)
    out = {}
    for run in client.search_runs([exp.experiment_id], "tags.`washexp.kind` = 'condition'", max_results=100):
        manifest = json.loads(Path(client.download_artifacts(run.info.run_id, "manifest.json")).read_text())
        hashes = {k: v for k, v in manifest["artifacts"].items() if k != "config.yaml"}
        out[run.data.tags["mlflow.runName"]] = (run.data.metrics, hashes)
    return out


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """A multirun of both arms, then the last arm alone in another experiment, replaying the
    multirun's recordings (the separate command never calls the server)."""
    root = tmp_path_factory.mktemp("panel")
    script = Script(latency=0.02)
    with serve(script) as url:
        args = [*COMMON, f"endpoint.base_url={url}", f"endpoint.recordings={root / 'rec'}"]
        run_cli(["-m", f"method={','.join(ARMS)}", *args, "tracking.experiment=multirun"], root, premade=True)
        sent = script.count()
        run_cli([f"method={ARMS[-1]}", *args, "tracking.experiment=separate"], root)
        sent_again = script.count() - sent
    return root, sent, sent_again


def test_same_metrics_and_artifacts_made_now_or_replayed(both):
    root, sent, sent_again = both
    assert sent > 0 and sent_again == 0
    separate, multirun = _conditions(root, "separate"), _conditions(root, "multirun")
    assert len(separate) == 3 and len(multirun) == 6
    for name, (metrics, hashes) in separate.items():
        assert without_calls(multirun[name][0]) == without_calls(metrics), name  # calls: live there, replayed here
        assert metrics["calls_live"] == 0.0 and metrics["calls_replayed"] > 0, name
        # grade_traces.json names each trace's id in its own store (tracking, like a run id): it
        # differs by design; every result artifact, grades.json included, must not
        live_hashes = {k: v for k, v in multirun[name][1].items() if k != "grade_traces.json"}
        assert "grades.json" in hashes and live_hashes == {
            k: v for k, v in hashes.items() if k != "grade_traces.json"
        }, name


def test_a_request_artifact_is_its_recording_byte_for_byte(both):
    """...and the text each condition serialised before the recorder kept it (``to_json``)."""
    root, *_ = both
    recordings = {p.stem: p.read_bytes() for p in (root / "rec").rglob("*.json")}
    logged = []
    for _, hashes in _conditions(root, "multirun").values():
        for name, digest in hashes.items():
            if name.startswith("requests/"):
                data = recordings[name.removeprefix("requests/").removesuffix(".json")]
                assert digest == sha256_bytes(data) == sha256_bytes(to_json(json.loads(data)).encode()), name
                logged.append(name)
    assert len(logged) > len(set(logged))  # S and Jev recordings are logged by both arms
