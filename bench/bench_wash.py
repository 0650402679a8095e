"""Wall time of the offline wash sweep: the three measurements on every store, reference washer.

    python bench/bench_wash.py [--repeat N]

Each figure is one fresh `python run.py -m benchmark=wash measurement=ceiling,infinity,sawtooth`
process (Hydra, 3 jobs: 7 stores x 1 arm, 7 stores x 2 arms, the feed's 2 arms), start-up
included, tracked into a new SQLite store in a temporary folder.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from bench_parallel import timed  # one fresh run.py process, timed (the scripts share bench/ as sys.path[0])

SWEEP = ["-m", "benchmark=wash", "measurement=ceiling,infinity,sawtooth"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    times = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            times.append(timed(SWEEP, [], Path(tmp)))  # the basic launcher
    print(
        f"offline wash sweep (3 measurements, reference washer): median {statistics.median(times):.1f} s "
        f"(min {min(times):.1f}, max {max(times):.1f}, n={len(times)})"
    )


if __name__ == "__main__":
    main()
