"""Cost in money and the budget (``endpoint.price.*``, ``endpoint.budget_usd``), against the real
scripted server on 127.0.0.1: costs summed from the usage it reports, replays free and counted
apart, and the budget stop at exactly the call that would exceed it."""

from __future__ import annotations

import json
import math
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import run_cli, scripted_model, washexp_cli
from tests.openai_server import Script, serve
from washexp.errors import ConfigError
from washexp.models.base import ChatRequest
from washexp.models.cost import Budget, BudgetExceeded, Price, budget_for, price_of, sum_metrics
from washexp.models.openai_client import OpenAIModel
from washexp.models.recorder import Recorder, request_key

PRICE = Price(input_per_mtok=2.5, output_per_mtok=10.0, cached_input_per_mtok=1.25)


def _reads(script: Script, n: int, max_tokens: int = 1000) -> list[ChatRequest]:
    """``n`` distinct reader requests (the script answers each with its task's facts)."""
    queries = sorted(script.tasks)[:n]
    return [
        ChatRequest(({"role": "system", "content": "answer"}, {"role": "user", "content": q}), 0.0, max_tokens)
        for q in queries
    ]


def _recorder(url: str, directory: Path, price=PRICE, budget=None) -> Recorder:
    model = OpenAIModel("m", url, timeout_s=5.0, max_retries=0, max_concurrency=8)
    return Recorder(model, "m", directory, price=price, budget=budget)


def _expected_cost(script: Script, request: ChatRequest, cached: int) -> float:
    """The scripted usage (its own formula), priced by hand."""
    task = script.tasks[request.messages[1]["content"]]
    prompt = script.count_tokens(list(request.messages))
    completion = len(json.dumps({"facts": task.expected})) // 4
    return ((prompt - cached) * 2.5 + cached * 1.25 + completion * 10.0) / 1_000_000


def test_costs_are_summed_exactly_from_the_reported_usage_and_replays_cost_nothing(tmp_path):
    script = Script()
    script.cached = 7
    requests = _reads(script, 3)
    with serve(script) as url:
        live = _recorder(url, tmp_path)
        keys = [live.chat(r).key for r in requests]
        charge = live.charge(keys + keys[:1])  # a key named twice is counted once
        assert script.count("read") == 3
        assert (charge.live, charge.replayed, charge.unpriced) == (3, 0, 0)
        assert charge.cost_usd == pytest.approx(math.fsum(_expected_cost(script, r, 7) for r in requests), rel=1e-12)
        assert live.charge(keys).metrics() == {"calls_live": 0.0, "calls_replayed": 0.0, "cost_usd": 0.0}

        again = _recorder(url, tmp_path)  # another command over the same recordings
        for r in requests:
            again.chat(r)
        assert script.count("read") == 3  # nothing sent
        replayed = again.charge(keys).metrics()
        assert {k: v for k, v in replayed.items() if not k.startswith("role/")} == {
            "calls_live": 0.0,
            "calls_replayed": 3.0,
            "cost_usd": 0.0,
        }
        assert replayed["role/call/calls"] == 3.0  # what the replayed calls spent when they were made


def test_no_price_no_cost_and_a_reply_without_usage_has_no_cost(tmp_path):
    script = Script()
    with serve(script) as url:
        unpriced = _recorder(url, tmp_path / "a", price=None)
        key = unpriced.chat(_reads(script, 1)[0]).key
        assert {k: v for k, v in unpriced.charge([key]).metrics().items() if not k.startswith("role/")} == {
            "calls_live": 1.0,
            "calls_replayed": 0.0,
        }

        script.usage = False
        budget = Budget(1.0)
        blind = _recorder(url, tmp_path / "b", budget=budget)
        request = _reads(script, 2)[1]
        charge = blind.charge([blind.chat(request).key])
        assert (charge.cost_usd, charge.unpriced) == (None, 1)
        assert "cost_usd" not in charge.metrics()  # unknown, never 0
        assert budget.spent == pytest.approx(PRICE.estimate(request))  # the budget counts its estimate
    summed = sum_metrics([{"calls_live": 1.0, "calls_replayed": 0.0}, {**charge.metrics()}])
    assert {k: v for k, v in summed.items() if not k.startswith("role/")} == {"calls_live": 2.0, "calls_replayed": 0.0}


