"""``washexp compare A B``: regressions, mechanically. A and B are exported record ``.json`` files
or sweeps in the tracking store (a sweep id such as ``2026-11-30/10-31-23``, or any run id of
one), or models in the store (``model:NAME``: that model's record, of the runs of ``--sweep`` when
given), of the same family; each family compares its own way (``benchmarks.COMPARERS``). With
models as the A/B axis the cells are the same (arm x cohort x task x field; measurement x washer x
gauge x store x round x needle), so B must have every cell of A's model as before.

It fails closed: every cell of A (compaction: arm x cohort x task x field; a cycles record, compared
with cycles records only: arm x k x cohort x task x field; wash: measurement x washer x gauge x
store x round x needle) must be in B, or B is incomplete (exit 1, the missing
cells named); ``--allow-subset`` compares only the cells both have and says so in its first line.

Exit codes: 0 B has every cell of A and is no worse within ``--max-needles-lost`` (default 0) and
``--max-mean-drop`` (default 0.05 on any cohort or store mean); 1 a regression or cells missing in
B, named; 2 a usage or input error (one line): an unreadable record, one with no rows or of a
schema compare does not know, a table that cannot be loaded. ``--json`` prints the findings as a
machine record (schema 1).
"""

from __future__ import annotations

import argparse
import json
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any

from washexp.errors import USAGE, ConfigError, Parser, WashexpError, fail

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
    cells: int = 0
    """A's cells."""
    missing: list[tuple] = field(default_factory=list)
    """A's cells B lacks, each named by its shortest wholly missing prefix (:func:`missing_groups`)."""
    missing_cells: int = 0
    subset: bool = False
    """``--allow-subset``: only the cells both have were compared; missing ones are no regression."""

    def regressed(self, max_needles_lost: int, max_mean_drop: float) -> bool:
        incomplete = self.missing_cells > 0 and not self.subset
        return incomplete or self.needles_lost > max_needles_lost or self.worst_drop > max_mean_drop


class Shape(Enum):
    """What a value of a record's data row must be, as JSON: a record is untrusted input, and a value
    of another shape is a one-line input error, never a traceback or a silent misreading (a string
    read as a set of its characters)."""

    TEXT = "text"
    WHOLE = "a whole number"
    NUMBER = "a number"
    NUMBER_OR_NULL = "a number or null"
    FLAG = "true or false"
    TEXTS = "a list of text"
    TEXT_BY_TEXT = "an object of text values"

    def fits(self, value: Any) -> bool:
        if self is Shape.NUMBER_OR_NULL and value is None:
            return True
        if self in (Shape.NUMBER, Shape.NUMBER_OR_NULL):
            return isinstance(value, int | float) and not isinstance(value, bool) and _finite(value)
        if self is Shape.WHOLE:
            return isinstance(value, int) and not isinstance(value, bool)
        if self is Shape.FLAG:
            return isinstance(value, bool)
        if self is Shape.TEXTS:
            return isinstance(value, list) and all(isinstance(v, str) for v in value)
        if self is Shape.TEXT_BY_TEXT:
            return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
        return isinstance(value, str)


