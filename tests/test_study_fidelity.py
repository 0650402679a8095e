"""Issue 14: the study's numbers exactly, against the scripted server on 127.0.0.1 through the
real openai client (its replies are scripted test equipment, never a model's result).

Each test names the trap it guards: the H path and its label, provenance on both H paths, a
bad ranking failing only what uses it, how role replies are read, the tokenize count that
decides H's "< Full", and generations that are what they claim.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.openai_server import Script, serve
from washexp.compaction.backends import qwen_chat
from washexp.compaction.backends.openai_roles import parse_scores
from washexp.compaction.backends.roles import roles_for
from washexp.compaction.condition import Arm, run_condition
from washexp.compaction.frozen import FrozenCache, h_impl_for, h_label
from washexp.compaction.inputs.context import full_context
from washexp.compaction.inputs.fixtures import load_task
from washexp.compaction.inputs.meter import ENDPOINT, LOCAL, EndpointMeter
from washexp.compaction.methods import h_hermes
from washexp.compaction.scoring.grading import grade
from washexp.config import EndpointConfig, MethodConfig, ModelConfig

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "compaction"


@pytest.fixture
def served(tmp_path):
    """A scripted server and a function making openai roles against it (one call at a time)."""
    script = Script()
    made = []

    def roles(**model):
        spec = ModelConfig(backend="openai", name="qwen3.8-max", generations=3, **model)
        endpoint = EndpointConfig(base_url=url, recordings=str(tmp_path / "rec"), max_concurrency=1)
        made.append(roles_for(spec, endpoint, tmp_path))
        return made[-1]

    with serve(script) as url:
        yield script, roles, url
    for r in made:
        r.close()


def test_the_default_h_is_the_studys_and_auto_is_gone(store):
    # Trap: with model=openai, "auto" picked hermes-agent 0.19, which predates tail_mode.
    assert MethodConfig(name="H").h_impl == "native"
    assert "tail_mode=legacy" in h_label("native")
    proc = run_cli(["method=H", "method.h_impl=auto", "task=backup", "tracking=off"], store, check=False)
    assert proc.returncode == 2 and "method.h_impl=auto is gone" in proc.stderr
    assert len([line for line in proc.stderr.splitlines() if line.strip()]) == 1


@pytest.mark.skipif(h_hermes.version() is None, reason="hermes-agent is not installed")
def test_hermes_is_labelled_as_installed_with_its_source_digest(served):
    _, roles, _ = served
    label = h_label(h_impl_for(roles(), "hermes"))
    assert label.startswith(f"hermes-agent {h_hermes.version()} as installed")
    digest = h_hermes.source_sha256()
    assert len(digest) == 64 and digest in label


@pytest.mark.parametrize("impl", ["native", "hermes"])
def test_a_user_attribution_fails_provenance_on_both_paths_and_ends_the_attempts(served, impl):
    if impl == "hermes" and h_hermes.version() is None:
        pytest.skip("hermes-agent is not installed")
    script, roles, _ = served
    script.h = {"payment": "user_asked"}
    cache = FrozenCache(roles())
    payment, backup = load_task(FIXTURES / "payment"), load_task(FIXTURES / "backup")
    bad = cache.checkpoint(payment, 0, 128, impl).value
    assert not bad.valid and bad.failure.startswith(("H provenance", "H (Hermes) provenance"))
    assert [a.outcome for a in bad.attempts] == ["provenance"]  # no retry after a provenance failure
    good = cache.checkpoint(backup, 0, 128, impl).value  # the sentinel body passes on the same path
    assert good.valid and [a.outcome for a in good.attempts] == ["ok"]
    # One output cap on both paths (Hermes' own request sends none).
    assert {r["body"].get("max_tokens") for r in script.requests if r["kind"] == "H"} == {1024}


def test_a_malformed_ranking_fails_only_the_top_n_contexts_of_its_generation(served):
    # Trap: S and the ranking of every generation were built for every condition, Full included,
    # so one bad Jev reply zeroed the whole task.
    script, roles, _ = served
    script.jev = {"refactor": "malformed_first"}  # the first ranking request to arrive
    task, cache = load_task(FIXTURES / "refactor"), FrozenCache(roles())
    results = {arm: run_condition(task, arm, cache, 3, 2) for arm in (Arm("full", None), Arm("S", 0), Arm("S", 2))}
    results[Arm("H", 0)] = run_condition(task, Arm("H", 0), cache, 3, 2)
    results[Arm("H", 2)] = run_condition(task, Arm("H", 2), cache, 3, 2)
    failed_generations: set[str] = set()
    for arm, out in results.items():
        m = out.metrics
        if arm.topn:
            assert m["contexts_failed_jev"] == 1 and m["contexts_valid"] == 2
            assert m["fact_accuracy"] == pytest.approx(2 / 3)  # the failed generation scores 0, stays in
            failures = json.loads(out.artifacts["failures.json"])
            # the first ranking request answered is malformed: whichever generation sent it first
            # (the generations rank concurrently, so which one that is varies from run to run)
            ((g, failed),) = failures.items()
            assert failed["role"] == "Jev" and "Jev reply is not JSON" in failed["reason"]
            contexts = {name for name in out.artifacts if name.startswith("contexts/")}
            assert contexts == {f"contexts/g{i}.json" for i in range(3)} - {f"contexts/{g}.json"}
            failed_generations.add(g)
        else:
            assert m["contexts_failed"] == 0 and m["contexts_valid"] == 3 and m["fact_accuracy"] == 1.0
    assert len(failed_generations) == 1  # one ranking per generation, shared by S and H
    assert "ceiling" not in results[Arm("full", None)].metrics  # Full needs no S: no ceiling


def test_a_fenced_role_object_is_read_while_the_reader_stays_strict(served):
    assert parse_scores('Scores:\n```json\n{"scores": [10, 90]}\n```\nthat is all', 2) == [10.0, 90.0]
    assert parse_scores('```\n{"scores": [1]}\n```', 1) == [1.0]
    for bad in ('```json\n{"scores": [1]}\n```\n```json\n{"scores": [2]}\n```', "Scores: 10, 90", '{"scores": [1]'):
        with pytest.raises(ValueError, match="not JSON"):
            parse_scores(bad, 1)
    script, roles, _ = served
    script.reader = {"backup": "fenced"}
    script.jev = {"backup": "fenced"}
    task, cache = load_task(FIXTURES / "backup"), FrozenCache(roles())
    out = run_condition(task, Arm("S", 1), cache, 1, 2)
    assert out.metrics["contexts_failed"] == 0 and out.metrics["units_kept"] == 1  # the fenced ranking was used
    assert out.metrics["fact_accuracy"] == 0.0  # the same object in a fence from the reader: malformed
    answers = json.loads(out.artifacts["answers/g0.json"])
    assert all(a["malformed"] for a in answers)
    assert grade(task, json.dumps({"facts": task.expected})).score == 1.0


@pytest.mark.parametrize(("temperature", "distinct"), [(0.0, 1.0), (0.7, 3.0)])
def test_distinct_generations_are_counted_not_claimed(served, temperature, distinct):
    # Trap: with every call at temperature 0 a deterministic server returns three identical
    # generations, and the record still said "3 generations".
    script, roles, _ = served
    task, cache = load_task(FIXTURES / "payment"), FrozenCache(roles(generation_temperature=temperature))
    m = run_condition(task, Arm("H", 1), cache, 3, 1).metrics
    assert (m["distinct_s"], m["distinct_rankings"], m["distinct_h"]) == (distinct, distinct, distinct)
    temps = {r["kind"]: r["body"]["temperature"] for r in script.requests if r["kind"] != "tokenize"}
    assert temps == {"S": temperature, "Jev": temperature, "H": temperature, "read": 0.0}


@pytest.mark.parametrize("route", ["vllm", "llama.cpp", None])
def test_the_count_that_decides_h_is_the_endpoints_when_offered(served, tmp_path, route):
    script, _, url = served
    script.tokenize = route
    task = load_task(FIXTURES / "backup")
    messages = full_context(task).messages
    meter = EndpointMeter(url, "k", "qwen3.8-max", {"enable_thinking": False}, tmp_path / "rec", "auto")
    first = meter(messages)
    if route is None:
        assert first.source == LOCAL and first.tokens == qwen_chat.count_messages(list(messages), False)
    else:
        assert first.source == ENDPOINT
        scripted = script.count_tokens(list(messages)) if route == "vllm" else None
        assert first.tokens > 0 and first.tokens == (scripted or first.tokens)
    calls = script.count("tokenize")
    # Recorded: a strict replay (no server needed) makes the same decision with the same count.
    replay = EndpointMeter(
        "http://127.0.0.1:9/v1", "k", "qwen3.8-max", {"enable_thinking": False}, tmp_path / "rec", "strict"
    )
    assert replay(messages) == first and script.count("tokenize") == calls


def test_qwen_template_sends_tool_results_as_a_user_turn():
    # Trap: the local ChatML rendering writes <|im_start|>tool, which Qwen's template never sends.
    messages = [
        {"role": "system", "content": "sys"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c", "content": "A"},
        {"role": "tool", "tool_call_id": "d", "content": "B"},
        {"role": "user", "content": "q"},
    ]
    assert qwen_chat.render(messages, enable_thinking=False) == (
        "<|im_start|>system\nsys<|im_end|>\n"
        "<|im_start|>assistant\n"
        '<tool_call>\n{"name": "read_file", "arguments": {"path": "a"}}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\nA\n</tool_response>\n<tool_response>\nB\n</tool_response><|im_end|>\n"
        "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )
