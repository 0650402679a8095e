"""How long does `washexp verify` take to rebuild a committed record from its bundle?

    python bench/bench_verify.py [RECORD.json ...] [--repeats 3] [--against DIR]

Times ``verify()`` (the rebuild and the comparison, not the regrade of the replies) of each
record in a fresh subprocess per run, so no cache of one run helps the next. With ``--against DIR``
(another checkout of washexp, e.g. ``git worktree add /tmp/old HEAD~1``) the same job runs with
that checkout's code too, alternating run by run, and the ratio is taken pair by pair so a drift in
the machine's speed moves both. Prints the median of REPEATS runs, and the median ratio.
Default records: every committed record with a bundle under ``results/``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
JOB = (
    "import sys; from washexp.verify import load_record, verify; "
    "p, r = load_record(sys.argv[1]); found = verify(p, r, None); "
    "sys.exit(f'DIFFERS {found}' if found else 0)"
)


def _once(src: Path, record: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(src)}  # that checkout's washexp comes first on the path
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", JOB, str(record)], cwd=src, env=env, check=True)
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("records", nargs="*", type=Path)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--against", type=Path, help="another checkout of washexp, timed in turn with this one")
    args = p.parse_args()
    bundled = sorted(b.with_suffix(".json") for b in (ROOT / "results").rglob("*.bundle"))
    records = [r.resolve() for r in args.records] or bundled
    for record in records:
        ours, theirs = [], []
        for _ in range(args.repeats):
            ours.append(_once(ROOT, record))
            if args.against:
                theirs.append(_once(args.against, record))
        line = f"{os.path.relpath(record, ROOT)}: median {statistics.median(ours):.1f} s"
        if theirs:
            ratio = statistics.median(a / b for a, b in zip(ours, theirs, strict=True))
            line += f", against {statistics.median(theirs):.1f} s: ratio {ratio:.2f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