def _finite(value: int | float) -> bool:
    """A number a float holds: an integer past a float's range (``10**400``) is none."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def rows(
    record: dict,
    side: str,
    table: str,
    schema: Mapping[str, Shape],
    *,
    key: tuple[str, ...],
    empty_ok: bool = False,
) -> list[dict]:
    """The rows of ``record["data"][table]``, each a dict with every key of ``schema``, each value of
    its shape, no two with the same ``key`` values (one cell, one row). No such table, no rows
    (unless ``empty_ok``), a row of another shape or a repeated cell is an input error naming the
    side: compare knows this schema or refuses, it never reads a blind record as "nothing lost",
    nor lets a second row of a cell overwrite the first."""
    found = record.get("data", {}).get(table) if isinstance(record.get("data"), dict) else None
    if not isinstance(found, list):
        raise ConfigError(f"{side}: the record has no {table} table (not a {record.get('topic')} record compare knows)")
    if not found and not empty_ok:
        raise ConfigError(f"{side}: the record's {table} table has no rows: nothing to compare")
    for i, row in enumerate(found):
        if not isinstance(row, dict) or not schema.keys() <= row.keys():
            lacking = sorted(schema.keys() - set(row)) if isinstance(row, dict) else ["(not an object)"]
            raise ConfigError(f"{side}: {table} row {i} lacks {', '.join(lacking)} (a schema compare does not know)")
        for name, shape in schema.items():
            if not shape.fits(row[name]):
                value = json.dumps(row[name], ensure_ascii=False)[:60]
                raise ConfigError(f"{side}: {table} row {i}: {name} is {value}, not {shape.value}")
    seen: dict[tuple, int] = {}
    for i, row in enumerate(found):
        cell = tuple(row[k] for k in key)
        if cell in seen:
            named = " · ".join(str(v) for v in cell)
            raise ConfigError(f"{side}: {table} row {i} repeats row {seen[cell]} ({named}): one cell, one row")
        seen[cell] = i
    return found


def missing_groups(a: set[tuple], b: set[tuple]) -> list[tuple]:
    """The cells of ``a`` not in ``b``, each named once by the shortest prefix all of whose cells
    in ``a`` are missing (a whole arm, a whole task, or one field), in sorted order."""
    missing = a - b
    named: list[tuple] = []
    width = max((len(c) for c in missing), default=0)
    for depth in range(1, width + 1):
        total = Counter(c[:depth] for c in a)
        lost = Counter(c[:depth] for c in missing)
        for prefix in sorted(lost):
            if lost[prefix] == total[prefix] and not any(prefix[:k] in named for k in range(1, depth)):
                named.append(prefix)
    return sorted(named)


def cover(found: Findings, a: set[tuple], b: set[tuple], allow_subset: bool, what: str) -> set[tuple]:
    """Record on ``found`` which cells of ``a`` B lacks; return the cells to compare (all of A's,
    or with ``allow_subset`` the common ones). Nothing in common is an input error."""
    common = a & b
    if not common:
        raise ConfigError(f"A and B have no {what} cell in common: nothing to compare")
    found.cells, found.missing_cells, found.subset = len(a), len(a - b), allow_subset
    found.missing = missing_groups(a, b)
    return common


def mean_row(iv, **where: Any) -> dict[str, Any]:
    """One compared mean (``where`` names it: metric, arm, cohort, ...) from the paired interval of
    A and B (:func:`washexp.export.bootstrap.paired`), turned to B - A."""
    means = {"n_tasks": iv.n, "mean_a": iv.mean_a, "mean_b": iv.mean_b}
    return where | means | {"diff": -iv.diff, "ci_low": -iv.high, "ci_high": -iv.low}


def drop_text(m: dict[str, Any]) -> str:
    """A compared mean as a person reads it: A -> B, then B - A with its interval."""
    return (
        f"{m['mean_a']:.3f} -> {m['mean_b']:.3f} "
        f"(B - A {m['diff']:+.3f}, 95% [{m['ci_low']:+.3f}, {m['ci_high']:+.3f}], n={m['n_tasks']})"
    )


def coverage_lines(found: Findings, verdict: str) -> list[str]:
    """The verdict line, with what B lacks named first (under ``--allow-subset``: a first line
    saying that only the common cells were compared, the missing ones after the verdict)."""
    head = f"{verdict}: {found.needles_lost} needle(s) lost in B, worst mean drop {found.worst_drop:+.3f}"
    if not found.missing_cells:
        return [head]
    named = [f"MISSING in B: {' · '.join(str(part) for part in prefix)}" for prefix in found.missing]
    if found.subset:
        compared = found.cells - found.missing_cells
        first = f"SUBSET: only the {compared} of A's {found.cells} cells that B has were compared (--allow-subset)"
        return [first, head, *named]
    return [f"{head}; B lacks {found.missing_cells} of A's {found.cells} cells", *named]


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
    own = [r for r in records if not r.platform.startswith("cross-model-")]  # one model's records only
    if len(records) != 1 or len(own) != 1:
        raise ConfigError(f"{arg}: covers several models; compare one model's: model:NAME --sweep {sweep}")
    return json.loads(records[0].to_json())


MODEL = "model:"
"""A side named ``model:NAME``: that model's record from the store."""


