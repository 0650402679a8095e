"""Each local tier's speed, served against in-process, on the same prompts.

    python bench/bench_tiers.py [--tier local] [--tier local-1.5b] [--pairs 3] [--threads N]

For a tier (its cache file, joined and verified as a run would), this starts washexp's own
llama.cpp server (``washexp.models.llama_server.start``, prompt cache off) and loads the same file
in this process with llama-cpp-python (``llama_cpp.Llama``, the same build and settings), then
alternates the two on the same requests, pair by pair:

- a prompt request: the Full context of a control task's reader request, ``max_tokens=1``: wall
  time is the prompt's evaluation (each request opens with a fresh nonce line, so neither side
  can reuse a prefix it evaluated before);
- a generation request: a short prompt asking for a long count, ``max_tokens=128``, temperature 0.

It prints, per tier, the medians of prompt tokens/s and generation tokens/s on each side (from
each reply's own token counts over the client-side wall time) and the served/in-process ratio of
wall time per request kind (the server's overhead: HTTP, JSON, the openai client). Figures only;
nothing is asserted. Needs the extras (sh scripts/install-local.sh; pip install -e '.[local-large]').
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TIERS = {"local": "qwen2.5-coder-0.5b-instruct-q4_k_m", "local-1.5b": "qwen2.5-coder-1.5b-instruct-q4_k_m"}
TASKS = ("backup", "active_config", "retry_backoff")
COUNT = [{"role": "user", "content": "Count from 1 to 300, one number per line, nothing else."}]


def prompts() -> list[list[dict]]:
    from washexp.compaction.inputs.context import full_context
    from washexp.compaction.inputs.fixtures import load_tasks

    tasks = load_tasks(ROOT / "fixtures" / "compaction", list(TASKS))
    return [list(full_context(t).messages) for t in tasks]


def fresh(messages: list[dict], nonce: str) -> list[dict]:
    first = dict(messages[0])
    first["content"] = f"[{nonce}]\n{first['content']}"
    return [first, *messages[1:]]


def timed(call, messages: list[dict], max_tokens: int) -> tuple[float, int, int]:
    t0 = time.perf_counter()
    prompt_tokens, completion_tokens = call(messages, max_tokens)
    return time.perf_counter() - t0, prompt_tokens, completion_tokens


def served_call(client, messages, max_tokens) -> tuple[int, int]:
    r = client.chat.completions.create(model="bench", messages=messages, max_tokens=max_tokens, temperature=0)
    return r.usage.prompt_tokens, r.usage.completion_tokens


def in_process_call(llm, messages, max_tokens) -> tuple[int, int]:
    r = llm.create_chat_completion(messages=messages, max_tokens=max_tokens, temperature=0)
    return r["usage"]["prompt_tokens"], r["usage"]["completion_tokens"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tier", action="append", choices=sorted(TIERS))
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    args = parser.parse_args()

    import llama_cpp
    import openai

    from washexp.models import llama_server, weights

    print(
        f"llama-cpp-python {llama_cpp.__version__}, {args.threads} threads, {args.pairs} pairs, load {os.getloadavg()}"
    )
    base = prompts()
    for tier_name in args.tier or ["local"]:
        tier = weights.packaged(TIERS[tier_name])
        path = weights.materialize(tier)
        weights.check(tier, llama_server.file_sha256(path), str(path))
        n_ctx = 8192
        log = Path(tempfile.mkdtemp()) / "server.log"
        server = llama_server.start(path, alias="bench", n_ctx=n_ctx, threads=args.threads, log_path=log)
        client = openai.OpenAI(base_url=server.base_url, api_key="none", max_retries=0, timeout=1800)
        with llama_server.quiet_stderr():
            llm = llama_cpp.Llama(model_path=str(path), n_ctx=n_ctx, n_threads=args.threads, verbose=False)

        sides = (("served", partial(served_call, client)), ("in-process", partial(in_process_call, llm)))
        rows: dict[tuple[str, str], list[tuple[float, int, int]]] = {}
        try:
            for pair in range(args.pairs):
                for i, messages in enumerate(base):
                    for side, call in sides if (pair + i) % 2 == 0 else sides[::-1]:
                        got = timed(call, fresh(messages, f"{side}-{pair}-{i}"), 1)
                        rows.setdefault(("prompt", side), []).append(got)
                for side, call in sides:
                    rows.setdefault(("generation", side), []).append(timed(call, fresh(COUNT, f"{side}-g{pair}"), 128))
        finally:
            server.stop()
            llm.close()
        print(f"\n{tier_name}: {tier.key} ({path.stat().st_size / 1e9:.2f} GB)")
        for kind in ("prompt", "generation"):
            rates, walls = {}, {}
            for side in ("served", "in-process"):
                got = rows[(kind, side)]
                walls[side] = statistics.median(w for w, _, _ in got)
                rates[side] = statistics.median((p if kind == "prompt" else c) / w for w, p, c in got)
            print(
                f"  {kind:10s} tok/s served {rates['served']:7.1f}   in-process {rates['in-process']:7.1f}   "
                f"wall served/in-process {walls['served'] / walls['in-process']:.3f}"
            )


if __name__ == "__main__":
    main()
