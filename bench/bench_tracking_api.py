"""What a tracked run and a trace cost through MLflow's public API (issue 38: the price paid).

    python bench/bench_tracking_api.py [--runs 200] [--traces 200]

A tracker on a fresh SQLite store in a temporary folder (set up first, not counted) writes
``--runs`` runs shaped like a condition run (about 40 params, 30 metrics, 20 tags, a dozen
artifacts and two tables), one after another, then ``--traces`` model calls as traces, one run
each. Each figure is this process's CPU (all its threads: the writer thread does the work) and
the wall time, per run and per trace, from the first open to the tracker's close.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PARAMS = {f"cfg.key{i}": f"value {i}" for i in range(40)}
METRICS = {f"metric/{i}": i / 7 for i in range(30)}
TAGS = {f"washexp.tag{i}": f"t{i}" for i in range(18)} | {"washexp.kind": "condition"}
ARTIFACTS = {f"requests/{i:064x}.json": '{"request": {"messages": []}}\n' for i in range(10)}
ARTIFACTS |= {"config.yaml": "a: 1\n", "grades.txt": "g\n" * 40}
TABLES = {"grades.json": {"generation": [0, 1, 2], "score": [0.5, 0.7, 0.9]}, "facts.json": {"fact": ["a", "b"]}}


def _call(i: int):
    from washexp.tracking.traces import ModelCall

    end = time.time_ns()
    record = {
        "key": f"{i:064x}",
        "model": "m",
        "role": "read",
        "request": {"messages": [{"role": "user", "content": "question " * 50}], "generation": 0, "answer": 0},
        "response": {"text": "answer " * 30, "prompt_tokens": 400, "completion_tokens": 60, "finish_reason": "stop"},
    }
    return ModelCall.of(record, end - 200_000_000, end, False, task="t")


def _timed(work) -> tuple[float, float]:
    before, start = os.times(), time.perf_counter()
    work()
    after = os.times()
    return (after.user - before.user) + (after.system - before.system), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--traces", type=int, default=200)
    args = parser.parse_args()
    from washexp.tracking import open_tracker

    with tempfile.TemporaryDirectory() as tmp:
        tracker = open_tracker(True, None, None, "bench", Path(tmp))
        tracker.wait_set_up()

        def runs() -> None:
            for i in range(args.runs):
                with tracker.open(f"run {i}", f"h{i}", PARAMS, TAGS) as run:
                    run.finish(METRICS, ARTIFACTS, tables=TABLES)
            tracker.close()

        def traces() -> None:
            for i in range(args.traces):
                with tracker.open(f"traced {i}", f"t{i}", {}, {}) as run:
                    run.finish({}, {}, traces=(_call(i),))
            tracker.close()

        cpu, wall = _timed(runs)
        print(f"runs:   {args.runs} in {wall:.2f} s wall, {cpu:.2f} s CPU: {1000 * cpu / args.runs:.1f} ms CPU a run")
        if args.traces:
            cpu_t, wall_t = _timed(traces)
            # each traced run is also a (small) run: its own cost is taken off by a bare run's
            bare_cpu, _ = _timed(lambda: [_bare(tracker, i) for i in range(args.traces)] and tracker.close())
            per = 1000 * (cpu_t - bare_cpu) / args.traces
            print(f"traces: {args.traces} in {wall_t:.2f} s wall, {cpu_t:.2f} s CPU; {per:.1f} ms CPU a trace")


def _bare(tracker, i: int) -> None:
    with tracker.open(f"bare {i}", f"b{i}", {}, {}) as run:
        run.finish({}, {})


if __name__ == "__main__":
    main()
