"""The baselines beside S and H (observation masking, a recency window, the hybrid) and the
model-free BM25 ranker: what each context keeps, when the hybrid asks S, identity, bad values."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import SCRIPTED_ENV, run_cli, scripted_model
from tests.openai_server import Script, serve
from washexp.compaction.backends.roles import roles_for
from washexp.compaction.condition import Arm, outcome, run_condition, task_sizes
from washexp.compaction.frozen import FrozenCache
from washexp.compaction.inputs.fixtures import load_task
from washexp.compaction.methods.baselines import PLACEHOLDER, baseline, masked_context, recency_context, turns
from washexp.config import ModelConfig

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "compaction"


@pytest.fixture(scope="module")
def payment():
    return load_task(FIXTURES / "payment")  # 8 tool results, one per turn


def _outputs(ctx) -> list[str]:
    return [m["content"] for m in ctx.messages if m["role"] == "tool"]


def test_masking_keeps_the_latest_m_outputs_and_every_call(payment):
    ctx = masked_context(payment, 2)
    outputs = _outputs(ctx)
    assert outputs[:6] == [PLACEHOLDER] * 6
    assert outputs[6:] == [u.content for u in payment.units[6:]]
    assert ctx.units == (6, 7)
    calls = [m for m in ctx.messages if m.get("tool_calls")]
    assert len(calls) == len(payment.units)  # the calls stay: only outputs are masked
    assert masked_context(payment, 2).messages == ctx.messages  # deterministic
    assert _outputs(masked_context(payment, 0)) == [PLACEHOLDER] * 8
    assert _outputs(masked_context(payment, 10)) == [u.content for u in payment.units]  # M >= units: Full's
    # fused with Top N: a top-ranked unit stays unmasked in place
    assert _outputs(masked_context(payment, 2, (1,)))[1] == payment.units[1].content


def test_recency_keeps_the_last_k_turns_whole(payment):
    assert len(turns(payment)) == 8
    ctx = recency_context(payment, 3)
    assert ctx.units == (5, 6, 7)
    assert _outputs(ctx) == [u.content for u in payment.units[5:]]
    assert len(ctx.messages) == 2 + 3 * 2 + 1  # system, task, three turns, follow-up
    assert recency_context(payment, 3).messages == ctx.messages
    assert recency_context(payment, 0).units == ()
    assert recency_context(payment, 3, (0,)).units == (0, 5, 6, 7)  # a Top-N unit's turn joins


def test_the_hybrid_asks_s_only_over_its_budget(payment):
    asked: list[str] = []
    roles = roles_for(ModelConfig(name="reference"))

    def summarize(job):
        asked.append(job.task_id)
        return roles.summarize(job)

    cache = FrozenCache(dataclasses.replace(roles, summarize=summarize))
    masked = masked_context(payment, 2).input_tokens
    under = baseline("hybrid", {"M": 2, "budget": masked})
    out = outcome(payment, Arm(under.name, 0), cache, 0, task_sizes(payment, cache, 1, True), method=under)
    assert out.context.messages == masked_context(payment, 2).messages and out.summary is None
    assert asked == []
    over = baseline("hybrid", {"M": 2, "budget": masked - 1})
    out = outcome(payment, Arm(over.name, 0), cache, 0, task_sizes(payment, cache, 1, True), method=over)
    assert asked == ["payment"] and out.summary and out.context.messages[2]["content"].startswith("Summary:")


def test_a_baseline_condition_reports_retention_and_tokens_offline(payment):
    cache = FrozenCache(roles_for(ModelConfig(name="reference")))
    method = baseline("mask", {"M": 0})
    out = run_condition(payment, Arm(method.name, 0), cache, 1, 0, method=method)
    assert method.name == "mask M=0" and Arm(method.name, 0).label == "mask M=0 top0"
    assert 0 <= out.metrics["retention"] < 1 and out.metrics["input_tokens"] < out.metrics["full_input_tokens"]
    assert "distinct_s" not in out.metrics or out.metrics["distinct_s"] == 0


def _arms(store: Path) -> dict[str, dict]:
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    (exp,) = [e for e in client.search_experiments() if e.name == "compaction"]
    runs = client.search_runs([exp.experiment_id], "tags.`washexp.kind` = 'arm'")
    return {r.info.run_name.split(" · ")[0]: r.data for r in runs}


@pytest.mark.slow  # a sweep of its own, no verdict: kept out of the 8-minute default suite
def test_identity_moves_with_m_k_budget_and_ranker(store):
    args = ["task=meeting_notes", "model.generations=1"]
    run_cli(["-m", "method=mask,hybrid", "topn=0,1", *args], store)
    run_cli(["-m", "method=mask,hybrid", "method.M=1", "method.budget=100", "topn=1", "ranker=bm25", *args], store)
    run_cli(["-m", "method=recency", "method.K=0,1", *args], store)
    arms = _arms(store)
    assert set(arms) == {
        "mask M=10 top0",
        "mask M=10 top1",
        "hybrid M=10 budget=4000 top0",
        "hybrid M=10 budget=4000 top1",
        "mask M=1 top1 bm25",
        "hybrid M=1 budget=100 top1 bm25",
        "recency K=0 top0",
        "recency K=1 top0",
    }
    assert len({r.params["method"] for r in arms.values()}) == 6  # eight arm runs, none reused
    assert arms["mask M=1 top1 bm25"].tags["ranker"] == "bm25"
    assert arms["mask M=1 top1 bm25"].params["ranker"] == "bm25"
    assert "ranker" not in arms["mask M=10 top1"].params  # Jev's identity as before rankers


def test_a_bad_parameter_is_one_line_and_exit_2_before_any_work(store):
    for bad in (["method=mask", "method.M=-1"], ["method=recency", "method.K=-1"], ["ranker=bm26", "topn=1"]):
        proc = run_cli(bad, store, check=False)
        assert proc.returncode == 2, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert not (store / "mlflow.db").exists()
    assert "method.M=-1" in run_cli(["method=mask", "method.M=-1"], store, check=False).stderr


def test_bm25_ranks_top_n_for_a_served_model_and_no_jev_call_is_made(store):
    script = Script()
    with serve(script) as url:
        run_cli(
            [
                "method=S",
                "topn=2",
                "ranker=bm25",
                *scripted_model(url, store / "rec", platform=None),
                "task=payment",
            ],
            store,
            env=SCRIPTED_ENV,
        )
    kinds = [r["kind"] for r in script.requests]
    assert "Jev" not in kinds and "read" in kinds and "S" in kinds
    arms = _arms(store)
    assert list(arms) == ["S top2 bm25"]
    assert json.loads(json.dumps(arms["S top2 bm25"].params))["ranker"] == "bm25"
