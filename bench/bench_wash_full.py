"""How the full tier scales: ``washexp wash --tier full`` on generated stores of many notes.

    python bench/bench_wash_full.py [--sizes 250000,500000,1000000] [--note-bytes 500]

Each store (seeded; a ``MEMORY.md`` index and topic files of about 500 bytes of notes each, one
note in five repeating the one before it) is washed in place in a temporary folder by a fresh
``washexp wash --tier full --operator approve-all`` process, start-up included. Prints, per size:
files, wall seconds, CPU seconds of the process (wall also counts the apply's fsyncs and the
machine's load) and its peak RSS. A store over ``MAX_STORE_BYTES`` is refused before any work
(exit 2), so no size above it is measured.
"""

from __future__ import annotations

import argparse
import random
import resource
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="250000,500000,1000000")
    parser.add_argument("--note-bytes", type=int, default=500)
    args = parser.parse_args()
    code = "import sys; from washexp.cli import main; sys.exit(main())"
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix="washexp-bench-") as tmp:
            store = Path(tmp) / "store"
            store.mkdir()
            files = make_store(store, size, args.note_bytes)
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-c", code, "wash", str(store), "--tier", "full", "--operator", "approve-all"],
                cwd=ROOT,
                capture_output=True,
                text=True,
            )
            wall = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            print(
                f"{size / 1e6:.2f} MB, {files} files: exit {done.returncode}, wall {wall:.1f} s, "
                f"CPU {cpu:.1f} s, peak RSS {after.ru_maxrss / 1024:.0f} MiB"
            )


if __name__ == "__main__":
    main()
