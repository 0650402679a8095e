# ruff: noqa: E501  (real server log lines, kept whole)
"""What an arm run reads from the local server's log: completions, prompt tokens evaluated, and
prompt tokens reused from the request before (the lines below are a real llama-cpp-python 0.3.36
server log, the 0.5B tier answering one context twice)."""

from __future__ import annotations

from washexp.models.llama_server import prompt_tokens_evaluated

LOG = """\
llama_perf_context_print: prompt eval time =       0.06 ms /    32 tokens (    0.00 ms per token, 533333.33 tokens per second)
llama_perf_context_print:        eval time =       0.00 ms /     1 runs   (    0.00 ms per token,      inf tokens per second)
INFO:     127.0.0.1:40584 - "POST /v1/chat/completions HTTP/1.1" 200 OK
# washexp: self-test: 32 prompt + 1 completion tokens in 0.54 s
Llama.generate: 5 prefix-match hit, remaining 845 prompt tokens to eval
llama_perf_context_print: prompt eval time =    3601.85 ms /   845 tokens (    4.26 ms per token,   234.60 tokens per second)
llama_perf_context_print:        eval time =    1274.47 ms /    42 runs   (   30.34 ms per token,    32.95 tokens per second)
Llama.generate: 849 prefix-match hit, remaining 1 prompt tokens to eval
llama_perf_context_print: prompt eval time =       0.00 ms /     1 tokens (    0.00 ms per token,      inf tokens per second)
"""


def test_completions_evaluated_and_reused_prompt_tokens():
    got = prompt_tokens_evaluated({"llama-server.log": LOG})
    assert got == {
        "server_completions": 3.0,
        "server_prompt_tokens_evaluated": 32.0 + 845.0 + 1.0,
        "server_prompt_tokens_reused": 5.0 + 849.0,
    }


def test_nothing_without_a_local_server():
    assert prompt_tokens_evaluated({}) == {}
    assert prompt_tokens_evaluated({"llama-server.log": ""})["server_completions"] == 0.0
