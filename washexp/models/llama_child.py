"""The llama.cpp server as washexp runs it, in its own process: llama-cpp-python's server, with
its RAM prompt cache counting all it keeps.

Run as ``python -m washexp.models.llama_child <llama_cpp.server's arguments>`` (by
``llama_server.server_command``, behind ``washexp.child``'s watchdog). llama-cpp-python's
``LlamaRAMCache`` evicts by ``llama_state_size`` alone, yet each saved state also holds a copy of
its prompt's logits (``scores``: up to ``n_batch`` rows of 600 KB with Qwen's 152k vocabulary),
so a cache of many short prompts outgrew its limit many times over. Counting those arrays too
keeps what the cache holds within ``--cache_size``. Nothing else changes: the server, its
options and its replies are llama-cpp-python's own.
"""

from __future__ import annotations

import runpy
import sys

from llama_cpp import llama_cache


def held_bytes(cache: llama_cache.LlamaRAMCache) -> int:
    """What the cache's states hold: llama.cpp's state and the two arrays saved beside it."""
    return sum(s.llama_state_size + s.scores.nbytes + s.input_ids.nbytes for s in cache.cache_state.values())


def count_all_it_keeps() -> None:
    llama_cache.LlamaRAMCache.cache_size = property(held_bytes)
    print("washexp: the RAM prompt cache counts its saved logits and tokens", file=sys.stderr, flush=True)


if __name__ == "__main__":
    count_all_it_keeps()
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