def _from_model(name: str, uri: str, experiment: str, sweeps: tuple[str, ...]) -> dict:
    """One model's record from the store (of ``sweeps`` when given); a model the store (or those
    sweeps) lacks is an input error, never an empty side."""
    from washexp.export import ExportOptions, build, load_runs
    from washexp.export.crossmodel import models_in

    if not name:
        raise ConfigError(f"{MODEL}: name a model (model:NAME)")
    options = ExportOptions(uri=uri, experiment=experiment, sweeps=sweeps, model=name)
    if experiment in ("compaction", "wash"):
        there = models_in(load_runs(replace(options, sweeps=())), experiment, options)  # its own message
        if name not in there:
            scope = f" in sweep {', '.join(sweeps)}" if sweeps else ""
            raise ConfigError(
                f"{MODEL}{name}: no {experiment} runs of that model{scope} in {uri} (models there: "
                f"{', '.join(there) or 'none'})"
            )
    records = build(options)
    if len(records) != 1:
        raise ConfigError(f"{MODEL}{name}: covers {len(records)} records; name one sweep with --sweep")
    return json.loads(records[0].to_json())


def load_side(arg: str, uri: str | None, experiment: str, sweeps: tuple[str, ...] = ()) -> dict:
    """A record file as it is, or a sweep's or model's record built from the store ``uri`` (None:
    outside a project and no ``--tracking-uri``, so only record files can be read)."""
    path = Path(arg)
    if arg.startswith(MODEL):
        return _from_model(arg.removeprefix(MODEL), _store(arg, uri), experiment, sweeps)
    if sweeps:
        raise ConfigError(f"--sweep goes with model:NAME sides; {arg} is a record or a sweep already")
    if path.suffix != ".json" or not path.is_file():
        return _from_store(arg, _store(arg, uri), experiment)
    from washexp.export.records import parse

    try:
        data = path.read_bytes()
    except OSError as err:
        raise ConfigError(f"{path}: not a readable record ({err})") from None
    record = parse(data, path)
    if not isinstance(record, dict) or record.get("schema") != SCHEMA or "data" not in record:
        raise ConfigError(f"{path}: not a washexp record of schema {SCHEMA} (re-export it with this washexp)")
    return record


def _store(arg: str, uri: str | None) -> str:
    """The store a sweep, run or model side is looked up in; outside a project there is none."""
    if uri is None:
        raise ConfigError(
            f"{arg}: not a record .json file, and {Path.cwd()} is not inside a washexp project to look it up "
            "in: name the project (washexp -C <project> compare ...) or the store (--tracking-uri)"
        )
    return uri


def kind(record: dict) -> str:
    """What compares with what: the topic, ``compaction-cycles`` for a cycles record (a survival
    curve per k, not the study's arms)."""
    provenance = record.get("provenance")
    cycles = isinstance(provenance, dict) and provenance.get("measurement") == "cycles"
    return f"{record.get('topic')}-cycles" if cycles else str(record.get("topic"))


def compare(a: dict, b: dict, allow_subset: bool = False) -> Findings:
    from washexp.benchmarks import COMPARERS

    if kind(a) != kind(b):
        raise ConfigError(f"A is a {kind(a)} record and B a {kind(b)} record: compare like with like")
    return COMPARERS.get(kind(a))(a, b, allow_subset)


