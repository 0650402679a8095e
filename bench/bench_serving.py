"""How much do the local server's options save on a wash gate's calls?

    python bench/bench_serving.py [--threads 2] [--keys K1,K2,...]

Sends the same recorded requests, in the order a gate made them, to two llama.cpp servers on the
packaged 1.5B tier (Qwen2.5-Coder-1.5B-Instruct, Q4_K_M), one after the other, each fresh:

- **before**: llama-cpp-python's server defaults (every prompt token's logits kept, no RAM cache);
- **after**: the options washexp starts it with (``llama_server.server_command``: no per-token
  logits, the RAM prompt cache counting all it keeps).

The default requests are five calls of the 1.5B wash step's infinity loop on its largest store
(about 7,900 prompt tokens), from ``recordings/qwen2.5-coder-1.5b``: outsider, insider, outsider
(the same words, the next draw), insider, check. Prints each call's wall time, the totals, their
ratio and the server's peak resident memory. Needs the extras: pip install -e '.[local-large]'.
Nothing is recorded: the replies are thrown away (a bench measures time, not answers).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from washexp.models import llama_server, weights  # noqa: E402
from washexp.models.base import ChatRequest  # noqa: E402
from washexp.models.local import served_name  # noqa: E402
from washexp.models.openai_client import OpenAIModel  # noqa: E402

RECORDINGS = ROOT / "recordings" / "qwen2.5-coder-1.5b"
GATE = (
    "4c94edd154544386120f92dc4520246f6c01d53d3e575ffcfc9a6a5cc33f30f5",  # outsider
    "2ca56542b9be880c9f8a75ce0d9d5dacbb5762765baa32479c981d314b150451",  # insider
    "2c7812cf54652ffc5068ed34e45b1480f4c24a9ce3e620376f2665e471a46e97",  # outsider, next draw
    "9675d960098b332c802ed5f6aca391c4c00154d74ce361fc6f5f31f7383fb1a3",  # insider
    "fe95005e80e49542961d882ee71a1c9abc34722aab9c3e1e62bc848fb90cbcd1",  # check
)
SETUPS = {
    "before": {"cache_bytes": 0, "extra": ("--logits_all", "true")},
    "after": {},
}


def recorded(key: str) -> tuple[str, ChatRequest]:
    """A recording's role and its request, as asked (its fields are ``ChatRequest``'s own)."""
    entry = json.loads((RECORDINGS / key[:2] / f"{key}.json").read_text(encoding="utf-8"))
    request = entry["request"]
    return entry["role"], ChatRequest(**{**request, "messages": tuple(request["messages"])})


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/<pid>/status")


def run(setup: str, calls: list[tuple[str, ChatRequest]], threads: int, gguf: Path, alias: str) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        server = llama_server.start(
            gguf, alias=alias, n_ctx=16384, threads=threads, log_path=Path(tmp) / "server.log", **SETUPS[setup]
        )
        try:
            client = OpenAIModel(alias, server.base_url, timeout_s=1800, max_retries=0)
            total = 0.0
            for role, request in calls:
                start = time.perf_counter()
                reply = client.chat(request)
                took = time.perf_counter() - start
                total += took
                print(f"  {setup:6} {role:14} {reply.prompt_tokens:>5} prompt tokens  {took:7.1f} s", flush=True)
            print(f"{setup}: {total:.1f} s for {len(calls)} calls; server peak RSS {peak_rss_mb(server.pid):.0f} MB")
            return total
        finally:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--keys", default=",".join(GATE), help="recording keys, in order")
    args = parser.parse_args()
    calls = [recorded(k) for k in args.keys.split(",")]
    tier = weights.packaged("qwen2.5-coder-1.5b-instruct-q4_k_m")
    gguf = weights.materialize(tier)
    sha256 = llama_server.file_sha256(gguf)
    weights.check(tier, sha256, str(gguf))  # as model=local-1.5b does: never other bytes
    alias = served_name("Qwen2.5-Coder-1.5B-Instruct", sha256, 16384)
    print(f"Qwen2.5-Coder-1.5B-Instruct (Q4_K_M), {args.threads} server threads, {len(calls)} recorded calls")
    before = run("before", calls, args.threads, gguf, alias)
    after = run("after", calls, args.threads, gguf, alias)
    print(f"after/before: {after / before:.2f} of the wall time")


if __name__ == "__main__":
    main()
