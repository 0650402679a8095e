"""The real Hermes method (hermes-agent's ContextCompressor._generate_summary), called directly.

Its model call is routed to a plain function here: what is checked is the harness around Hermes
(frozen prompt date, the study's budget and word limit, Hermes' own prefix stripping), never a
model's output.
"""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from washexp.compaction.inputs.context import to_wire
from washexp.compaction.inputs.fixtures import load_task
from washexp.compaction.methods import h_hermes as hermes_real
from washexp.compaction.methods import h_native as hermes
from washexp.compaction.methods.checkpoint import word_limit

pytestmark = pytest.mark.skipif(hermes_real.version() is None, reason="hermes-agent is not installed")

BODY = f"{hermes.SNAPSHOT_HEADING}\n{hermes.NO_USER_SENTINEL}\n\n## Critical Context\n- PAY-4827 on INV-731"
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "compaction"


@pytest.fixture(scope="module")
def payment():
    task = load_task(FIXTURES / "payment")
    return task, [to_wire(m) for m in task.history]


def test_prompt_is_frozen_and_carries_the_study_budget(payment):
    task, turns = payment
    prompts = []

    def chat(messages, max_tokens):
        prompts.append(messages[-1]["content"])
        return BODY

    body = hermes_real.summarize_once(turns, task.query, 128, word_limit(128), chat, "qwen3.8-max")
    assert body == BODY  # Hermes' prefix added and stripped again by its own helper
    prompt = prompts[0]
    # Trap: Hermes writes today's date into the prompt; unfrozen, every day would be a new request
    # and nothing recorded yesterday would replay.
    assert datetime.date.today().isoformat() not in prompt or datetime.date.today().isoformat() == "2026-01-01"
    if "2026-01-01" not in prompt:
        assert hermes_real.version() == "0.16.0"  # the one version examined without a date line
    assert "at most 44 words" in prompt and task.query in prompt
    assert "PAY-4827" in prompt  # the evidence reached Hermes' serializer


def test_date_is_real_again_outside_a_study_call():
    import hermes_time

    hermes_real._install()
    assert hermes_time.now().year >= 2026 and hermes_time.now() != hermes_real.FROZEN_DATE


def test_over_allowance_is_retried_with_smaller_targets(payment):
    task, turns = payment
    targets = []

    def chat(messages, max_tokens):
        targets.append(messages[-1]["content"])
        return BODY + " filler" * 300

    cp = hermes_real.generate_checkpoint(turns, task.query, 100, chat, "qwen3.8-max")
    assert not cp.valid and [a.target_tokens for a in cp.attempts] == [100, 80, 64]
    assert [a.outcome for a in cp.attempts] == ["over_allowance"] * 3
    assert "at most 35 words" in targets[0] and "at most 22 words" in targets[2]
