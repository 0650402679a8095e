"""Does ``washexp recall`` count what CoalWash's controlled-fidelity scorer counts, class by class?

    python bench/parity_recall.py --coalwash /tmp/coalwash [--cuts 60] [--seed 36]

Makes seeded cuts of the committed wash stores (each cut deletes a random share of each file's
lines, 10 to 70 %), and for each cut and class compares washexp's census (``washexp.wash.coalwash.recall``:
the before side's distinct values, and how many the after side lost) with CoalWash's own scorer
rule: the sets of ``inventory()`` from CoalWash's ``scripts/lib/fidelity-gate.mjs`` under Node,
a store's sets the union of its files' (the scorer reads one text; a store is read file by
file). ``node`` and the CoalWash checkout are not part of washexp.

Prints how many (cut, class) cells agree under CoalWash's rule, and, for contrast, how many the
occurrence figure would differ by. Exit 1 when a cell differs under CoalWash's rule.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from pathlib import Path

from washexp.wash.coalwash.files import read_md
from washexp.wash.coalwash.recall import CLASSES, census, occurrence_recall, recall

ROOT = Path(__file__).resolve().parent.parent
STORES = ROOT / "fixtures" / "wash"

NODE = """
import fs from 'node:fs';
const { inventory } = await import(process.argv[1]);
const CLASSES = JSON.parse(process.argv[2]);
const cuts = JSON.parse(fs.readFileSync(0, 'utf8'));
const sets = (files) => {
  const out = Object.fromEntries(CLASSES.map((c) => [c, new Set()]));
  for (const t of Object.values(files)) {
    const inv = inventory(t);
    for (const c of CLASSES) for (const v of inv[c]) out[c].add(v);
  }
  return out;
};
process.stdout.write(JSON.stringify(cuts.map(({ before, after }) => {
  const b = sets(before), a = sets(after);
  return Object.fromEntries(CLASSES.map((c) => [c, [b[c].size, [...b[c]].filter((v) => !a[c].has(v)).length]]));
})));
"""


def cuts(n: int, seed: int) -> list[tuple[str, dict[str, str], dict[str, str]]]:
    rng = random.Random(seed)
    stores = sorted(p for p in STORES.iterdir() if (p / "MEMORY.md").is_file())
    out = []
    for _ in range(n):
        store = rng.choice(stores)
        before = read_md(store)
        share = rng.uniform(0.1, 0.7)
        after = {}
        for name, text in before.items():
            lines = text.splitlines(keepends=True)
            after[name] = "".join(line for line in lines if rng.random() > share)
        out.append((store.name, before, after))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--coalwash", type=Path, required=True, help="a CoalWash checkout (scripts/lib/fidelity-gate.mjs)")
    ap.add_argument("--cuts", type=int, default=60)
    ap.add_argument("--seed", type=int, default=36)
    args = ap.parse_args()
    made = cuts(args.cuts, args.seed)
    lib = (args.coalwash / "scripts/lib/fidelity-gate.mjs").resolve().as_uri()
    payload = json.dumps([{"before": b, "after": a} for _, b, a in made])
    done = subprocess.run(
        ["node", "--input-type=module", "-e", NODE, lib, json.dumps(CLASSES)],
        input=payload, capture_output=True, text=True, check=True,
    )  # fmt: skip
    theirs = json.loads(done.stdout)
    cells = same = occ_differs = 0
    worst = 0.0
    for (name, before, after), t in zip(made, theirs, strict=True):
        b, a = census(before), census(after)
        r, o = recall(b, a), occurrence_recall(b, a)
        for cls in CLASSES:
            total, dropped = t[cls]
            if not total:
                continue
            cells += 1
            mine = r.by_class[cls]
            if (mine.total, mine.dropped) == (total, dropped):
                same += 1
            else:
                print(f"  DIFFERS {name} {cls}: washexp {mine.dropped}/{mine.total}, CoalWash {dropped}/{total}")
            theirs_pct = 100.0 * (total - dropped) / total
            occ = o.by_class[cls].pct
            if occ is not None and abs(occ - theirs_pct) > 1e-9:
                occ_differs += 1
                worst = max(worst, abs(occ - theirs_pct))
    print(f"{len(made)} seeded cuts · {cells} class cells · equal to CoalWash's scorer: {same}")
    print(f"occurrence recall (the second figure) differs in {occ_differs} cells, by up to {worst:.1f} points")
    return 0 if same == cells else 1


if __name__ == "__main__":
    sys.exit(main())
