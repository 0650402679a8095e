"""Parallel speed-up: the joblib launcher with 2 worker processes against Hydra's basic launcher.

    python bench/bench_parallel.py [--repeat N] [--jobs 2]

Two offline sweeps, each as one fresh ``python run.py`` process (start-up included) tracked into
a new SQLite store in a temporary folder:

- compaction: ``-m method=full,S,H topn=0..5`` (13 arms x 14 tasks, reference backend);
- wash: ``-m benchmark=wash measurement=ceiling,infinity,sawtooth`` (as ``bench_wash.py``).

Each line prints the median wall time of both launchers and their ratio, with the load average
before and after (the machine may be shared: read the ratio, not the seconds).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SWEEPS = {
    "compaction 13 arms": ["-m", "method=full,S,H", "topn=0..5"],
    "wash 3 measurements": ["-m", "benchmark=wash", "measurement=ceiling,infinity,sawtooth"],
}


def timed(sweep: list[str], launcher: list[str], folder: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "run.py"),
            *sweep,
            *launcher,
            f"tracking.uri=sqlite:///{folder / 'mlflow.db'}",
            f"tracking.artifacts={folder / 'mlruns'}",
            f"hydra.sweep.dir={folder / 'multirun'}",
        ],
        cwd=folder,
        check=True,
        capture_output=True,
        env={**os.environ, "CI": "1"},  # no per-condition progress lines
    )
    return time.perf_counter() - start


def median_of(sweep: list[str], launcher: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as tmp:
            times.append(timed(sweep, launcher, Path(tmp)))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2, help="joblib worker processes")
    args = parser.parse_args()
    joblib = ["hydra/launcher=joblib_local", f"hydra.launcher.n_jobs={args.jobs}"]
    print(f"cores: {os.cpu_count()}, repeat: {args.repeat}")
    for name, sweep in SWEEPS.items():
        load = os.getloadavg()[0]
        basic = median_of(sweep, [], args.repeat)
        parallel = median_of(sweep, joblib, args.repeat)
        print(
            f"{name}: basic {basic:.1f} s, joblib x{args.jobs} {parallel:.1f} s, speed-up {basic / parallel:.2f}x "
            f"(load average {load:.2f} before, {os.getloadavg()[0]:.2f} after)",
            flush=True,
        )


if __name__ == "__main__":
    main()
