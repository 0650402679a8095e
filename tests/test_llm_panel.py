"""The panel (Full; S + Top 0..2; H + Top 0..2: the study's 13 arms cut to the 7 that take every
path, Top 0 without a ranking and Top 1 and 2 with one) through ``model=openai`` against the
scripted local server, run as the real command line, then replayed with zero HTTP calls.

Scripted: payment's reader returns the expected facts as the wrong JSON types (graded 0),
backup's and refactor's return them right (graded 1); payment's Jev ranking comes in prose + a
code fence (read as the object), refactor's first Jev reply is malformed (only that generation's
Top-N >= 1 contexts fail; Full and Top 0 finish). H is the study's H (native, the default). The
server offers vLLM's tokenize route, so H's "< Full" check is the endpoint's count. S, H and Jev
are sampled (generation temperature 0.7): three distinct generations per task.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import run_cli, scripted_model, washexp_cli, without_calls
from tests.openai_server import H_BODY, Script, serve
from washexp.compaction.inputs.context import follow_up
from washexp.compaction.inputs.meter import ENDPOINT
from washexp.compaction.methods.h_native import PROTOCOL

SECRET = "sk-test-SECRET-0123456789abcdef"
TASKS = ("backup", "payment", "refactor")


def _panel(url: str, store: Path, recordings: Path):
    return run_cli(
        [
            "-m",
            "method=full,S,H",
            "topn=0..2",  # Top 3..5 take Top 2's path again (the 13-arm sweep: tests/test_sweep.py)
            *scripted_model(url, recordings, "qwen3.8-max", generations=None, answers=None),
            f"task=[{','.join(TASKS)}]",
        ],
        store,
        env={"OPENAI_API_KEY": SECRET, "CI": "1"},
        premade=True,  # the store is a container here: its making is tests/test_first_run_kills.py's
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
    script.jev = {"payment": "fenced", "refactor": "malformed_first"}
    script.tokenize = "vllm"
    with serve(script) as url:
        first = _panel(url, store, root / "recordings")
        calls_first = script.count()
        second = _panel(url, again, root / "recordings")
        calls_second = script.count() - calls_first
    return root, script, calls_first, calls_second, first, second


def test_seven_arms_full_once(panel):
    root, *_ = panel
    _, arms = _runs(root, "arm")
    labels = sorted({r.info.run_name.split(" · ")[0] for r in arms})
    assert labels == sorted(["Full", *(f"{m} top{n}" for m in "SH" for n in range(3))])
    assert len(arms) == 7 and sum(r.info.run_name.startswith("Full") for r in arms) == 1


def test_graded_as_scripted_and_a_bad_ranking_fails_only_its_generations_top_n(panel):
    root, *_ = panel
    client, conditions = _runs(root, "condition")
    assert all(run.info.status == "FINISHED" for run in conditions)  # no condition fails whole
    for run in conditions:
        task, m, topn = run.data.tags["task"], run.data.metrics, run.data.tags.get("topn")
        uses_ranking = task == "refactor" and topn not in (None, "0")  # Full has no top-N
        assert m["contexts_failed"] == m["contexts_failed_jev"] == (1.0 if uses_ranking else 0.0), run.info.run_name
        expected = {"backup": 1.0, "payment": 0.0, "refactor": 2 / 3 if uses_ranking else 1.0}[task]
        assert m["fact_accuracy"] == pytest.approx(expected), run.info.run_name
    _, arms = _runs(root, "arm")
    for arm in arms:
        m, topn = arm.data.metrics, arm.data.tags.get("topn")
        assert m["primary/fact_accuracy"] == 0.0  # payment: right values, wrong types
        # backup 1.0; refactor: one generation of three failed = 0, not dropped
        assert m["control/fact_accuracy"] == pytest.approx(1.0 if topn in (None, "0") else (1 + 2 / 3) / 2)
        assert m["control/failed"] == 0.0 and m["control/invalid"] == 0.0


def test_failure_reason_names_the_generation_and_the_fenced_ranking_was_read(panel):
    root, *_ = panel
    client, conditions = _runs(root, "condition")
    run = next(r for r in conditions if r.info.run_name == "S top2 · refactor")
    local = client.download_artifacts(run.info.run_id, "", str(root / "dl-fail"))
    failures = json.loads(Path(local, "failures.json").read_text())
    assert len(failures) == 1 and next(iter(failures.values()))["role"] == "Jev"
    assert "Jev reply is not JSON" in next(iter(failures.values()))["reason"]
    run = next(r for r in conditions if r.info.run_name == "S top2 · payment")
    local = client.download_artifacts(run.info.run_id, "", str(root / "dl-fenced"))
    assert len(json.loads(Path(local, "ranking", "g0.json").read_text())["selected"]) == 2


def test_second_run_replays_every_call(panel):
    root, script, calls_first, calls_second, *_ = panel
    kinds = {k: script.count(k) for k in ("read", "S", "Jev", "H", "tokenize")}
    assert calls_first == sum(kinds.values()) and kinds["read"] > 0 and kinds["H"] > 0 and kinds["tokenize"] > 0
    assert calls_second == 0  # the tokenize counts replay too
    _, again = _runs(root, "arm", "store-again")
    replayed = {r.info.run_name: without_calls(r.data.metrics) for r in again}
    assert len(replayed) == 7
    assert {r.info.run_name: without_calls(r.data.metrics) for r in _runs(root, "arm")[1]} == replayed
    assert {r.data.metrics["calls_live"] for r in again} == {0.0}  # every call replayed, counted apart
    chat = [p for p in (root / "recordings").rglob("*.json") if "tokenize" not in p.parts]
    assert len(chat) == calls_first - kinds["tokenize"]  # one record per distinct chat request
    assert 0 < len(list((root / "recordings" / "tokenize").rglob("*.json"))) <= kinds["tokenize"]


def test_default_h_is_the_studys_and_reaches_the_s_carrier(panel):
    root, *_ = panel
    client, conditions = _runs(root, "condition")
    run = next(r for r in conditions if r.info.run_name == "H top0 · backup")
    assert run.data.params["h_impl"] == "native" and "tail_mode=legacy" in run.data.params["h_label"]
    (root / "dl-h").mkdir()
    local = client.download_artifacts(run.info.run_id, "", str(root / "dl-h"))
    record = json.loads(Path(local, "summary", "g0.checkpoint.json").read_text())
    assert record["impl"] == "native" and record["protocol"] == PROTOCOL
    assert record["full_check"]["source"] == ENDPOINT and record["full_check"]["h_alone"] < record["full_check"]["full"]
    context = json.loads(Path(local, "contexts", "g0.json").read_text())
    assert context[2]["content"].startswith("Summary:\n" + H_BODY)  # prefix stripped, same carrier
    h_requests = [r for r in script_requests(local) if r["role"] == "H"]
    assert h_requests and "TURNS TO SUMMARIZE" in h_requests[0]["request"]["messages"][0]["content"]
    assert {r["request"]["temperature"] for r in h_requests} == {0.7}  # a sampled generation


def test_record_reports_api_tokens_distinct_generations_and_method_notes(panel):
    root, *_ = panel
    out = root / "results"
    proc = washexp_cli("export", "--tracking-uri", f"sqlite:///{root / 'store' / 'mlflow.db'}", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = json.loads(next(out.glob("compaction-*.json")).read_text())
    tables = record["tables"]
    arms = {r["arm"]: r for r in tables["arms_control"]["rows"]}
    assert arms["Full"]["api_input_tokens"] > 0 and arms["Full"]["api_reduction_pct"] == 0.0
    assert arms["S top0"]["api_reduction_pct"] > 0 and arms["S top0"]["api_contexts_shortened"] == 6  # 2 tasks x 3
    assert arms["S top2"]["api_contexts_shortened"] <= 5 and arms["S top2"]["contexts_failed"] == 1
    assert {r["task"]: r["distinct_s"] for r in tables["generations"]["rows"]} == {t: 3 for t in TASKS}
    failed = {(r["arm"], r["task"]): r["jev"] for r in tables["failed_contexts"]["rows"]}
    assert failed == {(f"{m} top{n}", "refactor"): 1 for m in "SH" for n in range(1, 3)}
    notes = " ".join(record["notes"])
    # H top0..2 x 3 tasks x 3 generations, each judged before answering (and before any ranking)
    assert "endpoint's tokenize route for 27 context(s) and by the local Qwen3 chat template for 0" in notes
    assert "Jev ties go to the earlier unit" in notes and "units_kept" in notes
    assert "generation temperature 0.7" in notes and "distinct S bodies" not in notes  # 3 of 3: no caveat


def script_requests(local: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in Path(local, "requests").glob("*.json")]


def test_follow_up_and_expected_never_reach_s_jev_h(panel):
    root, *_ = panel
    from washexp.compaction.inputs.fixtures import load_tasks

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
