"""A first run killed at random moments, then the next run: does it exit 0? (issue 37)

    python bench/bench_first_run_kills.py [--kills 24] [--seed N]

Each kill: a new store in a temporary folder, ``python run.py method=S topn=0 task=payment`` on it
(its own process group), SIGKILL to the group after a delay drawn uniformly between 0 and the
length of a whole first run (measured once first), then the same command again. Printed: each
delay, what the killed run had left in the folder, and the next run's exit status and last line;
then how many next runs failed (each failed one's stderr in ``first-run-kill-NN.stderr.txt`` in the
current folder). The Done criterion of issue 37: 0 of 24.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CELL = ["method=S", "topn=0", "task=payment"]


def command(store: Path) -> list[str]:
    return [
        sys.executable, str(ROOT / "run.py"), *CELL,
        f"tracking.uri=sqlite:///{store / 'mlflow.db'}", f"tracking.artifacts={store / 'mlruns'}",
        f"hydra.run.dir={store / 'outputs'}",
    ]  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=24)
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory(prefix="washexp-kills-") as tmp:
        whole = Path(tmp, "whole")
        whole.mkdir()
        started = time.monotonic()
        subprocess.run(command(whole), cwd=whole, env=env, capture_output=True, check=True)
        length = time.monotonic() - started
        print(f"a whole first run: {length:.1f} s")
        failed = 0
        for i in range(args.kills):
            store = Path(tmp, f"k{i:02d}")
            store.mkdir()
            delay = rng.uniform(0, length)
            proc = subprocess.Popen(
                command(store), cwd=store, env=env, start_new_session=True,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            try:
                proc.wait(timeout=delay)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            left = sorted(p.name for p in store.iterdir())
            done = subprocess.run(command(store), cwd=store, env=env, capture_output=True, text=True)
            last = (done.stderr.strip().splitlines() or [""])[-1][:160]
            failed += done.returncode != 0
            if done.returncode != 0:  # the whole of its stderr, for a traceback
                Path(f"first-run-kill-{i + 1:02d}.stderr.txt").write_text(done.stderr)
            print(f"kill {i + 1:2d} at {delay:5.2f} s, left {left}: next run exit {done.returncode} {last}")
        print(f"{failed} of {args.kills} next runs failed")
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