def test_each_roles_tokens_and_time_are_what_its_recordings_say_live_or_replayed(tmp_path):
    """Issue 49: what a record's protocol cost, per role, also when the record is rebuilt by strict
    replay: tokens from the recorded usage, time from the recorded call (retries included)."""
    script = Script()
    script.cached = 7
    requests = _reads(script, 3)
    with serve(script) as url:
        live = _recorder(url, tmp_path)
        keys = [live.chat(r, None, role).key for r, role in zip(requests, ("read", "read", "S"), strict=True)]
        spent = live.charge(keys).roles
    recorded = [json.loads(live.path(k).read_text()) for k in keys]
    assert all(r["elapsed_s"] >= 0 for r in recorded)  # every live call is timed in its recording
    read = [r["response"] for r in recorded[:2]]
    assert (spent["read"].calls, spent["S"].calls) == (2, 1)
    assert spent["read"].prompt_tokens == sum(r["prompt_tokens"] for r in read) > 0
    assert spent["read"].completion_tokens == sum(r["completion_tokens"] for r in read) > 0
    assert spent["read"].cached_tokens == 14
    assert spent["read"].elapsed_s == pytest.approx(sum(r["elapsed_s"] for r in recorded[:2]))
    replay = Recorder(None, "m", tmp_path, mode="strict")
    for r, role in zip(requests, ("read", "read", "S"), strict=True):
        replay.chat(r, None, role)
    assert replay.charge(keys).roles == spent  # a replay reports what the calls cost when made
    untimed = dict(recorded[2])
    untimed.pop("elapsed_s")
    live.path(keys[2]).write_text(json.dumps(untimed))  # a recording made before calls were timed
    older = Recorder(None, "m", tmp_path, mode="strict")
    older.chat(requests[2], None, "S")
    metrics = older.charge(keys[2:]).metrics()
    assert metrics["role/S/calls"] == 1.0 and "role/S/elapsed_s" not in metrics  # unknown, never 0
    both = sum_metrics(
        [live_metrics := spent["read"].metrics("read") | {"calls_live": 2.0, "calls_replayed": 0.0}, metrics]
    )
    assert both["role/read/elapsed_s"] == live_metrics["role/read/elapsed_s"] and "role/S/elapsed_s" not in both


def test_a_half_price_or_a_budget_without_a_price_is_a_usage_error():
    class P:
        input_per_mtok, output_per_mtok, cached_input_per_mtok = 1.0, None, None

    with pytest.raises(ConfigError, match="endpoint.price.output_per_mtok"):
        price_of(P())
    with pytest.raises(ConfigError, match="needs a price"):
        budget_for(1.0, None)


def _costs(script: Script, requests: list[ChatRequest], directory: Path) -> list[float]:
    """Each request's actual cost, from a priced recorder without a budget."""
    probe = _recorder(script.url, directory)
    return [probe.charge([probe.chat(r).key]).cost_usd for r in requests]


