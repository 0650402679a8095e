"""The 13-arm panel (Full; S + Top 0..5; H + Top 0..5) through ``model=openai`` against the
scripted local server, run as the real command line, then replayed with zero HTTP calls.

Scripted: payment's reader returns the expected facts as the wrong JSON types (graded 0),
backup's returns them right (graded 1), refactor's Jev ranking is malformed (every condition of
refactor FAILED, counted as 0 in its cohort). H is the real Hermes method (h_impl=auto).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import run_cli
from tests.openai_server import H_BODY, Script, serve
from washexp.compaction.context import follow_up

SECRET = "sk-test-SECRET-0123456789abcdef"
TASKS = ("backup", "payment", "refactor")


def _panel(url: str, store: Path, recordings: Path):
    return run_cli(
        [
            "-m",
            "method=full,S,H",
            "topn=0..5",
            "model=openai",
            f"endpoint.base_url={url}",
            "model.name=qwen3.8-max",
            "model.platform=scripted-test-server",
            f"endpoint.recordings={recordings}",
            f"task=[{','.join(TASKS)}]",
        ],
        store,
        env={"OPENAI_API_KEY": SECRET, "CI": "1"},
    )


def _runs(root: Path, kind: str, store: str = "store"):
    store = root / store
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    exp = client.get_experiment_by_name("compaction")
    return client, client.search_runs([exp.experiment_id], f"tags.`washexp.kind` = '{kind}'", max_results=1000)


@pytest.fixture(scope="module")
def panel(tmp_path_factory):
    root = tmp_path_factory.mktemp("panel")
    store, again = root / "store", root / "store-again"  # the replay run starts from no runs
    store.mkdir(), again.mkdir()
    script = Script()
    script.reader = {"payment": "wrong_types", "backup": "correct"}
    script.bad_jev = {"refactor"}
    with serve(script) as url:
        first = _panel(url, store, root / "recordings")
        calls_first = script.count()
        second = _panel(url, again, root / "recordings")
        calls_second = script.count() - calls_first
    return root, script, calls_first, calls_second, first, second


def test_thirteen_arms_full_once(panel):
    root, *_ = panel
    _, arms = _runs(root, "arm")
    labels = sorted({r.info.run_name.split(" · ")[0] for r in arms})
    assert labels == sorted(["Full", *(f"{m} top{n}" for m in "SH" for n in range(6))])
    assert len(arms) == 13 and sum(r.info.run_name.startswith("Full") for r in arms) == 1


def test_graded_as_scripted_and_failures_count_as_zero(panel):
    root, *_ = panel
    client, conditions = _runs(root, "condition")
    for run in conditions:
        task = run.data.tags["task"]
        if task == "refactor":
            assert run.info.status == "FAILED"
            assert "Jev reply is not JSON" in run.data.tags["washexp.error"]
        else:
            assert run.info.status == "FINISHED"
            assert run.data.metrics["fact_accuracy"] == (1.0 if task == "backup" else 0.0)
    _, arms = _runs(root, "arm")
    for arm in arms:
        m = arm.data.metrics
        assert m["primary/fact_accuracy"] == 0.0  # payment: right values, wrong types
        assert m["control/fact_accuracy"] == 0.5  # backup 1.0, refactor FAILED = 0, not dropped
        assert m["control/failed"] == 1.0


def test_second_run_replays_every_call(panel):
    root, script, calls_first, calls_second, *_ = panel
    kinds = {k: script.count(k) for k in ("read", "S", "Jev", "H")}
    assert calls_first == sum(kinds.values()) and kinds["read"] > 0 and kinds["H"] > 0
    assert calls_second == 0
    _, again = _runs(root, "arm", "store-again")
    replayed = {r.info.run_name: r.data.metrics for r in again}
    assert len(replayed) == 13
    assert {r.info.run_name: r.data.metrics for r in _runs(root, "arm")[1]} == replayed
    files = list((root / "recordings").rglob("*.json"))
    assert len(files) == calls_first  # one record per distinct request


def test_hermes_summary_reaches_the_s_carrier(panel):
    root, *_ = panel
    client, conditions = _runs(root, "condition")
    run = next(r for r in conditions if r.info.run_name == "H top0 · backup")
    (root / "dl-h").mkdir()
    local = client.download_artifacts(run.info.run_id, "", str(root / "dl-h"))
    record = json.loads(Path(local, "summary", "g0.checkpoint.json").read_text())
    assert record["impl"] == "hermes" and record["protocol"].startswith("hermes-agent==")
    context = json.loads(Path(local, "contexts", "g0.json").read_text())
    assert context[2]["content"].startswith("Summary:\n" + H_BODY)  # prefix stripped, same carrier
    h_requests = [r for r in script_requests(local) if r["role"] == "H"]
    assert h_requests and "TURNS TO SUMMARIZE" in h_requests[0]["request"]["messages"][0]["content"]


def script_requests(local: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in Path(local, "requests").glob("*.json")]


def test_follow_up_and_expected_never_reach_s_jev_h(panel):
    root, *_ = panel
    from washexp.compaction.fixtures import load_tasks

    tasks = load_tasks(Path(__file__).resolve().parent.parent / "fixtures" / "compaction", list(TASKS))
    records = [json.loads(p.read_text()) for p in (root / "recordings").rglob("*.json")]
    compaction = [r for r in records if r["role"] in ("S", "Jev", "H")]
    assert {r["role"] for r in compaction} == {"S", "Jev", "H"}
    # Single fact values do occur in the evidence itself; the follow-up, the field descriptions
    # and the expected answer as a whole must not.
    leaks = [follow_up(t) for t in tasks]
    leaks += [d.strip() for t in tasks for d in t.fields.values()]
    leaks += [json.dumps({"facts": t.expected}) for t in tasks] + [json.dumps(t.expected) for t in tasks]
    for r in compaction:
        text = json.dumps(r["request"]["messages"], ensure_ascii=False)
        found = [x for x in leaks if x in text or json.dumps(x)[1:-1] in text]
        assert not found, (r["role"], found[:1])
    reads = [r for r in records if r["role"] == "read"]
    assert any(follow_up(tasks[0]) in r["request"]["messages"][-1]["content"] for r in reads)


def test_no_secret_anywhere(panel):
    root, script, *_, first, second = panel
    sent = {r["headers"].get("Authorization") for r in script.requests}
    assert sent == {f"Bearer {SECRET}"}  # the key was used, so its absence below means something
    for path in root.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    for proc in (first, second):
        assert SECRET not in proc.stdout + proc.stderr
    client, runs = _runs(root, "condition")
    _, arms = _runs(root, "arm")
    for run in runs + arms:
        assert SECRET not in json.dumps([run.data.params, run.data.tags])
        assert "base_url" not in json.dumps(run.data.params)  # the spec never names the endpoint
