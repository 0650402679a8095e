"""``washexp compare A B``: regressions, mechanically. A and B are exported record ``.json`` files
or sweeps in the tracking store (a sweep id such as ``2026-11-30/10-31-23``, or any run id of
one), of the same family; each family compares its own way (``benchmarks.COMPARERS``).

Exit codes: 0 B is no worse than A within ``--max-needles-lost`` (default 0) and
``--max-mean-drop`` (default 0.05 on any cohort or store mean); 1 a regression, its findings named;
2 a usage error (one line). ``--json`` prints the findings as a machine record (schema 1).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from washexp.errors import ConfigError, WashexpError

SCHEMA = 1


@dataclass
class Findings:
    topic: str
    lines: list[str] = field(default_factory=list)
    """What a person reads: the regression's named items first."""
    data: dict[str, Any] = field(default_factory=dict)
    needles_lost: int = 0
    worst_drop: float = 0.0
    """The largest mean drop (A - B) over the cohorts or stores compared."""

    def regressed(self, max_needles_lost: int, max_mean_drop: float) -> bool:
        return self.needles_lost > max_needles_lost or self.worst_drop > max_mean_drop


def _from_store(arg: str, uri: str, experiment: str) -> dict:
    """The record of one sweep (or of the sweep a run id belongs to), built in memory."""
    from washexp.export import ExportOptions, build
    from washexp.tracking.reader import search

    runs = search(uri, experiment)
    if runs is None:
        raise ConfigError(f"no experiment {experiment!r} in {uri}")
    sweep = arg
    if "tags.sweep" in runs.columns and arg in set(runs["run_id"]):
        sweep = runs.loc[runs["run_id"] == arg, "tags.sweep"].iloc[0]
    known = set(runs["tags.sweep"].dropna()) if "tags.sweep" in runs.columns else set()
    if not any(s == sweep or s.endswith("/" + sweep) for s in known):
        raise ConfigError(f"{arg}: neither a record .json file nor a sweep or run id in {uri} ({experiment})")
    records = build(ExportOptions(uri=uri, experiment=experiment, sweeps=(sweep,)))
    if len(records) != 1:
        raise ConfigError(f"{arg}: covers {len(records)} models; compare one model's sweeps")
    return json.loads(records[0].to_json())


def load_side(arg: str, uri: str, experiment: str) -> dict:
    path = Path(arg)
    if path.suffix == ".json" and path.is_file():
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ConfigError(f"{path}: not a readable record ({err})") from None
        if not isinstance(record, dict) or record.get("schema") != SCHEMA or "data" not in record:
            raise ConfigError(f"{path}: not a washexp record of schema {SCHEMA} (re-export it with this washexp)")
        return record
    return _from_store(arg, uri, experiment)


def compare(a: dict, b: dict) -> Findings:
    from washexp.benchmarks import COMPARERS

    if a["topic"] != b["topic"]:
        raise ConfigError(f"A is a {a['topic']} record and B a {b['topic']} record: compare like with like")
    return COMPARERS.get(a["topic"])(a, b)


def _parser(root: Path | None) -> argparse.ArgumentParser:
    from washexp.tracking import default_uri

    p = argparse.ArgumentParser(
        prog="washexp compare",
        description=__doc__.replace("``", ""),  # the module doc, as plain text
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("a", help="baseline: a record .json, or a sweep / run id in the store")
    p.add_argument("b", help="candidate: the same")
    p.add_argument("--max-needles-lost", type=int, default=0, help="muscle needles B may lose that A kept (default: 0)")
    p.add_argument(
        "--max-mean-drop", type=float, default=0.05, help="largest drop A - B of a cohort or store mean (default: 0.05)"
    )
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    p.add_argument("--experiment", default="compaction", help="for sweep ids: the experiment (default: compaction)")
    p.add_argument(
        "--tracking-uri",
        default=default_uri(root) if root else None,
        help="for sweep ids: the store (default: sqlite:///<project>/mlruns/mlflow.db)",
    )
    return p


class _Usage(Exception):
    pass


def main(argv: list[str]) -> int:
    from washexp.project import find_root

    try:
        root = find_root()
    except WashexpError:
        root = None  # two record files compare anywhere
    parser = _parser(root)
    parser.error = lambda message: (_ for _ in ()).throw(_Usage(message))  # one line, exit 2
    try:
        args = parser.parse_args(argv)
        a = load_side(args.a, args.tracking_uri, args.experiment)
        b = load_side(args.b, args.tracking_uri, args.experiment)
        found = compare(a, b)
    except _Usage as err:
        print(f"washexp compare: {err}", file=sys.stderr)
        return 2
    except WashexpError as err:
        print(f"washexp compare: {err}", file=sys.stderr)
        return 2
    regressed = found.regressed(args.max_needles_lost, args.max_mean_drop)
    if args.json:
        out = {
            "schema": SCHEMA,
            "topic": found.topic,
            "regression": regressed,
            "needles_lost": found.needles_lost,
            "worst_mean_drop": found.worst_drop,
            "thresholds": {"max_needles_lost": args.max_needles_lost, "max_mean_drop": args.max_mean_drop},
            **found.data,
        }
        print(json.dumps(out, indent=1, ensure_ascii=False))
    else:
        verdict = "REGRESSION" if regressed else "no regression"
        print(f"{verdict}: {found.needles_lost} needle(s) lost in B, worst mean drop {found.worst_drop:+.3f}")
        for line in found.lines:
            print(line)
    return 1 if regressed else 0
