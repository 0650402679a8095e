"""The format preflight: re-answer after a follow-up fix without touching summaries or rankings.

The study's first answer pass exposed under-specified follow-up formats; the fix re-asked two
tasks with the same frozen S and Jev, and kept the first answers apart as a preflight. Here:
answer with ``phase=preflight``, sharpen a field description, answer again with ``phase=final``.
Replies come from the scripted local server: they test the harness, never a model.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from tests.conftest import run_cli, scripted_model
from tests.openai_server import Script, serve

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "compaction"


@pytest.mark.slow
def test_preflight_reuses_frozen_summaries_and_stays_apart(tmp_path):
    fixtures = tmp_path / "fixtures"
    shutil.copytree(FIXTURES / "meeting_notes", fixtures / "meeting_notes")
    store, recordings = tmp_path / "store", tmp_path / "recordings"
    store.mkdir()
    script = Script(tasks_root=fixtures)

    def answer(phase: str):
        return run_cli(
            [
                "method=S",
                "topn=1",
                *scripted_model(url, recordings, "qwen3.8-max", platform=None, generations=None, answers=None),
                f"benchmark.fixtures={fixtures}",
                "task=meeting_notes",
                f"phase={phase}",
            ],
            store,
            env={"CI": "1"},
        )

    with serve(script) as url:
        answer("preflight")
        before = {k: script.count(k) for k in ("S", "Jev", "read")}
        task_yaml = fixtures / "meeting_notes" / "task.yaml"
        task = yaml.safe_load(task_yaml.read_text(encoding="utf-8"))
        task["fields"]["third"] += " Give the text only, never a leading dash or bullet."
        task_yaml.write_text(yaml.safe_dump(task, allow_unicode=True, sort_keys=False), encoding="utf-8")
        answer("final")
        after = {k: script.count(k) for k in ("S", "Jev", "read")}

    assert before["S"] == after["S"] == 3 and before["Jev"] == after["Jev"] == 3  # frozen: never asked again
    assert after["read"] - before["read"] == 6  # 3 generations x 2 answers, asked anew

    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    exp = client.get_experiment_by_name("compaction")
    runs = client.search_runs([exp.experiment_id], "tags.`washexp.kind` = 'condition'")
    by_phase = {r.data.tags["phase"]: r for r in runs}
    assert sorted(by_phase) == ["final", "preflight"]

    def artifact(run, path):
        return Path(client.download_artifacts(run.info.run_id, path)).read_bytes()

    for path in ("summary/g0.txt", "summary/g2.txt", "ranking/g1.json"):
        assert artifact(by_phase["preflight"], path) == artifact(by_phase["final"], path)
    assert artifact(by_phase["preflight"], "contexts/g0.json") != artifact(by_phase["final"], "contexts/g0.json")