@pytest.mark.parametrize("slack", [-1e-12, 0.0])
def test_the_budget_stops_before_exactly_the_call_that_would_exceed_it(tmp_path, slack):
    script = Script()
    requests = _reads(script, 5)
    with serve(script) as url:
        script.url = url
        c = _costs(script, requests, tmp_path / "probe")
        e = [PRICE.estimate(r) for r in requests]
        limit = c[0] + c[1] + e[2] + slack  # the third call fits only if nothing is missing
        assert e[0] <= limit and c[0] + e[1] <= limit  # the first two fit either way
        sent_before = script.count("read")
        budget = Budget(limit)
        rec = _recorder(url, tmp_path / "run", budget=budget)
        rec.chat(requests[0])
        rec.chat(requests[1])
        if slack < 0:
            with pytest.raises(BudgetExceeded) as stop:
                rec.chat(requests[2])
            assert script.count("read") - sent_before == 2  # the third was never sent
            line = str(stop.value)
            assert "\n" not in line and line.startswith(f"endpoint.budget_usd={limit:g} reached: $")
            assert f"${c[0] + c[1]:,.6f} spent" in line
            with pytest.raises(BudgetExceeded):  # the sweep is stopping: nothing later goes either
                rec.chat(requests[4])
            assert not rec.path(request_key("m", requests[2])).exists()
        else:
            rec.chat(requests[2])
            assert script.count("read") - sent_before == 3
        assert budget.reserved == 0.0


def test_the_budget_is_shared_by_concurrent_requests_reserved_before_they_are_sent(tmp_path):
    script = Script()
    refused, all_asked = [], threading.Event()

    def all_asked_once() -> bool:
        """Each of the eight sent (and held) or refused; once true, true for every held reply."""
        if script.in_flight + len(refused) >= 8:
            all_asked.set()
        return all_asked.is_set()

    # every request stays in flight until the others have asked (an event, not a guess of seconds)
    script.hold["read"] = all_asked_once
    requests = _reads(script, 8)
    estimate = max(PRICE.estimate(r) for r in requests)
    budget = Budget(3.5 * estimate)  # room for three estimates at most, whatever they cost after
    with serve(script) as url:
        rec = _recorder(url, tmp_path, budget=budget)
        start = threading.Barrier(8)

        def ask(r):
            start.wait()
            try:
                return rec.chat(r)
            except BudgetExceeded:
                refused.append(r)
                return None

        with ThreadPoolExecutor(8) as pool:
            replies = list(pool.map(ask, requests))
    assert sum(r is not None for r in replies) == script.count("read") == 3
    assert budget.reserved == 0.0 and budget.spent < budget.limit


# -- the command ----------------------------------------------------------------------------------

TASKS = "task=[payment,backup,refactor]"


def _args(url: str, recordings: Path, *extra: str, model: str = "m") -> list[str]:
    return [
        "method=full",
        TASKS,
        *scripted_model(url, recordings, model, platform=None),  # one call per condition, and conditions
        "endpoint.max_concurrency=1",  # one at a time: the calls' order is the tasks' order
        "endpoint.price.input_per_mtok=2.5",
        "endpoint.price.output_per_mtok=10",
        *extra,
    ]


def _store(path: Path) -> Path:
    path.mkdir()
    return path


def _runs(store: Path, model: str = "m") -> dict[str, object]:
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    exp = client.get_experiment_by_name("compaction")
    return {r.info.run_name: r for r in client.search_runs([exp.experiment_id]) if r.data.tags["model"] == model}


def _export(store: Path, experiment: str = "compaction") -> subprocess.CompletedProcess:
    uri = f"sqlite:///{store / 'mlflow.db'}"
    return washexp_cli("export", "--experiment", experiment, "--tracking-uri", uri, "--out", str(store / "results"))


def _recorded(recordings: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(recordings.glob("*/*.json"))]


