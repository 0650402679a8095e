"""The local llama.cpp server's life (``washexp.models.llama_server``), with the real server, the
real Qwen2.5-Coder-0.5B file of the default tier and the real openai client; nothing is mocked.

Traps guarded: a server left running after its owner stopped it or was killed outright (SIGKILL
cannot be caught: the child must notice by itself); a file that is not a model reported as a
traceback; a context over the window crashing the sweep instead of failing its one request;
a thread count that changes the answer (it is an ``endpoint.*`` setting, outside identities).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.local_gate import default_gguf, gate

pytestmark = pytest.mark.local
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _local_only(request):
    gate(request)


def _gone(pid: int, port: int, within_s: float = 15.0) -> bool:
    """The process has ended (not even a zombie of ours) and nothing listens on the port."""
    from washexp.models.llama_server import port_free

    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
            alive = state != "Z"
        except (ProcessLookupError, FileNotFoundError):
            alive = False
        if not alive and port_free(port):
            return True
        time.sleep(0.2)
    return False


def _start(tmp_path: Path, n_ctx: int = 2048, threads: int | None = 2, name: str = "qwen-test", **options):
    from washexp.models import llama_server

    return llama_server.start(
        default_gguf(), alias=name, n_ctx=n_ctx, threads=threads, log_path=tmp_path / "server.log", **options
    )


def _chat(server, text: str, max_tokens: int = 24):
    from washexp.models.base import ChatRequest
    from washexp.models.openai_client import OpenAIModel

    model = OpenAIModel(server.alias, server.base_url, max_retries=0, timeout_s=300)
    return model.chat(ChatRequest(({"role": "user", "content": text},), 0.0, max_tokens))


def test_starts_answers_with_real_text_and_stops(tmp_path):
    server = _start(tmp_path)
    pid, port = server.pid, server.port
    try:
        reply = _chat(server, "Name the capital of France in one word.")
        assert reply.text.strip(), "the real model answered nothing"
        assert reply.prompt_tokens and reply.prompt_tokens > 5
        assert reply.completion_tokens and reply.completion_tokens > 0
    finally:
        server.stop()
    assert _gone(pid, port), "the server outlived stop()"
    server.stop()  # a second stop is harmless
    log = (tmp_path / "server.log").read_text()
    assert f"server pid {pid} on port {port}" in log
    assert "--n_threads 2" in log
    assert "--logits_all false" in log  # no prompt token's logits kept for nothing
    assert "# washexp: llama.cpp build: " in log and " AMX" not in log
    assert re.search(r"# washexp: self-test: \d+ prompt \+ 1 completion tokens in [\d.]+ s", log), log


def test_the_default_tier_is_qwen2_5_coder_0_5b_q4_k_m():
    """What NOTICE says of the file, read from its own GGUF metadata."""
    from washexp.models import llama_server

    facts = llama_server.gguf_facts(default_gguf())
    assert facts["name"] == "Qwen2.5 Coder 0.5B Instruct AWQ"
    assert facts["size"] == "0.5B"
    assert facts["quantisation"] == "Q4_K_M"
    assert int(facts["trained_n_ctx"]) == 32768


def test_parent_killed_outright_takes_the_server_with_it(tmp_path):
    """SIGKILL runs no cleanup in the parent: the child's watchdog sees its stdin close."""
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from washexp.models import llama_server\n"
        "from tests.local_gate import default_gguf\n"
        "s = llama_server.start(default_gguf(), alias='x', n_ctx=512, threads=1,\n"
        f"    log_path=Path({str(tmp_path / 'server.log')!r}))\n"
        "print(s.pid, s.port, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        pid, port = map(int, parent.stdout.readline().split())
        assert not _gone(pid, port, within_s=1.0), "the server should be up while its parent lives"
    finally:
        parent.kill()
        parent.wait()
    assert _gone(pid, port), "the server outlived a parent killed with SIGKILL"


