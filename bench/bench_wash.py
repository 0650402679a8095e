"""Wall time of the offline wash sweep: the three measurements on every store, reference washer.

    python bench/bench_wash.py [--repeat N]

Each figure is one fresh `python run.py -m benchmark=wash measurement=ceiling,infinity,sawtooth`
process (Hydra, 3 jobs: 7 stores x 1 arm, 7 stores x 2 arms, the feed's 2 arms), start-up
included, tracked into a new SQLite store in a temporary folder.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SWEEP = ["-m", "benchmark=wash", "measurement=ceiling,infinity,sawtooth"]


def timed(folder: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "run.py"),
            *SWEEP,
            f"tracking.uri=sqlite:///{folder / 'mlflow.db'}",
            f"tracking.artifacts={folder / 'mlruns'}",
            f"hydra.sweep.dir={folder / 'multirun'}",
        ],
        cwd=folder,
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    times = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            times.append(timed(Path(tmp)))
    print(
        f"offline wash sweep (3 measurements, reference washer): median {statistics.median(times):.1f} s "
        f"(min {min(times):.1f}, max {max(times):.1f}, n={len(times)})"
    )


if __name__ == "__main__":
    main()
