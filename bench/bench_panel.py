"""Does the 13-arm panel keep an endpoint busy? Wall time against the ideal.

    python bench/bench_panel.py [--latency 0.05] [--concurrency 8] [--tracking]

Starts the scripted local OpenAI-compatible server (tests/openai_server.py) with a fixed
per-request latency, then runs the whole panel once, as a user would:
``python run.py -m method=full,S,H topn=0..5 model=openai ...`` over all tasks, 3 generations,
2 answers per context, a fresh recordings folder (every request is a real HTTP call), tracking
off unless ``--tracking``. Ideal = requests x latency / concurrency: the time the endpoint
alone needs at full parallelism. The wall time includes interpreter start-up, Hydra and the
harness's own work (token counting, grading). The server's replies are scripted: this measures
scheduling, never a model.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.openai_server import Script, serve  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--latency",
        type=float,
        default=0.5,
        help="seconds per request (default 0.5: a short reader call on a served model)",
    )
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--tracking", action="store_true", help="track to a temporary SQLite store")
    args = parser.parse_args()
    script = Script(latency=args.latency)
    with tempfile.TemporaryDirectory() as tmp, serve(script) as url:
        folder = Path(tmp)
        tracking = (
            [f"tracking.uri=sqlite:///{folder / 'mlflow.db'}", f"tracking.artifacts={folder / 'mlruns'}"]
            if args.tracking
            else ["tracking=off"]
        )
        command = [
            sys.executable,
            str(ROOT / "run.py"),
            "-m",
            "method=full,S,H",
            "topn=0..5",
            "model=openai",
            f"endpoint.base_url={url}",
            "model.name=qwen3.8-max",
            "model.platform=scripted-test-server",
            f"endpoint.recordings={folder / 'rec'}",
            f"endpoint.max_concurrency={args.concurrency}",
            "model.generations=3",
            "model.answers_per_context=2",
            "task=all",
            *tracking,
            f"hydra.sweep.dir={folder / 'multirun'}",
        ]
        start = time.perf_counter()
        subprocess.run(command, cwd=folder, check=True, capture_output=True, env={**os.environ, "CI": "1"})
        wall = time.perf_counter() - start
    requests = script.count()
    ideal = requests * args.latency / args.concurrency
    kinds = ", ".join(f"{k} {script.count(k)}" for k in ("read", "S", "Jev", "H"))
    print(f"requests        {requests} ({kinds})")
    print(f"latency         {args.latency * 1000:.0f} ms per request (fixed, scripted server)")
    print(f"concurrency     {args.concurrency} (peak in flight observed: {script.peak})")
    print(f"ideal           {ideal:.2f} s  (requests x latency / concurrency)")
    print(f"wall            {wall:.2f} s  (tracking {'on' if args.tracking else 'off'})")
    print(f"ratio           {wall / ideal:.2f}")


if __name__ == "__main__":
    main()
