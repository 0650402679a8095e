"""``washexp recall BEFORE AFTER [--json]``: the recall of one cut, per class, with the values lost.

The standalone form of CoalWash's controlled-fidelity scorer (``controlled-fidelity-score.mjs``):
BEFORE and AFTER are two files, or two store folders (their top-level ``*.md`` files). Recall is
CoalWash's rule, distinct values per class (``washexp.wash.coalwash.recall.recall``, the function the
controlled measurement calls); the occurrence recall is printed beside it as a second figure.

Exit codes: 0 the cut was measured (a loss is a result, not a failure); 2 a usage or input error
(one line on stderr: a missing path, a file that is not UTF-8, a file and a folder).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from washexp.errors import USAGE, Parser, UsageError, fail
from washexp.wash.coalwash.gate import read_side
from washexp.wash.coalwash.recall import CLASSES, Recall, census, occurrence_recall, recall

PROG = "washexp recall"
RULE = "distinct values per class (CoalWash's controlled-fidelity scorer)"


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog=PROG, description="Structured-token recall of one cut, per class (CoalWash's rule).")
    p.add_argument("before", type=Path, help="the file, or store folder, before the cut")
    p.add_argument("after", type=Path, help="the same after the cut")
    p.add_argument("--json", action="store_true", help="print the recall as JSON")
    return p


def _pct(p: float | None) -> str:
    return "n/a" if p is None else f"{p:.2f}%"


def to_json(r: Recall, occ: Recall, before: Path, after: Path) -> dict:
    """The recall with each class's lost values as a list, and the occurrence figure beside it."""
    data = r.to_dict()
    for cls in CLASSES:
        data["by_class"][cls]["lost"] = list(r.by_class[cls].lost)
    occurrences = {"total": occ.total, "kept": occ.kept, "recall_pct": occ.pct}
    return {"before": str(before), "after": str(after), "rule": RULE, **data, "occurrence_recall": occurrences}


def report(r: Recall, occ: Recall, before: Path, after: Path) -> str:
    out = [
        f"recall · {before} -> {after} · {RULE}",
        f"overall: {r.kept}/{r.total} kept ({_pct(r.pct)}) · {r.dropped} lost",
    ]
    for cls, c in r.by_class.items():
        lost = f" · lost: {', '.join(c.lost)}" if c.lost else ""
        out.append(f"  {cls}: {c.kept}/{c.total} ({_pct(c.pct)}){lost}")
    out.append(f"occurrence recall (over distinct lines; a second figure): {occ.kept}/{occ.total} ({_pct(occ.pct)})")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
        if args.before.is_dir() != args.after.is_dir() and args.before.exists() and args.after.exists():
            raise UsageError(f"{args.before} and {args.after}: two files or two store folders, not one of each")
        before, after = read_side(args.before), read_side(args.after)
    except UsageError as err:
        return fail(PROG, err, USAGE)
    except SystemExit as done:  # --help
        return int(done.code or 0)
    b = census(before if isinstance(before, dict) else {args.before.name: before})
    a = census(after if isinstance(after, dict) else {args.after.name: after})
    r, occ = recall(b, a), occurrence_recall(b, a)
    print(json.dumps(to_json(r, occ, args.before, args.after), ensure_ascii=False, indent=2) if args.json
          else report(r, occ, args.before, args.after))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
