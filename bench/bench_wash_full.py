"""How the full tier scales: ``washexp wash --tier full`` on generated stores of many notes.

    python bench/bench_wash_full.py [--sizes 250000,500000,1000000] [--note-bytes 500] [--repeat N]
                                    [--before CHECKOUT]

Each store (seeded; a ``MEMORY.md`` index and topic files of about 500 bytes of notes each, one
note in five repeating the one before it) is washed in place in a temporary folder by a fresh
``washexp wash --tier full --operator approve-all`` process, start-up included. Prints, per size:
files, wall seconds, CPU seconds of the process (wall also counts the apply's fsyncs and the
machine's load) and its peak RSS (the largest of the runs so far), medians of ``--repeat`` runs,
and a sha256 of the washed store's files, the same for two checkouts that wash alike.
``--before CHECKOUT``: the same figures for another checkout of washexp (e.g. ``git archive`` of an
earlier commit), run in turns with this one. A store over ``MAX_STORE_BYTES`` is refused before any
work (exit 2), so no size above it is measured.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORDS = [
    "the",
    "depot",
    "list",
    "refreshes",
    "nightly",
    "solver",
    "budget",
    "strategy",
    "graph",
    "cache",
    "matrix",
    "traffic",
    "owner",
    "measured",
]


def make_store(folder: Path, size: int, note_bytes: int, seed: int = 7) -> int:
    rng = random.Random(seed)
    files = max(1, size // note_bytes)
    index = ["# Memory", ""]
    for f in range(files):
        index.append(f"- [[topic-{f:05d}]] notes {f}")
        lines, n = [f"# Topic {f}", ""], 0
        while n < note_bytes:
            note = "- " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 14)))
            note += f" v{rng.randint(1, 9)}.{rng.randint(0, 20)}, {rng.randint(100, 99999):,} rows"
            if rng.random() < 0.2 and len(lines) > 2:
                note = lines[-1]
            lines.append(note)
            n += len(note) + 1
        (folder / f"topic-{f:05d}.md").write_text("\n".join(lines) + "\n")
    (folder / "MEMORY.md").write_text("\n".join(index) + "\n")
    return files + 1


def wash_once(root: Path, size: int, note_bytes: int) -> dict:
    """One fresh store of ``size`` bytes washed by a fresh process of the checkout at ``root``."""
    code = "import sys; from washexp.cli import main; sys.exit(main())"
    with tempfile.TemporaryDirectory(prefix="washexp-bench-") as tmp:
        store = Path(tmp) / "store"
        store.mkdir()
        files = make_store(store, size, note_bytes)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", code, "wash", str(store), "--tier", "full", "--operator", "approve-all"],
            cwd=root,  # `-c` imports washexp from the working folder: this checkout's
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        digest = hashlib.sha256()
        for path in sorted(store.glob("*.md")):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
        return {
            "files": files,
            "exit": done.returncode,
            "wall": wall,
            "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "rss": after.ru_maxrss / 1024,
            "sha": digest.hexdigest()[:12],
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="250000,500000,1000000")
    parser.add_argument("--note-bytes", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--before", type=Path, metavar="CHECKOUT", help="another checkout, run beside this one")
    args = parser.parse_args()
    codes = [("before", args.before.resolve()), ("after", ROOT)] if args.before else [("", ROOT)]
    for size in (int(s) for s in args.sizes.split(",")):
        rows: dict[str, list[dict]] = {code: [] for code, _ in codes}
        for _ in range(args.repeat):
            for code, root in codes:  # in turns, so both see the same load
                rows[code].append(wash_once(root, size, args.note_bytes))
        for code, runs in rows.items():
            walls = ", ".join(f"{r['wall']:.1f}" for r in runs)
            wall = statistics.median(r["wall"] for r in runs)
            print(
                f"{code + ': ' if code else ''}{size / 1e6:.2f} MB, {runs[0]['files']} files: "
                f"exit {sorted({r['exit'] for r in runs})}, wall median {wall:.1f} s "
                f"({walls}), CPU median {statistics.median(r['cpu'] for r in runs):.1f} s, "
                f"peak RSS {max(r['rss'] for r in runs):.0f} MiB, store sha256 {sorted({r['sha'] for r in runs})}"
            )


if __name__ == "__main__":
    main()