@pytest.mark.slow
def test_a_sweep_logs_its_cost_and_a_replay_costs_nothing_and_stops_on_budget(tmp_path):
    script = Script()
    price = Price(2.5, 10.0)
    with serve(script) as url:
        first = _store(tmp_path / "first")
        run_cli(_args(url, tmp_path / "rec"), first, env={"CI": "1"})
        runs = _runs(first)
        by_task = {}
        for rec in _recorded(tmp_path / "rec"):
            task = script.tasks[rec["request"]["messages"][1]["content"]].id
            r = rec["response"]
            by_task[task] = (r["prompt_tokens"] * 2.5 + r["completion_tokens"] * 10.0) / 1e6
        assert sorted(by_task) == ["backup", "payment", "refactor"]
        for task, cost in by_task.items():
            m = runs[f"Full · {task}"].data.metrics
            assert (m["calls_live"], m["calls_replayed"]) == (1.0, 0.0)
            assert m["cost_usd"] == pytest.approx(cost, rel=1e-12)
        arm = runs["Full · arm"].data.metrics
        assert arm["cost_usd"] == pytest.approx(math.fsum(by_task.values()), rel=1e-12)
        assert (arm["calls_live"], arm["calls_replayed"]) == (3.0, 0.0)

        # Another price and a budget: the same identities, nothing run again.
        repriced = _args(url, tmp_path / "rec", "endpoint.price.output_per_mtok=99", "endpoint.budget_usd=9")
        again = run_cli(repriced, first)
        assert "finished already" in again.stdout + again.stderr and len(_runs(first)) == len(runs)

        # A fresh store over the same recordings: every call replayed, free, counted apart.
        sent = script.count("read")
        replay = _store(tmp_path / "replay")
        run_cli(_args(url, tmp_path / "rec"), replay, env={"CI": "1"})
        assert script.count("read") == sent
        for task in by_task:
            m = _runs(replay)[f"Full · {task}"].data.metrics
            assert (m["calls_live"], m["calls_replayed"], m["cost_usd"]) == (0.0, 1.0, 0.0)

        # The budget: the first two calls fit, the third's estimate does not.
        order = [r["task"] for r in script.requests if r["kind"] == "read"][:3]
        calls = {rec["request"]["messages"][1]["content"]: rec for rec in _recorded(tmp_path / "rec")}
        third = calls[next(q for q, t in script.tasks.items() if t.id == order[2])]["request"]
        estimate = price.estimate(ChatRequest(tuple(third["messages"]), 0.0, third["max_tokens"]))
        limit = by_task[order[0]] + by_task[order[1]] + estimate - 1e-9
        stopped = replay  # beside model m's replayed arm, a model m2 whose sweep stops on budget
        budgeted = _args(url, tmp_path / "rec2", f"endpoint.budget_usd={limit!r}", model="m2")
        proc = run_cli(budgeted, stopped, env={"CI": "1"}, check=False)
        assert script.count("read") == sent + 2
    assert proc.returncode == 1, proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("washexp:")]
    assert len(lines) == 1 and lines[0].startswith(f"washexp: endpoint.budget_usd={limit:g} reached: $"), lines
    assert f"of task {order[2]}" in lines[0]
    runs = _runs(stopped, "m2")
    for task in order[:2]:
        assert runs[f"Full · {task}"].info.status == "FINISHED"
        assert "stopped" not in runs[f"Full · {task}"].data.tags
    for name in (f"Full · {order[2]}", "Full · arm"):
        assert runs[name].info.status == "FAILED"
        assert runs[name].data.tags["stopped"] == "budget"
    assert f"Full · {order[2]}" in runs and len(runs) == 4

    # The records: the cost per arm, and the arm that stopped on budget named.
    assert _export(first).returncode == 0
    record = json.loads(next((first / "results").glob("compaction-*.json")).read_text())
    rows = [r for t in ("arms_primary", "arms_control") for r in record["tables"].get(t, {"rows": []})["rows"]]
    assert rows and all(r["arm"] == "Full" for r in rows)
    assert math.fsum(r["cost_usd"] for r in rows) == pytest.approx(arm["cost_usd"], rel=1e-12)
    assert "cost (USD)" in next((first / "results").glob("compaction-*.md")).read_text()
    proc = _export(stopped)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # One record per model: m's replayed arm. m2 finished no arm, so it has no record, and its
    # stop is not a note of m's record (issue 39: a record names only its own model's runs).
    records = [json.loads(p.read_text()) for p in (stopped / "results").glob("compaction-*.json")]
    assert [r["provenance"].get("model") for r in records] == ["m"]
    record = records[0]
    rows = [r for t in ("arms_primary", "arms_control") for r in record["tables"].get(t, {"rows": []})["rows"]]
    assert {(r["cost_usd"], r["calls_replayed"] > 0) for r in rows} == {(0.0, True)}
    assert not [n for n in record["notes"] if "stopped on budget" in n or runs["Full · arm"].info.run_id in n]