def test_a_file_that_is_not_a_model_is_one_line(tmp_path):
    from washexp.errors import ConfigError
    from washexp.models import llama_server

    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf file\n" * 100)
    with pytest.raises(ConfigError, match="not a GGUF file llama.cpp can load"):
        llama_server.gguf_facts(junk)
    with pytest.raises(ConfigError, match=f"exited .* before it answered, serving {junk}") as caught:
        llama_server.start(junk, alias="junk", n_ctx=512, threads=1, log_path=tmp_path / "junk.log")
    assert "\n" not in str(caught.value)
    port = int((tmp_path / "junk.log").read_text().split(" on port ")[1].split()[0])
    assert llama_server.port_free(port)


def test_a_context_over_the_window_is_refused_in_the_servers_words(tmp_path):
    from washexp.models.base import OverWindow

    server = _start(tmp_path, n_ctx=256)
    try:
        with pytest.raises(OverWindow, match="over the model's window: HTTP 400: .*256") as caught:
            _chat(server, "word " * 600)
        print(caught.value)
        assert _chat(server, "Say hello.", max_tokens=8).text.strip()  # the server still serves
    finally:
        server.stop()


def test_threads_change_the_speed_not_the_answer(tmp_path):
    prompt = "Write two sentences about a backup that ran at midnight."
    texts = []
    for threads in (1, 2):
        server = _start(tmp_path, threads=threads)
        try:
            texts.append(_chat(server, prompt, max_tokens=48).text)
        finally:
            server.stop()
    assert texts[0] == texts[1]


def _prefix_hits(tmp_path: Path) -> list[int]:
    from washexp.models.llama_server import _PREFIX_HIT

    return [int(n) for n in _PREFIX_HIT.findall((tmp_path / "server.log").read_text())]


@pytest.mark.parametrize("cache_bytes", [0, 1 << 30])
def test_the_prompt_cache_finds_an_earlier_prompt_again_and_changes_no_answer(tmp_path, cache_bytes):
    """A gate's calls alternate on one store (outsider, insider, outsider): the server's own prefix
    reuse holds only the prompt just before, its RAM cache the earlier ones too."""
    store = "".join(f"- line {i}: the billing service pins node 20.11.{i} in its image.\n" for i in range(40))
    first, other = f"List the versions in:\n{store}", f"Count the lines of:\n{store}"
    server = _start(tmp_path, cache_bytes=cache_bytes)
    try:
        before = _chat(server, first).text
        _chat(server, other)  # another prompt between: the slot now holds this one
        hits_so_far = len(_prefix_hits(tmp_path))
        again = _chat(server, first)
    finally:
        server.stop()
    assert again.text == before  # temperature 0: the cache changes the time, not the answer
    reused = _prefix_hits(tmp_path)[hits_so_far:]
    if cache_bytes:
        assert "washexp: the RAM prompt cache counts" in (tmp_path / "server.log").read_text()
        assert reused and reused[0] >= again.prompt_tokens - 1, reused  # all of it but the last token
    else:
        assert not reused or reused[0] < again.prompt_tokens // 2, reused  # only the shared opening


def test_the_prompt_cache_counts_the_logits_it_saves_within_its_size():
    """llama-cpp-python's RAM cache evicts by llama.cpp's state size alone; each saved state also
    holds its prompt's logits (hundreds of MB with Qwen's vocabulary). Counted, the cache stays
    within its size; uncounted, it held a 1.5B server past 20 GB."""
    import numpy as np
    from llama_cpp import llama_cache
    from llama_cpp.llama import LlamaState

    from washexp.models import llama_child

    def state(tokens: int) -> LlamaState:
        scores = np.zeros((tokens, 1000), dtype=np.single)  # 4 KB of logits a token
        return LlamaState(np.arange(tokens, dtype=np.intc), scores, tokens, b"k" * tokens, tokens, 0)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(llama_cache.LlamaRAMCache, "cache_size", llama_cache.LlamaRAMCache.cache_size)
        llama_child.count_all_it_keeps()
        cache = llama_cache.LlamaRAMCache(capacity_bytes=100_000)
        for start in range(0, 400, 40):  # ten states of 40 tokens: 165 KB each, counted
            cache[list(range(start, start + 40))] = state(40)
        assert len(cache.cache_state) == 0  # each alone is over the size: none is kept
        for start in range(0, 400, 4):
            cache[list(range(start, start + 4))] = state(4)
        assert 0 < len(cache.cache_state) < 100
        assert cache.cache_size == llama_child.held_bytes(cache) <= 100_000
