"""Do washexp's pins keep every file CoalWash's ``isPinned`` refuses?

    python bench/parity_pins.py --coalwash /tmp/coalwash [--shapes 4000] [--seed 36]

Generates pin-shaped store files (seeded): a frontmatter block with a ``pinned`` key in many
spellings, values, comments, indents and line breaks, each joined with characters JavaScript and
Python read differently (U+2028, U+2029, U+0085, U+001C..U+001F, U+FEFF, NBSP, CR ...), and a
fixed list of the shapes issue 36 names. Each file is written to a temporary folder and asked of
CoalWash's own ``isPinned`` (``scripts/lib/apply.mjs`` of a CoalWash checkout; ``node`` on PATH;
neither is part of washexp) and of ``washexp.wash.coalwash.pins.is_pinned``.

Prints how many CoalWash refuses, how many of those washexp keeps (must be all), and how many
washexp pins that CoalWash does not (our own wider rule: yield, never safety). Exit 1 when
washexp would let one of CoalWash's pins be touched.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from washexp.wash.coalwash.pins import is_pinned

ODD = ["\u2028", "\u2029", "\x85", "\x1c", "\x1d", "\x1e", "\x1f", "\ufeff", "\xa0", "\r", "\r\n", "\n", "\t", " "]
KEYS = ["pinned", "Pinned", "PINNED", '"pinned"', "'pinned'", " pinned", "pinned\ufeff", "\ufeffpinned"]
VALUES = ["true", "True", "yes", "no", "false", "off", '"false"', "maybe", "", "1", "n"]
COMMENTS = ["", " # keep", " #x\u2028y", " #x\u2029y", " # c\x85d", " #\ufeff"]
NAMED = [
    "---\ntitle: x\u2028pinned: true\n---\nbody\n",
    "---\ntitle: x\u2029pinned: true\n---\nbody\n",
    "---\npinned: no #x\u2028y\n---\nbody\n",
    "---\npinned: false\x85\n---\nbody\n",
    "---\npinned: off\x1c\n---\nbody\n",
    "---\npinned:\ufefftrue\n---\nbody\n",
    "---\nPinned: true\n---\nbody\n",
    "---\n" + "a: b\n" * 20000 + "pinned: true\n---\nbody\n",
]


def shapes(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = list(NAMED)
    while len(out) < n:
        k, v, c = rng.choice(KEYS), rng.choice(VALUES), rng.choice(COMMENTS)
        sep = rng.choice([":", ": ", ":" + rng.choice(ODD), rng.choice(ODD) + ":" + rng.choice(ODD)])
        line = f"{k}{sep}{v}{c}{rng.choice(['', *ODD])}"
        before = rng.choice(["", "title: x", "title: x" + rng.choice(ODD)])
        block = (before + rng.choice(ODD) + line) if before else line
        out.append(f"---\n{block}\n---\nbody\n")
    return out


NODE = """
import fs from 'node:fs';
const { isPinned } = await import(process.argv[1]);
const files = JSON.parse(fs.readFileSync(0, 'utf8'));
process.stdout.write(JSON.stringify(files.map((f) => isPinned(f))));
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--coalwash", type=Path, required=True, help="a CoalWash checkout (scripts/lib/apply.mjs)")
    ap.add_argument("--shapes", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=36)
    args = ap.parse_args()
    texts = shapes(args.shapes, args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, text in enumerate(texts):
            p = Path(tmp) / f"s{i:05d}.md"
            p.write_bytes(text.encode("utf-8"))
            paths.append(str(p))
        apply_mjs = (args.coalwash / "scripts/lib/apply.mjs").resolve().as_uri()
        done = subprocess.run(
            ["node", "--input-type=module", "-e", NODE, apply_mjs],
            input=json.dumps(paths), capture_output=True, text=True, check=True,
        )  # fmt: skip
        theirs = json.loads(done.stdout)
        ours = [is_pinned(Path(p).read_bytes().decode("utf-8", "replace")) for p in paths]
    refused = [i for i, t in enumerate(theirs) if t]
    missed = [i for i in refused if not ours[i]]
    extra = [i for i, (t, o) in enumerate(zip(theirs, ours, strict=True)) if o and not t]
    print(f"{len(texts)} shapes · CoalWash refuses {len(refused)} · washexp keeps {len(refused) - len(missed)} of them")
    both = len(texts) - len(refused) - len(extra)
    print(f"washexp pins {len(extra)} more (its wider rule) · unpinned by both {both}")
    for i in missed[:10]:
        print(f"  MISSED: {texts[i][:120]!r}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
