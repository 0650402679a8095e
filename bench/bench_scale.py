"""Do wall time and memory grow linearly with the number of tasks and stores?

    python bench/bench_scale.py [--sizes 100 300 1000] [--tracking] [--keep DIR]

Generates N synthetic compaction tasks and N synthetic wash stores into a temporary folder (never
committed; a seeded generator, byte for byte the same on every run: ``--keep`` leaves them to
compare), then runs, each in a fresh process through the real entry point:

- one compaction arm: ``python run.py method=S topn=2 benchmark.fixtures=<tmp>/compaction``
  (the offline reference backend);
- one wash measurement round: ``python run.py benchmark=wash measurement=ceiling rounds=1
  benchmark.fixtures=<tmp>/wash``.

Prints wall time, CPU time and peak RSS (``os.wait4`` of that child) per N, and the marginal CPU
and RSS per added item, beside the load average. Tracking is off unless ``--tracking`` (MLflow's
own per-run cost is measured elsewhere).
Synthetic tasks have the shape of ``fixtures/compaction/*`` (task.yaml, collection.yaml, source/,
trajectory.json built by ``washexp.compaction.inputs.collect``; primary cohort, 3 fields with needles);
stores the shape of ``fixtures/wash/*`` (MEMORY.md index, topic files with muscle and fat,
expected.json).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from washexp.compaction.inputs.collect import write as write_trajectory  # noqa: E402

SEED = 12
WORDS = [
    "alpha",
    "bravo",
    "cedar",
    "delta",
    "ember",
    "fjord",
    "gale",
    "harbor",
    "iris",
    "juniper",
    "kelp",
    "lumen",
    "maple",
    "nectar",
    "onyx",
]


def _filler(rng: random.Random, lines: int, stamp: str) -> list[str]:
    return [
        f"{stamp} INFO {rng.choice(WORDS)}-{rng.randrange(1000)} {' '.join(rng.choices(WORDS, k=8))}"
        for _ in range(lines)
    ]


def make_task(root: Path, i: int) -> None:
    """One primary task: three fields, each planted once in one of three log files."""
    rng = random.Random(f"task:{SEED}:{i}")
    tid = f"synth_{i:04d}"
    folder = root / tid
    (folder / "source" / "logs").mkdir(parents=True)
    port, build, owner = 2000 + rng.randrange(6000), f"b{rng.randrange(16**6):06x}", f"team-{rng.choice(WORDS)}"
    planted = {
        "port": f"listen_port = {port}",
        "build": f"deployed build {build} to prod",
        "owner": f"escalation owner: {owner}",
    }
    files = []
    for k, (field, line) in enumerate(planted.items()):
        body = _filler(rng, 40, f"2026-0{k + 1}-1{rng.randrange(10)}")
        body.insert(rng.randrange(5, 35), f"2026-0{k + 1}-20 WARN {line}")
        name = f"logs/service-{k}.log"
        (folder / "source" / name).write_text("\n".join(body) + "\n", encoding="utf-8")
        files.append((field, name))
    query = f"Find the listening port, the build deployed to prod and the escalation owner of service {tid}."
    task = {
        "id": tid,
        "declared_cohort": "primary",
        "query": query,
        "fields": {
            "port": "The port the service listens on, as an integer.",
            "build": "The build id deployed to prod, exactly as logged.",
            "owner": "The escalation owner, exactly as logged.",
        },
        "expected": {"port": port, "build": build, "owner": owner},
        "unordered_fields": [],
        "needles": {f: [line] for f, line in planted.items()},
    }
    (folder / "task.yaml").write_text(json.dumps(task, indent=1) + "\n", encoding="utf-8")  # JSON is YAML
    steps = [{"narration": f"Reading {name} for the {field}.", "read_file": {"path": name}} for field, name in files]
    report = f"Collection report: port {port}, build {build}, owner {owner}."
    collection = {"steps": steps, "final_report": report}
    (folder / "collection.yaml").write_text(json.dumps(collection, indent=1) + "\n", encoding="utf-8")
    write_trajectory(folder)


def make_store(root: Path, i: int) -> None:
    """One store: an index, two topic files, four muscle needles, three fat ones."""
    rng = random.Random(f"store:{SEED}:{i}")
    name = f"synth-{i:04d}"
    folder = root / name
    folder.mkdir(parents=True)
    version, port, day = f"v{rng.randrange(1, 9)}.{rng.randrange(20)}.{rng.randrange(50)}", 3000 + i, 10 + i % 18
    muscle = [
        f"service {name} runs {version}",
        f"health check on port {port}",
        f"never restart the {rng.choice(WORDS)} queue during a drain",
        f"deploy window is 2026-05-{day:02d}",
    ]
    fat = [
        ("duplicate", f"service {name} is currently running version {version}, as noted above"),
        ("done-point-in-time", f"2026-04-{day:02d}: the {rng.choice(WORDS)} sync meeting happened as planned"),
        ("hedging", "it might perhaps be worth possibly double-checking this at some point"),
    ]
    (folder / "MEMORY.md").write_text(
        f"# Memory — {name}\n\n- [[ops]] — how it runs\n- [[lessons]] — what broke before\n\n- {muscle[0]}.\n",
        encoding="utf-8",
    )
    (folder / "ops.md").write_text(
        f"# Ops\n\n- {muscle[1]}.\n- {fat[0][1]}.\n- {muscle[3]}.\n- {fat[2][1]}.\n", encoding="utf-8"
    )
    (folder / "lessons.md").write_text(f"# Lessons\n\n- {muscle[2]}.\n- {fat[1][1]}.\n", encoding="utf-8")
    expected = {
        "fixture": name,
        "description": "synthetic store for bench/bench_scale.py",
        "expectNoOp": False,
        "muscle": [{"id": f"m{k + 1:02d}", "needle": n, "note": "planted"} for k, n in enumerate(muscle)],
        "fat": [{"id": f"f{k + 1:02d}", "needle": n, "class": c, "note": "planted"} for k, (c, n) in enumerate(fat)],
    }
    (folder / "expected.json").write_text(json.dumps(expected, indent=2) + "\n", encoding="utf-8")


def measure(args: list[str], tmp: Path) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system) and peak RSS (MiB) of one ``run.py`` process."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "run.py"), *args],
        cwd=tmp,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "CI": "1"},
    )
    stderr = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"run.py {' '.join(args)} failed:\n{stderr.decode()[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024  # Linux reports KiB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 300, 1000])
    parser.add_argument("--tracking", action="store_true", help="track to a temporary SQLite store")
    parser.add_argument("--keep", type=Path, help="write the generated fixtures here and keep them")
    args = parser.parse_args()
    print(f"tracking {'on' if args.tracking else 'off'}; fresh process per run")
    print("marginal = growth from the previous N per added item (CPU, less load-sensitive than wall; RSS):")
    print("flat when growth is linear")
    print(f"{'family':<11} {'N':>5} {'wall s':>8} {'cpu s':>7} {'marg ms':>8} {'peak MiB':>9} {'marg KiB':>9}  load")
    previous: dict[str, tuple[int, float, float]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for n in args.sizes:
            base = (args.keep or Path(scratch)) / f"n{n}"
            for i in range(n):
                make_task(base / "compaction", i)
                make_store(base / "wash", i)
            runs = {
                "compaction": ["method=S", "topn=2", f"benchmark.fixtures={base / 'compaction'}"],
                "wash": ["benchmark=wash", "measurement=ceiling", "rounds=1", f"benchmark.fixtures={base / 'wash'}"],
            }
            for family, overrides in runs.items():
                track = (
                    [f"tracking.uri=sqlite:///{base / 'mlflow.db'}", f"tracking.artifacts={base / 'mlruns'}"]
                    if args.tracking
                    else ["tracking=off"]
                )
                wall, cpu, rss = measure([*overrides, *track, f"hydra.run.dir={base / 'outputs'}"], base)
                load = " ".join(f"{x:.2f}" for x in os.getloadavg())
                m, c0, r0 = previous.get(family, (0, 0.0, 0.0))
                ms, kib = ((cpu - c0) / (n - m) * 1000, (rss - r0) / (n - m) * 1024) if m else (None, None)
                ms, kib = (f"{ms:>8.1f}", f"{kib:>9.1f}") if m else (" " * 8, " " * 9)
                print(f"{family:<11} {n:>5} {wall:>8.2f} {cpu:>7.2f} {ms} {rss:>9.1f} {kib}  {load}", flush=True)
                previous[family] = (n, cpu, rss)


if __name__ == "__main__":
    main()