def _wash_runs(store: Path) -> list:
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    return client.search_runs([client.get_experiment_by_name("wash").experiment_id])


@pytest.mark.slow
def test_a_wash_sweep_costs_its_calls_per_store_and_measurement_and_the_record_says_so(tmp_path):
    from tests.test_wash_model_washers import SUPERSEDED_FAT
    from tests.wash_model_server import WashScript
    from tests.wash_model_server import serve as serve_wash

    sweep = ["-m", "benchmark=wash", "measurement=ceiling,sawtooth", "store=[superseded]", "rounds=2", "sessions=8"]
    priced = ["endpoint.price.input_per_mtok=2.5", "endpoint.price.output_per_mtok=10"]
    script = WashScript(fat=SUPERSEDED_FAT)
    rec = f"endpoint.recordings={tmp_path / 'rec'}"
    with serve_wash(script) as url:
        model = ["washer=coalwash", "model=openai", "model.name=w", f"endpoint.base_url={url}", rec]
        run_cli([*sweep, *model, *priced], _store(tmp_path / "a"), env={"CI": "1"}, premade=True)
        sent = len(script.requests)
        run_cli([*sweep, *model, *priced], _store(tmp_path / "b"), env={"CI": "1"}, premade=True)
        assert len(script.requests) == sent  # all replayed
    recorded = [r["response"] for r in _recorded(tmp_path / "rec")]
    paid = math.fsum((r["prompt_tokens"] * 2.5 + r["completion_tokens"] * 10.0) / 1e6 for r in recorded)
    runs = _wash_runs(tmp_path / "a")
    kids = [r for r in runs if r.data.tags["washexp.kind"] in ("wash-store", "wash-arm")]
    parents = [r for r in runs if r.data.tags["washexp.kind"] == "measurement"]
    assert len(parents) == 2 and kids
    assert sum(k.data.metrics["calls_live"] for k in kids) == len(recorded) == sent > 0
    assert math.fsum(k.data.metrics["cost_usd"] for k in kids) == pytest.approx(paid, rel=1e-12)
    for p in parents:
        mine = [k for k in kids if k.data.tags["mlflow.parentRunId"] == p.info.run_id]
        assert p.data.metrics["cost_usd"] == pytest.approx(math.fsum(k.data.metrics["cost_usd"] for k in mine))
        assert p.data.metrics["calls_replayed"] == 0.0
    for p in _wash_runs(tmp_path / "b"):
        if p.data.tags["washexp.kind"] == "measurement":
            assert p.data.metrics["cost_usd"] == 0.0 and p.data.metrics["calls_live"] == 0.0
            assert p.data.metrics["calls_replayed"] > 0
    assert _export(tmp_path / "a", "wash").returncode == 0
    record = json.loads(next((tmp_path / "a" / "results").glob("wash-*.json")).read_text())
    cost = {r["measurement"]: r for r in record["tables"]["cost"]["rows"]}
    assert set(cost) == {"ceiling", "sawtooth"}
    assert math.fsum(r["cost_usd"] for r in cost.values()) == pytest.approx(paid, rel=1e-12)
    (saw,) = record["tables"]["sawtooth"]["rows"]
    a = next(k for k in kids if k.data.tags.get("arm") == "A")
    assert saw["A_cost_usd"] == a.data.metrics["cost_usd"] > 0
    assert "A's total includes its washes' own token cost, in money too" in record["tables"]["sawtooth"]["note"]
