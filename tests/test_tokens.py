"""The Qwen encoder behind every token count is built once per process.

Trap it guards: ``functools.cache`` alone lets every thread that asks before the first build ends
build an encoder of its own (about 1.5 s CPU each); a served panel's first conditions count tokens
from ``endpoint.max_concurrency`` threads at once, so a panel at concurrency 8 built it 8 times.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from washexp import tokens


def test_the_encoder_is_built_once_when_threads_ask_at_once():
    tokens._load_encoder.cache_clear()
    start = threading.Barrier(4)

    def ask(i: int) -> int:
        start.wait()
        return tokens.count(f"a text no other test counts, number {i}")  # count's own cache misses

    with ThreadPoolExecutor(4) as pool:
        assert all(n > 0 for n in pool.map(ask, range(4)))
    assert tokens._load_encoder.cache_info().misses == 1