def _drop(text: str) -> float:
    """``--max-mean-drop``: a finite number >= 0 (a NaN would pass every drop: ``x > nan`` is false)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number >= 0")
    return value


def _count(text: str) -> int:
    """``--max-needles-lost``: a whole number >= 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 0")
    return value


def _parser(root: Path | None) -> Parser:
    # "no mutate" marks text a reader sees in --help only (docs/mutation.md); names, actions,
    # types and defaults are behaviour and stay mutated
    from washexp.tracking import default_uri

    p = Parser(
        prog="washexp compare",
        description=__doc__.replace("``", ""),  # pragma: no mutate (the module doc, as plain text)
        formatter_class=argparse.RawDescriptionHelpFormatter,  # pragma: no mutate
    )
    p.add_argument(
        "a",
        help="baseline: a record .json, a sweep / run id in the store, or model:NAME",  # pragma: no mutate
    )
    p.add_argument(
        "b",
        help="candidate: the same",  # pragma: no mutate
    )
    p.add_argument(
        "--sweep",
        action="append",
        default=[],
        metavar="ID",  # pragma: no mutate
        help="model:NAME sides: that sweep's runs only (repeatable; default: the newest)",  # pragma: no mutate
    )
    p.add_argument(
        "--max-needles-lost",
        type=_count,
        default=0,
        help="muscle needles B may lose that A kept (default: 0)",  # pragma: no mutate
    )
    p.add_argument(
        "--max-mean-drop",
        type=_drop,
        default=0.05,
        help="largest drop A - B of a cohort or store mean (default: 0.05)",  # pragma: no mutate
    )
    p.add_argument(
        "--allow-subset",
        action="store_true",
        help="compare only the cells both have (default: B must have all of A's)",  # pragma: no mutate
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the findings as JSON",  # pragma: no mutate
    )
    p.add_argument(
        "--experiment",
        default="compaction",
        help="for sweep ids: the experiment (default: compaction)",  # pragma: no mutate
    )
    p.add_argument(
        "--tracking-uri",
        default=default_uri(root) if root else None,
        help="for sweep ids: the store (default: sqlite:///<project>/mlruns/mlflow.db)",  # pragma: no mutate
    )
    return p


def main(argv: list[str]) -> int:
    from washexp.project import find_root

    try:
        root = find_root()
    except WashexpError:
        root = None  # two record files compare anywhere
    parser = _parser(root)
    try:
        args = parser.parse_args(argv)
        if args.a == args.b and args.a.startswith(MODEL):
            raise ConfigError(f"A and B are both {args.a}: name two models")
        a = load_side(args.a, args.tracking_uri, args.experiment, tuple(args.sweep))
        same = args.b == args.a  # a sweep against itself (a sanity check): its record is built once
        b = a if same else load_side(args.b, args.tracking_uri, args.experiment, tuple(args.sweep))
        found = compare(a, b, args.allow_subset)
    except WashexpError as err:  # compare only reads: whatever stops it is in its input
        return fail("washexp compare", err, USAGE)
    regressed = found.regressed(args.max_needles_lost, args.max_mean_drop)
    if args.json:
        out = {
            "schema": SCHEMA,
            "topic": found.topic,
            "regression": regressed,
            "needles_lost": found.needles_lost,
            "worst_mean_drop": found.worst_drop,
            "cells_a": found.cells,
            "missing_in_b": found.missing_cells,
            "subset": found.subset,
            "missing": [list(prefix) for prefix in found.missing],
            "thresholds": {"max_needles_lost": args.max_needles_lost, "max_mean_drop": args.max_mean_drop},
            **found.data,
        }
        print(json.dumps(out, indent=1, ensure_ascii=False))
    else:
        for line in coverage_lines(found, "REGRESSION" if regressed else "no regression") + found.lines:
            print(line)
    return 1 if regressed else 0
