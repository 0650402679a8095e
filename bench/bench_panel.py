"""Does the 13-arm panel keep an endpoint busy? Wall time against the ideal.

    python bench/bench_panel.py [--latency 0.2 0.5] [--concurrency 1 8 32] [--tracking [on|off|both]]

Starts the scripted local OpenAI-compatible server (tests/openai_server.py) with a fixed
per-request latency, then runs the whole panel once, as a user would:
``python run.py -m method=full,S,H topn=0..5 model=openai ...`` over all tasks, 3 generations,
2 answers per context, a fresh recordings folder (every request is a real HTTP call), tracking
off unless ``--tracking`` (``--tracking both``: a pair per case, untracked then tracked, back to
back in one run, so both see the same machine). Ideal = requests x latency / concurrency: the time the endpoint
alone needs at full parallelism. The wall time includes interpreter start-up, Hydra and the
harness's own work (token counting, grading). The server's replies are scripted: this measures
scheduling, never a model. One line per (latency, concurrency, tracking), with the run's own CPU
time (the harness's process CPU, user + sys: the steadier figure on a shared machine), the
seconds from start to the first request (start-up: imports, Hydra composing every job once to
validate the sweep, then the first job's own), and the machine's load average (the machine is
shared: read a ratio beside its load).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.openai_server import Script, serve  # noqa: E402


def panel_command(root: Path, url: str, folder: Path, concurrency: int) -> list[str]:
    """The 13-arm panel's run.py command (Full, S and H at Top 0..5, 14 tasks, 3 x 2) against ``url``;
    tracking options are the caller's."""
    return [
        sys.executable,
        str(root / "run.py"),
        "-m",
        "method=full,S,H",
        "topn=0..5",
        "model=openai",
        f"endpoint.base_url={url}",
        "model.name=qwen3.8-max",
        "model.platform=scripted-test-server",
        f"endpoint.recordings={folder / 'rec'}",
        f"endpoint.max_concurrency={concurrency}",
        "model.generations=3",
        "model.answers_per_context=2",
        "task=all",
    ]


def run_panel(latency: float, concurrency: int, tracking: bool, root: Path = ROOT, keep: Path | None = None) -> dict:
    """One panel run in a fresh process against a fresh server and recordings folder; ``root``:
    the checkout whose ``run.py`` runs (another one's: a before/after pair); ``keep``: an empty
    folder the run's store and recordings stay in (else a temporary one)."""
    script = Script(latency=latency)
    with tempfile.TemporaryDirectory() as tmp, serve(script) as url:
        folder = keep or Path(tmp)
        track = (
            [f"tracking.uri=sqlite:///{folder / 'mlflow.db'}", f"tracking.artifacts={folder / 'mlruns'}"]
            if tracking
            else ["tracking=off"]
        )
        command = [
            *panel_command(root, url, folder, concurrency),
            *track,
            f"hydra.sweep.dir={folder / 'multirun'}",
        ]
        before, start = os.times(), time.perf_counter()
        subprocess.run(command, cwd=folder, check=True, capture_output=True, env={**os.environ, "CI": "1"})
        wall, after = time.perf_counter() - start, os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    first = min(r["at"] for r in script.requests if "at" in r) - start  # start-up: imports, Hydra, planning
    requests = script.count()
    ideal = requests * latency / concurrency
    kinds = ", ".join(f"{k} {script.count(k)}" for k in ("read", "S", "Jev", "H"))
    return {
        "requests": requests,
        "kinds": kinds,
        "peak": script.peak,
        "ideal": ideal,
        "wall": wall,
        "cpu": cpu,
        "first": first,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--latency",
        type=float,
        nargs="+",
        default=[0.2, 0.5],
        help="seconds per request (default 0.2 and 0.5: short reader calls on a served model)",
    )
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument(
        "--tracking",
        nargs="?",
        const="on",
        default="off",
        choices=("on", "off", "both"),
        help="track to a temporary SQLite store (both: untracked, then tracked, per case)",
    )
    parser.add_argument(
        "--before",
        type=Path,
        metavar="CHECKOUT",
        help="another checkout of washexp (e.g. the previous commit, git archive): each case runs it, then this one",
    )
    args = parser.parse_args()
    modes = {"on": [True], "off": [False], "both": [False, True]}[args.tracking]
    codes = [("before", args.before.resolve()), ("after", ROOT)] if args.before else [("", ROOT)]
    print(f"tracking {args.tracking}; ideal = requests x latency / concurrency; cpu = the harness's process CPU")
    heads = ("code", "latency", "conc", "track", "requests", "peak", "ideal s", "wall s", "ratio", "cpu s", "first s")
    widths = (6, 8, 5, 5, 9, 5, 8, 8, 6, 6, 8)
    print(" ".join(f"{h:>{w}}" for h, w in zip(heads, widths, strict=True)), " load")
    for latency in args.latency:
        for concurrency in args.concurrency:
            for (code, root), tracking in [(c, t) for t in modes for c in codes]:
                r = run_panel(latency, concurrency, tracking, root)
                load = " ".join(f"{x:.2f}" for x in os.getloadavg())
                print(
                    f"{code:>6} {latency:>8.2f} {concurrency:>5} {'on' if tracking else 'off':>5} {r['requests']:>9}"
                    f" {r['peak']:>5} {r['ideal']:>8.2f} {r['wall']:>8.2f} {r['wall'] / r['ideal']:>6.2f}"
                    f" {r['cpu']:>6.1f} {r['first']:>8.2f}  {load}",
                    flush=True,
                )
    print(f"requests by kind (last run): {r['kinds']}")


if __name__ == "__main__":
    main()
