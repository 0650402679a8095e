"""Seconds from starting `washexp ui` / `washexp server` to the MLflow server's first healthy answer.

    python bench/bench_ui.py [--repeat N] [--plain]

Each start is a fresh process against a small store (one experiment) in a temporary folder, on a
free port; the figure is the time until ``GET /health`` answers 200 (the UI's page is served by
the same process from then on). ``--plain`` also times MLflow's own defaults (``mlflow server``:
four uvicorn workers and the job runner), which ``washexp ui`` used to start.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from washexp.tracking.server import healthy, stop  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def seconds_to_healthy(cmd: list[str], port: int, env: dict | None = None) -> float:
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})}
    )
    try:
        while not healthy(f"http://127.0.0.1:{port}", timeout_s=1):
            if proc.poll() is not None:
                raise SystemExit(f"{' '.join(cmd[:4])} exited {proc.returncode} before answering")
            if time.perf_counter() - start > 180:
                raise SystemExit("no healthy answer within 180 s")
            time.sleep(0.1)
        return time.perf_counter() - start
    finally:
        stop(proc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--plain", action="store_true", help="also time plain `mlflow server` (MLflow's defaults)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        uri = f"sqlite:///{Path(tmp) / 'mlflow.db'}"
        from washexp.tracking import open_tracker

        # the schema, once: close() waits for the store's set-up (it runs on a thread of its own)
        open_tracker(True, uri, str(Path(tmp) / "mlruns"), "compaction", Path(tmp)).close()
        washexp = [sys.executable, "-m", "washexp.cli"]
        cases = {
            "washexp ui": lambda p: washexp + ["ui", "--tracking-uri", uri, "--port", str(p), "--no-browser"],
            "washexp server": lambda p: (
                washexp + ["server", "--backend-store-uri", uri, "--port", str(p), "--artifacts-destination", tmp]
            ),
        }
        if args.plain:
            cases["mlflow server (its defaults)"] = lambda p: [
                sys.executable,
                *("-m", "mlflow", "server", "--backend-store-uri", uri, "--port", str(p)),
            ]
        env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        for name, build in cases.items():
            times = []
            for _ in range(args.repeat):
                port = free_port()
                times.append(seconds_to_healthy(build(port), port, env))
            print(
                f"{name:30s} median {statistics.median(times):5.1f} s to a healthy answer "
                f"(min {min(times):.1f}, max {max(times):.1f}, n={len(times)}, load average {os.getloadavg()[0]:.2f})"
            )


if __name__ == "__main__":
    main()
