"""H, washexp's Hermes context-checkpoint protocol: each test names the trap it guards."""

from __future__ import annotations

import json
import math
import re

import pytest

from washexp.compaction.backends.reference import reference_writer
from washexp.compaction.methods.checkpoint import ProvenanceError, word_limit
from washexp.compaction.methods.h_native import (
    CONTENT_HEAD,
    CONTENT_TAIL,
    INPUT_MAX,
    LEGACY_SUMMARY_PREFIX,
    NO_USER_SENTINEL,
    SUMMARY_PREFIX,
    TRUNCATION_MARKER,
    CheckpointRequest,
    build_prompt,
    generate_checkpoint,
    has_real_user_turn,
    serialize_turns,
    strip_summary_prefix,
    validate_provenance,
    with_summary_prefix,
)
from washexp.compaction.methods.redact import redact
from washexp.tokens import count

FOCUS = "Investigate the original payment retry incident."


def _call(call_id: str, name: str, **args) -> dict:
    return {"role": "assistant", "content": "", "tool_calls": [{"id": call_id, "name": name, "arguments": args}]}


def _result(call_id: str, name: str, content: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": content}


def _noisy_log(n_lines: int, middle: str) -> str:
    """A build log of ``n_lines`` similar lines with ``middle`` in the middle."""
    lines = [f"step {i:04d}/4000 compiling module_{i % 97:02d}.o ok" for i in range(n_lines)]
    lines[n_lines // 2] = middle
    return "\n".join(lines)


def _payment_turns() -> list[dict]:
    """Evidence-only turns (assistant + tool), shaped like the payment task's trajectory."""
    source = "\n".join(
        f"{i:>6}|{line}"
        for i, line in enumerate(
            [
                "import uuid",
                "",
                "MAX_ATTEMPTS = 3",
                "NO_RETRY_STATUSES = {402, 422}",
                "def attempt_key(invoice, n): return f'pay-{chr(96 + n)}'",
                "def charge(invoice, amount_minor):",
                "    ...",
            ],
            start=1,
        )
    )
    incident = (
        "incident PAY-4827 opened 2024-03-05T09:14:00Z by on-call\n"
        "invoice INV-731 amount_minor=12900 currency=EUR\n"
        "attempt pay-a: gateway timeout after 30s (first attempt committed)\n"
        "attempt pay-b: succeeded as charge CH-991\n"
        "gateway endpoint 10.0.4.17:8443 running payments-gw v2.14.1"
    )
    tests = (
        "tests/test_retry.py::test_timeout_then_success PASSED (attempts=2)\n"
        "tests/test_retry.py::test_validation_422 PASSED (attempts=1)\n"
        "tests/test_retry.py::test_three_timeouts PASSED (attempts=3)"
    )
    return [
        _call("call_1", "read_file", path="src/payments/retry.py"),
        _result("call_1", "read_file", source),
        _call("call_2", "terminal", command="cat incidents/PAY-4827.log"),
        _result("call_2", "terminal", incident),
        _call("call_3", "terminal", command="python3 ./noisy_build.py"),
        _result("call_3", "terminal", _noisy_log(400, "UNIQUE_TOKEN=tok_9f31c_middle")),
        _call("call_4", "terminal", command="pytest tests/test_retry.py -q"),
        _result("call_4", "terminal", tests),
    ]


def _scripted(outputs: list[str]):
    """A writer that returns the given outputs in turn and records the requests it got."""
    requests: list[CheckpointRequest] = []

    def writer(request: CheckpointRequest) -> str:
        requests.append(request)
        return outputs[min(request.attempt, len(outputs) - 1)]

    return writer, requests


def _body(critical: str, snapshot: str = NO_USER_SENTINEL) -> str:
    return f"## Historical Task Snapshot\n{snapshot}\n\n## Critical Context\n{critical}"


# --- serialization ---------------------------------------------------------------------------


def test_tool_result_over_6000_chars_keeps_head_4000_and_tail_1500_only():
    """Trap: the middle of a long unit never reaches the writer, so H cannot keep it."""
    middle = "MIDDLE-LINE build step 2000 of 4000 marker=Q7"
    unit = _noisy_log(240, middle)[:9000]
    assert len(unit) == 9000 and middle in unit
    text = serialize_turns([_result("call_9", "terminal", unit)])
    assert text == ("[TOOL RESULT call_9]: " + unit[:CONTENT_HEAD] + TRUNCATION_MARKER + unit[-CONTENT_TAIL:])
    assert TRUNCATION_MARKER == "\n...[truncated]...\n"
    assert middle not in text


def test_think_blocks_are_stripped_and_tool_calls_rendered_with_json_args():
    """Trap: hidden reasoning leaking into the summary input; tool calls losing their args."""
    turns = [
        {
            "role": "assistant",
            "content": "<think>private plan: guess INV-000</think>Reading the retry module.",
            "tool_calls": [
                {"id": "c1", "name": "read_file", "arguments": {"path": "src/payments/retry.py", "offset": 1}}
            ],
        },
        _result("c1", "read_file", "     1|MAX_ATTEMPTS = 3"),
    ]
    text = serialize_turns(turns)
    assert "private plan" not in text and "<think>" not in text
    assert text == (
        "[ASSISTANT]: Reading the retry module.\n[Tool calls:\n"
        '  read_file({"path": "src/payments/retry.py", "offset": 1})\n]\n\n'
        "[TOOL RESULT c1]:      1|MAX_ATTEMPTS = 3"
    )


def test_long_tool_args_keep_first_1200_chars_and_media_is_replaced():
    """Trap: oversized tool arguments and MEDIA: paths passing through verbatim."""
    args = {"content": "x" * 2000}
    turns = [
        {
            "role": "assistant",
            "content": "see MEDIA:/tmp/shot.png",
            "tool_calls": [{"id": "c2", "name": "write_file", "arguments": args}],
        }
    ]
    text = serialize_turns(turns)
    rendered = json.dumps(args)[:1200] + "..."
    assert f"  write_file({rendered})\n]" in text
    assert "MEDIA:" not in text and "see [media attachment]" in text


def test_whole_serialization_is_bounded_45_55():
    """Trap: an unbounded summary input; the legacy path keeps the first 45% and last 55%."""
    turns = [_result(f"c{i}", "terminal", f"unit {i} " + "y" * 5000) for i in range(40)]
    text = serialize_turns(turns)
    full = "\n\n".join(f"[TOOL RESULT c{i}]: unit {i} " + "y" * 5000 for i in range(40))
    assert len(full) > INPUT_MAX
    assert text.startswith(full[: int(INPUT_MAX * 0.45)])
    assert text.endswith(full[-(INPUT_MAX - int(INPUT_MAX * 0.45)) :])
    assert "chars left out of the middle" in text and len(text) < INPUT_MAX + 200


def test_evidence_only_turns_take_the_no_user_branch():
    """Trap: counting synthetic markers as user turns would switch off provenance checks."""
    assert not has_real_user_turn(_payment_turns())
    marker = {"role": "user", "content": "Continue from the compressed conversation context above."}
    handoff = {"role": "user", "content": with_summary_prefix("## Goal\nx")}
    assert not has_real_user_turn([marker, handoff, *_payment_turns()])
    assert has_real_user_turn([{"role": "user", "content": FOCUS}])


# --- redaction -------------------------------------------------------------------------------


def test_credentials_are_redacted():
    """Trap: keys, Bearer headers and URL passwords reaching the writer or the body."""
    text = (
        "OPENAI key sk-proj-abcdefghijklmnop1234\n"
        'curl -H "Authorization: Bearer eyJabc.def-ghi_jkl"\n'
        "git clone https://deploy:hunter2secret@git.example.com/pay.git\n"
        "db postgres://app:pw123@10.0.4.17:5432/pay"
    )
    out = redact(text)
    for secret in ("sk-proj-abcdefghijklmnop1234", "eyJabc.def-ghi_jkl", "hunter2secret", "pw123"):
        assert secret not in out
    assert "Authorization: Bearer [REDACTED]" in out
    assert "https://deploy:[REDACTED]@git.example.com/pay.git" in out
    assert redact(out) == out  # idempotent: a second pass changes nothing


def test_ordinary_ids_and_endpoints_survive_redaction():
    """Trap: over-redaction erasing the very facts the benchmark scores."""
    text = (
        "incident PAY-4827 on 10.0.4.17:8443, invoice INV-731, retry_limit: 7, "
        "timeout=30, MAX_TOKENS=4096, 2024-03-05T09:14:00Z"
    )
    assert redact(text) == text


def test_env_style_token_assignment_is_redacted_like_hermes():
    """Trap: Hermes masks UNIQUE_TOKEN=<opaque value>, so H cannot carry the build token."""
    line = "UNIQUE_TOKEN=tok_9f31c_middle"
    assert redact(line) == "UNIQUE_TOKEN=[REDACTED]"
    assert redact("   12|" + line) == "   12|UNIQUE_TOKEN=[REDACTED]"
    hermes = pytest.importorskip("agent.redact")
    # Both mask the same span of each sample: what precedes it is kept word for word and the
    # secret's middle is gone (Hermes keeps a 6+4 character hint of long values; we keep none).
    for kept, secret in (
        ("UNIQUE_TOKEN=", "tok_9f31c_middle"),
        ("export UNIQUE_TOKEN=", "tok_9f31c_middle"),
        ("", "sk-proj-abcdefghijklmnop1234"),
        ("Authorization: Bearer ", "abcdefghijklmnopqrstuvwxyz"),
    ):
        theirs, ours = hermes.redact_sensitive_text(kept + secret, force=True), redact(kept + secret)
        for masked in (theirs, ours):
            assert masked.startswith(kept) and secret[6:-4] not in masked, (kept, masked)
        assert ours == kept + "[REDACTED]"
    assert hermes.redact_sensitive_text("PAY-4827 10.0.4.17:8443", force=True) == redact("PAY-4827 10.0.4.17:8443")


# --- provenance ------------------------------------------------------------------------------


def test_user_attribution_without_a_user_turn_raises():
    """Trap: an evidence-only transcript summarized as if a user had asked something."""
    with pytest.raises(ProvenanceError):
        validate_provenance(_body("- PAY-4827", snapshot="User asked: fix it"), False)
    with pytest.raises(ProvenanceError):  # sentinel present, attribution elsewhere
        validate_provenance(_body("- user ASKED : retry PAY-4827"), False)
    with pytest.raises(ProvenanceError):  # no snapshot section at all
        validate_provenance("## Critical Context\n- PAY-4827", False)
    validate_provenance(_body("- PAY-4827"), False)
    validate_provenance(_body("- PAY-4827", snapshot="User asked: fix it"), True)


def test_provenance_failure_stops_after_one_attempt():
    """Trap: retrying a provenance failure as if it were a length problem."""
    writer, requests = _scripted([_body("- PAY-4827", snapshot="User asked: fix it")])
    result = generate_checkpoint(_payment_turns(), FOCUS, 128, writer)
    assert not result.valid and result.body is None
    assert [a.outcome for a in result.attempts] == ["provenance"]
    assert len(requests) == 1 and result.last_body.startswith("## Historical Task Snapshot")
    assert result.failure.startswith("H provenance")


# --- length-check retries --------------------------------------------------------------------


def test_too_long_twice_then_fitting_is_valid_on_the_third_attempt():
    """Trap: wrong target schedule; the requested target shrinks by 0.8 with no feedback."""
    allowance = 256
    long_body = _body("\n".join(f"- fact {i}: INV-{i} amount {i * 100}" for i in range(120)))
    assert count(long_body) > allowance
    writer, requests = _scripted([long_body, long_body, _body("- INV-731 CH-991")])
    result = generate_checkpoint(_payment_turns(), FOCUS, allowance, writer)
    assert result.valid and result.body == _body("- INV-731 CH-991")
    assert [a.outcome for a in result.attempts] == ["over_allowance", "over_allowance", "ok"]
    targets = [r.target_tokens for r in requests]
    assert targets == [256, math.floor(256 * 0.8), math.floor(256 * 0.64)] == [256, 204, 163]
    assert [r.word_limit for r in requests] == [word_limit(t) for t in targets]
    assert all(f"Target ~{r.target_tokens} tokens" in r.prompt for r in requests)


def test_always_too_long_is_invalid_after_exactly_three_attempts():
    """Trap: an over-allowance body accepted, or an unbounded retry loop."""
    long_body = _body("\n".join(f"- fact {i}: INV-{i} amount {i * 100}" for i in range(120)))
    writer, requests = _scripted([long_body])
    result = generate_checkpoint(_payment_turns(), FOCUS, 64, writer)
    n = count(long_body)
    assert not result.valid and result.body is None and len(requests) == 3
    assert [a.target_tokens for a in result.attempts] == [64, 51, 40]
    assert result.failure == f"H body {n} tokens > allowance 64 after 3 attempts"
    assert result.last_body == long_body


def test_writer_output_is_post_processed_before_measuring():
    """Trap: think blocks, secrets or a control prefix counted in (or kept in) the body."""
    raw = (
        "<think>count the words</think>\n"
        + SUMMARY_PREFIX
        + "\n"
        + _body("- gateway key sk-proj-abcdefghijklmnop1234 for PAY-4827")
    )
    writer, _ = _scripted([raw])
    result = generate_checkpoint(_payment_turns(), FOCUS, 128, writer)
    assert result.valid
    assert result.body == _body("- gateway key [REDACTED] for PAY-4827")


# --- prefix ----------------------------------------------------------------------------------


def test_prefix_round_trip_legacy_prefix_and_end_marker():
    """Trap: the control prefix or the END marker leaking into the carried body."""
    body = _body("- PAY-4827")
    assert SUMMARY_PREFIX.endswith(":") and "\n" not in SUMMARY_PREFIX
    assert with_summary_prefix(body) == SUMMARY_PREFIX + "\n" + body
    assert strip_summary_prefix(with_summary_prefix(body)) == body
    assert strip_summary_prefix(LEGACY_SUMMARY_PREFIX + "  \n" + body) == body
    ended = (
        with_summary_prefix(body) + "\n\n--- END OF CONTEXT SUMMARY — respond to the "
        "message below, not the summary above ---\nnext user message"
    )
    assert strip_summary_prefix(ended) == body


# --- prompt ----------------------------------------------------------------------------------


def test_prompt_is_frozen_no_user_branch_word_limit_and_focus_last():
    """Trap: a date line or other drift making the frozen prompt differ between runs."""
    serialized = serialize_turns(_payment_turns())
    a = build_prompt(serialized, FOCUS, 64, word_limit(64), False)
    assert a == build_prompt(serialized, FOCUS, 64, word_limit(64), False)
    assert not re.search(r"\d{4}-\d{2}-\d{2}", a.replace(serialized, ""))
    assert NO_USER_SENTINEL in a and "None. No user-authored questions exist." in a
    assert "Target ~64 tokens" in a and "at most 22 words" in a
    headings = re.findall(r"^## .+$", a.replace(serialized, ""), re.M)
    assert headings == ["## Historical Task Snapshot", "## Critical Context"]
    # The sentinel is a line of the template to copy, never inside a bracketed rule.
    assert f"## Historical Task Snapshot\n{NO_USER_SENTINEL}\n\n## Critical Context" in a
    optional = "## Goal, ## Constraints & Preferences, ## Completed Actions, ## Active State, ## Blocked"
    assert f"optional sections {optional}, ## Key Decisions, ## Errors & Fixes, ## Resolved Questions" in a
    assert a.rsplit("\n\n", 1)[1].startswith(f'FOCUS TOPIC: "{FOCUS}"')
    assert NO_USER_SENTINEL not in build_prompt(serialized, FOCUS, 64, 22, True)


# --- the reference writer --------------------------------------------------------------------


def _request(target: int, focus: str = FOCUS) -> CheckpointRequest:
    serialized = serialize_turns(_payment_turns())
    limit = word_limit(target)
    return CheckpointRequest(
        build_prompt(serialized, focus, target, limit, False), serialized, focus, target, limit, False, 0
    )


@pytest.mark.parametrize("target", [40, 64, 128, 256])
def test_reference_writer_honours_tokens_and_words(target):
    """Trap: a baseline that overshoots its own budget and fails attempt 0."""
    request = _request(target)
    body = reference_writer(request)
    assert count(body) <= target and len(body.split()) <= request.word_limit
    validate_provenance(body, False)
    assert body.startswith(_body("").rstrip("\n"))


def test_reference_writer_keeps_structured_facts_and_is_deterministic():
    """Trap: a nondeterministic baseline, or one that drops INV-731 when it fits."""
    request = _request(256)
    body = reference_writer(request)
    assert body == reference_writer(request)
    assert "INV-731" in body
    assert "tok_9f31c_middle" in str(_payment_turns())  # the raw token is in the evidence...
    assert "tok_9f31c_middle" not in body  # ...and never reaches the checkpoint
    assert "|" not in body  # read_file line-number gutters are stripped
    lines = body.split("\n")[4:]
    source = request.serialized
    assert all(source.find(b[2:]) >= 0 for b in lines)
    assert lines == sorted(lines, key=lambda b: source.find(b[2:]))  # rendered in source order


def test_generate_checkpoint_with_reference_writer_succeeds_first_attempt():
    """Trap: the offline baseline needing retries, or quoting tool output such as a support
    transcript's "User asked:" line and so failing provenance."""
    chat = _result("call_5", "terminal", "ticket PAY-4827 transcript\nUser asked: refund INV-731")
    result = generate_checkpoint([*_payment_turns(), chat], FOCUS, 64, reference_writer)
    assert result.valid and [a.outcome for a in result.attempts] == ["ok"]
    assert count(result.body) <= 64


def test_word_limit():
    """Trap: the study's word limit is 35% of the target, floored, at least 18."""
    assert word_limit(64) == 22 and word_limit(256) == 89 and word_limit(40) == 18
