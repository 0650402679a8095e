"""What tracing every model call costs the tracked 13-arm panel: traces on against traces off.

    python bench/bench_traces.py [--pairs 2] [--latency 0.2] [--concurrency 8]

The panel of ``bench/bench_panel.py`` (``python run.py -m method=full,S,H topn=0..5 model=openai``
over all tasks, 3 generations, 2 answers per context, the scripted local server with a fixed
per-request latency, a fresh recordings folder so every request is a real HTTP call), tracked to
a temporary SQLite store, run in pairs: ``tracking.traces=true`` (the default) and
``tracking.traces=false``, alternating which goes first, each in a fresh process, server and
store. One line per run (wall time, the run's own CPU seconds, traces written, the machine's
load), then the overhead of traces on the median pair: wall and CPU. The issue's bound: traces
may slow the tracked panel by at most 5 %. The machine is shared: read the CPU seconds beside the
wall time (CPU is what the traces cost whatever else runs; wall time is what a user waits).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_panel import panel_command  # noqa: E402
from tests.openai_server import Script, serve  # noqa: E402


def write_traces(recordings: Path, per_run: int = 12) -> tuple[int, float]:
    """The trace writing alone, in this process: every recorded call of a panel as a span,
    ``per_run`` calls to a run (a condition's worth; a trace per role and task, as a sweep's),
    into a fresh SQLite store through the tracker's own trace store. Returns the calls written
    and the CPU seconds it took (build and write)."""
    from washexp.tracking import open_tracker
    from washexp.tracking.traces import ModelCall

    records = [json.loads(p.read_text()) for p in sorted(recordings.glob("*/*.json"))]
    now = time.time_ns()
    chats = [r for r in records if "messages" in r.get("request", {})]  # not the tokenize route's
    calls = [ModelCall.of(r, now - 200_000_000, now, False, task="bench") for r in chats]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        tracker = open_tracker(True, f"sqlite:///{root / 'mlflow.db'}", str(root / "mlruns"), "bench", root)
        runs = [tracker.open(f"r{i}", f"h{i}", {}, {}).run_id for i in range(0, len(calls), per_run)]
        start = time.process_time()
        for run_id, i in zip(runs, range(0, len(calls), per_run), strict=True):
            tracker.traces.write(run_id, tuple(calls[i : i + per_run]))
        cpu = time.process_time() - start
    return len(calls), cpu


def run_panel(latency: float, concurrency: int, traces: bool, keep: Path | None = None) -> dict:
    """One tracked panel run in a fresh process against a fresh server, store and recordings
    (copied to ``keep`` when given)."""
    script = Script(latency=latency)
    with tempfile.TemporaryDirectory() as tmp, serve(script) as url:
        folder = Path(tmp)
        command = [
            *panel_command(ROOT, url, folder, concurrency),
            f"tracking.uri=sqlite:///{folder / 'mlflow.db'}",
            f"tracking.artifacts={folder / 'mlruns'}",
            f"tracking.traces={'true' if traces else 'false'}",
            f"hydra.sweep.dir={folder / 'multirun'}",
        ]
        before, start = os.times(), time.perf_counter()
        done = subprocess.run(command, cwd=folder, capture_output=True, text=True, env={**os.environ, "CI": "1"})
        if done.returncode != 0:
            sys.exit(f"bench_traces: the panel run exited {done.returncode}:\n{done.stderr[-2000:]}")
        wall, after = time.perf_counter() - start, os.times()
        with sqlite3.connect(folder / "mlflow.db") as db:
            written = db.execute("SELECT COUNT(*) FROM trace_info").fetchone()[0]
            linked = db.execute("SELECT COUNT(*) FROM entity_associations").fetchone()[0]
        if keep is not None:
            shutil.copytree(folder / "rec", keep, dirs_exist_ok=True)
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return {"wall": wall, "cpu": cpu, "requests": script.count(), "traces": written, "links": linked}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=2, help="pairs of runs, traces on and off (default 2)")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per request (default 0.2)")
    parser.add_argument("--concurrency", type=int, default=8, help="endpoint.max_concurrency (default 8)")
    parser.add_argument(
        "--write-only", action="store_true", help="only the in-process trace writing (one panel run for its recordings)"
    )
    args = parser.parse_args()
    keep = Path(tempfile.mkdtemp(prefix="washexp-bench-rec-"))
    try:
        if args.write_only:
            run_panel(0.0, args.concurrency, False, keep)
        else:
            panel_pairs(args, keep)
        n, cpu = write_traces(keep)
        print(f"trace writing alone: {n} calls, {cpu:.2f} s CPU ({cpu / n * 1000:.2f} ms per call), in this process")
    finally:
        shutil.rmtree(keep, ignore_errors=True)


def panel_pairs(args, keep: Path) -> None:
    print(f"13-arm panel, tracked to SQLite; latency {args.latency}s, concurrency {args.concurrency}")
    print(f"{'pair':>4} {'traces':>6} {'requests':>8} {'written':>7} {'links':>6} {'wall s':>7} {'cpu s':>6}  load")
    pairs = []
    for i in range(args.pairs):
        order = (True, False) if i % 2 == 0 else (False, True)
        got = {}
        for traces in order:
            r = got[traces] = run_panel(args.latency, args.concurrency, traces, keep if traces else None)
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
            print(
                f"{i + 1:>4} {'on' if traces else 'off':>6} {r['requests']:>8} {r['traces']:>7} {r['links']:>6}"
                f" {r['wall']:>7.2f} {r['cpu']:>6.1f}  {load}",
                flush=True,
            )
        pairs.append(got)
    wall = statistics.median(p[True]["wall"] / p[False]["wall"] - 1 for p in pairs)
    cpu = statistics.median(p[True]["cpu"] / p[False]["cpu"] - 1 for p in pairs)
    per_call = statistics.median((p[True]["cpu"] - p[False]["cpu"]) / max(1, p[True]["requests"]) * 1000 for p in pairs)
    print(
        f"traces on vs off (median of {len(pairs)} pairs): wall {wall:+.1%}, harness CPU {cpu:+.1%}"
        f" ({per_call:.2f} ms CPU per call traced); the bound is +5 % wall"
    )


if __name__ == "__main__":
    main()
