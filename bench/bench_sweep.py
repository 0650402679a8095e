"""Wall time of the offline main job: the 12-arm sweep with MLflow tracking, and without.

    python bench/bench_sweep.py [--repeat N]

Each figure is one fresh `python run.py -m method=S,H topn=0..5` process (Hydra, 12 jobs x 14
tasks), so it includes interpreter start-up and imports; the tracked run writes a new SQLite
store in a temporary folder.
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
SWEEP = ["-m", "method=S,H", "topn=0..5"]


def timed(extra: list[str], folder: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, str(ROOT / "run.py"), *SWEEP, *extra, f"hydra.sweep.dir={folder / 'multirun'}"],
        cwd=folder,
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    tracked, untracked = [], []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            store = Path(tmp)
            tracked.append(
                timed(
                    [f"tracking.uri=sqlite:///{store / 'mlflow.db'}", f"tracking.artifacts={store / 'mlruns'}"], store
                )
            )
            untracked.append(timed(["tracking=off"], store))
    for name, values in (("tracking on (SQLite + artifacts)", tracked), ("tracking off", untracked)):
        print(
            f"{name:34s} median {statistics.median(values):6.2f} s  "
            f"(min {min(values):.2f}, max {max(values):.2f}, n={len(values)})"
        )
    print(
        f"{'tracking overhead':34s} median {statistics.median(tracked) - statistics.median(untracked):6.2f} s "
        f"for 12 arm runs + 168 condition runs"
    )


if __name__ == "__main__":
    main()
