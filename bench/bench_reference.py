"""Wall time of the reference washer on one large topic file of near-duplicate notes.

    python bench/bench_reference.py [--sizes 0.25,0.5,1,2] [--seed 7]

The store is a ``MEMORY.md`` index and one topic file of the given size (MB), written by
:func:`notes`: deploy notes sharing a boilerplate opening, each with its own details, about one in
four restating an earlier note with a word or two changed (the near-duplicates the washer cuts).
Each figure is one ``ReferenceWasher().edits(...)`` call on it in this process (parsing and every
rule; the near-duplicate pass is the one that grows with the file), after one warm-up call on a
small file.
"""

from __future__ import annotations

import argparse
import random
import time

from washexp.wash.washers.reference import ReferenceWasher

WORDS = tuple(
    a + b for a in ("ca", "de", "lo", "mi", "su", "ta", "ve", "no") for b in ("rn", "sk", "lt", "mp", "nd", "x")
)


def notes(megabytes: float, seed: int = 7) -> str:
    """A topic file of about ``megabytes`` MB: a heading, then one note per line."""
    rng = random.Random(seed)
    target = int(megabytes * 1_000_000)
    lines, size, n = ["# Deploy notes", ""], 0, 0
    while size < target:
        if lines[2:] and rng.random() < 0.25:  # restate an earlier note, a word or two changed
            words = rng.choice(lines[2:]).removeprefix("- ").split()
            for _ in range(rng.randint(1, 2)):
                words[rng.randrange(len(words))] = rng.choice(WORDS)
            line = "- " + " ".join(words)
        else:
            n += 1
            detail = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 16)))
            line = f"- The deploy of service {n % 97} went out on day {n} with {detail} after {rng.randint(2, 90)} min."
        lines.append(line)
        size += len(line.encode()) + 1
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="0.25,0.5,1,2", help="topic file sizes in MB, comma-separated")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    washer = ReferenceWasher()
    index = "# Memory index\n\n- [[deploys]]: deploy notes\n"
    washer.edits({"MEMORY.md": index, "deploys.md": notes(0.01, args.seed)})  # warm-up: imports, regex compiles
    for mb in (float(s) for s in args.sizes.split(",")):
        text = notes(mb, args.seed)
        started = time.perf_counter()
        edits, _ = washer.edits({"MEMORY.md": index, "deploys.md": text})
        took = time.perf_counter() - started
        cut = sum(1 for e in edits if e.cls == "duplicate")
        lines = text.count("\n")
        print(f"reference washer, one {mb:g} MB topic file ({lines} lines): {took:.2f} s, {cut} near-dup cuts")


if __name__ == "__main__":
    main()
