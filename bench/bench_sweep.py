"""What MLflow tracking costs the offline main job: the 12-arm sweep with tracking, and without.

    python bench/bench_sweep.py [--repeat N] [--sweep "-m method=S topn=0,1"] [--before CHECKOUT]

Each sweep is one fresh `python run.py -m method=S,H topn=0..5` process (Hydra, 12 arms x 14
tasks = 180 runs), so its figures include interpreter start-up and imports; the tracked sweep
writes a new SQLite store in a temporary folder (``--store existing``: a store an untimed sweep of
Full on one task made first, as a user's second sweep finds it). Printed, as medians over the
repeats:

- wall and process CPU (user + sys) of each sweep, and their tracked/untracked ratio;
- logging per run: time inside the tracker's per-run calls (find, open, adopt, finish), wall and
  CPU of the calling thread (every tracking call is made there), divided by the runs written;
- the store's set-up (importing MLflow, creating or migrating the SQLite schema): once a sweep
  (wall; since 2026-12-02 on a thread of its own, beside the sweep's first runs);
- the whole overhead per run: (tracked - untracked) / runs, set-up included, and without the set-up
  (what each further run costs: the writer thread's work included).

On a busy machine the CPU figures are the steadier ones; note the load average beside them.
``--before CHECKOUT``: the same figures for another checkout of washexp (e.g. the previous commit,
``git archive``), each repeat running it and this one back to back.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SWEEP = "-m method=S,H topn=0..5"


def child(out: Path, root: Path, argv: list[str]) -> int:
    """Run the sweep of the checkout ``root`` in this process with the tracker's calls timed; the
    figures go to ``out``."""
    sys.path.insert(0, str(root))
    from washexp import tracking
    from washexp.app import main
    from washexp.tracking import writer

    spent = {"wall": 0.0, "cpu": 0.0, "runs": 0, "setup": 0.0}

    def timed(fn, key="wall"):
        def wrapper(*args, **kwargs):
            wall, cpu = time.perf_counter(), time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                if key == "setup":
                    spent["setup"] += time.perf_counter() - wall
                else:
                    spent["wall"] += time.perf_counter() - wall
                    spent["cpu"] += time.thread_time() - cpu
                    spent["runs"] += fn.__name__ == "close_run"  # every run written closes once

        return wrapper

    tracker = writer.MlflowTracker
    for name in ("find", "open", "mark_killed", "close_run"):
        setattr(tracker, name, timed(getattr(tracker, name)))
    if hasattr(tracker, "_set_up_store"):  # the set-up on its own thread (2026-12-02 on)
        tracker._set_up_store = timed(tracker._set_up_store, "setup")
    else:
        tracking.open_tracker = timed(tracking.open_tracker, "setup")
    code = main(argv, root)
    out.write_text(json.dumps(spent))
    return code


def sweep(extra: list[str], folder: Path, sweep_args: list[str], root: Path = ROOT) -> dict:
    out = folder / "spent.json"
    out.unlink(missing_ok=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            __file__,
            "--child",
            str(out),
            str(root),
            *sweep_args,
            *extra,
            f"hydra.sweep.dir={folder / 'multirun'}",
        ],
        cwd=folder,
        check=True,
        capture_output=True,
        env={**os.environ, "CI": "1"},
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, **json.loads(out.read_text())}


def med(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        sys.exit(child(Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4:]))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sweep", default=SWEEP, help=f"the run.py arguments (default: {SWEEP!r})")
    parser.add_argument("--before", type=Path, metavar="CHECKOUT", help="another checkout, run beside this one")
    parser.add_argument(
        "--store",
        choices=("new", "existing"),
        default="new",
        help="the tracked sweep's store: a new file (default), or one an untimed sweep of Full on one "
        "task made first (a user's second sweep)",
    )
    args = parser.parse_args()
    sweep_args = args.sweep.split()
    codes = [("before", args.before.resolve()), ("after", ROOT)] if args.before else [("", ROOT)]
    rows = {code: ([], []) for code, _ in codes}
    for _ in range(args.repeat):
        for code, root in codes:
            with tempfile.TemporaryDirectory() as tmp:
                store = Path(tmp)
                on = [f"tracking.uri=sqlite:///{store / 'mlflow.db'}", f"tracking.artifacts={store / 'mlruns'}"]
                if args.store == "existing":  # not timed: a store made, as a user's first sweep makes it
                    sweep(on, store, ["-m", "method=full", "task=backup"], root)
                    shutil.rmtree(store / "multirun")
                rows[code][0].append(sweep(on, store, sweep_args, root))
                rows[code][1].append(sweep(["tracking=off"], store, sweep_args, root))
    for code, (tracked, untracked) in rows.items():
        report(code, args, tracked, untracked)


def report(code: str, args, tracked: list[dict], untracked: list[dict]) -> None:
    if code:
        print(f"{code}:")
    runs = tracked[0]["runs"]
    print(
        f"sweep: run.py {args.sweep}  ({runs} runs, {args.store} store, n={args.repeat},"
        f" load average {os.getloadavg()[0]:.2f})"
    )
    for name, rows in (("tracking on (SQLite + artifacts)", tracked), ("tracking off", untracked)):
        print(f"  {name:34s} wall {med(rows, 'wall_s'):6.2f} s   process CPU {med(rows, 'cpu_s'):6.2f} s")
    print(
        f"  {'tracked / untracked':34s} wall {med(tracked, 'wall_s') / med(untracked, 'wall_s'):6.2f} x   "
        f"process CPU {med(tracked, 'cpu_s') / med(untracked, 'cpu_s'):6.2f} x"
    )
    print(
        f"  {'logging per run':34s} wall {1000 * med(tracked, 'wall') / runs:6.1f} ms  "
        f"thread CPU {1000 * med(tracked, 'cpu') / runs:6.1f} ms"
    )
    print(f"  {'store set-up (once a sweep)':34s} wall {med(tracked, 'setup'):6.2f} s")
    print(
        f"  {'whole overhead per run':34s} wall "
        f"{1000 * (med(tracked, 'wall_s') - med(untracked, 'wall_s')) / runs:6.1f} ms  process CPU "
        f"{1000 * (med(tracked, 'cpu_s') - med(untracked, 'cpu_s')) / runs:6.1f} ms"
    )
    per_run = (med(tracked, "wall_s") - med(untracked, "wall_s") - med(tracked, "setup")) / runs
    print(f"  {'  of which per run, set-up aside':34s} wall {1000 * per_run:6.1f} ms")


if __name__ == "__main__":
    main()
