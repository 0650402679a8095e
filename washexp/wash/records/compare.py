"""Wash regressions between two records: every muscle needle kept in A and lost in B, named with
its store and round, and survival per needle class per round with each class's cliff.

A needle's class comes from its shape, never from ``expected.json`` (whose schema stays
CoalWash's): ``wikilink``, ``version``, ``date``, ``path``, ``config key``, ``number``, else ``prose``.
A cell is (measurement, washer, gauge, store, round, needle): every muscle needle of every round
A scored must be in B (``washexp.compare``). A needle kept in A and lost in B is named once, at the
first round it is, and counts once. A store's mean is its muscle kept at the last round compared;
the worst drop of a store mean is what ``--max-mean-drop`` gates.
"""

from __future__ import annotations

import re
from collections import defaultdict

from washexp.compare import Findings, Shape, cover, rows

CLASSES = ("wikilink", "version", "date", "path", "config key", "number", "prose")
_SHAPES = (
    ("wikilink", re.compile(r"\[\[[^\]]+\]\]")),
    ("version", re.compile(r"\bv?\d+\.\d+(?:\.\d+)+\b|\bv\d+\.\d+\b")),
    ("date", re.compile(r"\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}-[A-Z][a-z]{2}-\d{4}\b")),
    ("path", re.compile(r"[\\/][\w.-]+\.\w+|\b[A-Za-z]:\\|(?:^|\s)[\w.-]+/[\w./-]+")),
    ("config key", re.compile(r"`[^`]+`|\b[a-z][a-z0-9]*(?:[._][a-z0-9]+)+\b|\b\w+\s*[=:]\s*\S")),
    ("number", re.compile(r"\d")),
)


def needle_class(needle: str) -> str:
    """The first shape the needle has, in the order of ``CLASSES``."""
    return next((name for name, rx in _SHAPES if rx.search(needle)), "prose")


ROUND_KEYS = {
    "measurement": Shape.TEXT,
    "washer": Shape.TEXT,
    "gauge": Shape.TEXT,
    "store": Shape.TEXT,
    "round": Shape.WHOLE,
    "lost": Shape.TEXTS,
}
MUSCLE_KEYS = {"store": Shape.TEXT, "needles": Shape.TEXT_BY_TEXT}
ROUND_CELL = ("measurement", "washer", "gauge", "store", "round")


def _rounds(record: dict, side: str) -> dict[tuple, set[str]]:
    return {
        tuple(r[k] for k in ROUND_CELL): set(r["lost"])
        for r in rows(record, side, "wash_rounds", ROUND_KEYS, key=ROUND_CELL)
    }


def _muscle(record: dict, side: str) -> dict[str, dict[str, str]]:
    return {m["store"]: m["needles"] for m in rows(record, side, "wash_muscle", MUSCLE_KEYS, key=("store",))}


def cells(rounds: dict[tuple, set[str]], muscle: dict[str, dict[str, str]]) -> set[tuple]:
    """(measurement, washer, gauge, store, round, needle id): every muscle needle of every scored round."""
    return {(*key, nid) for key in rounds for nid in muscle.get(key[3], {})}


def compare(a: dict, b: dict, allow_subset: bool = False) -> Findings:
    ra, rb = _rounds(a, "A"), _rounds(b, "B")
    ma, mb = _muscle(a, "A"), _muscle(b, "B")
    found = Findings("wash")
    common_cells = cover(
        found, cells(ra, ma), cells(rb, mb), allow_subset, "measurement x washer x store x round x needle"
    )
    first_lost: dict[tuple, int] = {}  # (measurement, washer, gauge, store, id) -> the first round A kept it and B not
    for cell in sorted(common_cells):
        key, nid = tuple(cell[:-1]), cell[-1]
        if nid in rb[key] and nid not in ra[key]:
            lineage = (*key[:4], nid)
            first_lost[lineage] = min(first_lost.get(lineage, key[4]), key[4])
    lost_rows = [
        {"measurement": measurement, "washer": washer, "gauge": gauge, "store": store, "round": rnd}
        | {"id": nid, "needle": mb[store][nid], "class": needle_class(mb[store][nid])}
        for (measurement, washer, gauge, store, nid), rnd in sorted(first_lost.items())
    ]
    found.needles_lost = len(lost_rows)
    found.lines += [
        f"LOST in B: {r['store']} {r['id']} {r['needle']!r} ({r['class']}) at round {r['round']} "
        f"[{r['measurement']} · {r['washer']} · {r['gauge']}]"
        for r in lost_rows
    ][:200]
    # store means: muscle kept at the last round both scored
    common = sorted({c[:5] for c in common_cells})
    last: dict[tuple, int] = {}
    for measurement, washer, gauge, store, rnd in common:
        k = (measurement, washer, gauge, store)
        last[k] = max(last.get(k, 0), rnd)
    drops = []
    for (measurement, washer, gauge, store), rnd in sorted(last.items()):
        key = (measurement, washer, gauge, store, rnd)
        compared = {c[5] for c in common_cells if c[:5] == key}
        kept_a = len(compared - ra[key]) / len(compared)
        kept_b = len(compared - rb[key]) / len(compared)
        drops.append(
            {"measurement": measurement, "washer": washer, "gauge": gauge, "store": store}
            | {"round": rnd, "kept_a": kept_a, "kept_b": kept_b, "drop": kept_a - kept_b}
        )
    found.worst_drop = max((d["drop"] for d in drops), default=0.0)
    found.lines += [
        f"store mean: {d['store']} [{d['measurement']} · {d['washer']} · {d['gauge']}] muscle kept "
        f"{d['kept_a']:.3f} -> {d['kept_b']:.3f}"
        for d in drops
        if d["drop"] > 0
    ]
    survival = {side: _survival(rounds, muscle) for side, rounds, muscle in (("A", ra, ma), ("B", rb, mb))}
    cliffs = {side: _cliffs(s) for side, s in survival.items()}
    for (group, cls), cliff_b in sorted(cliffs["B"].items()):
        cliff_a = cliffs["A"].get((group, cls))
        if cliff_b is not None and (cliff_a is None or cliff_b < cliff_a):
            found.lines.append(
                f"cliff: {cls} first falls at round {cliff_b} in B ({cliff_a or 'never'} in A) [{group}]"
            )
    found.data = {
        "lost_in_b": lost_rows,
        "store_means": drops,
        "survival": {
            side: [{"group": g, "class": c, "round": r, "survival": v} for (g, c, r), v in sorted(s.items())]
            for side, s in survival.items()
        },
        "cliffs": {
            side: [{"group": g, "class": c, "round": r} for (g, c), r in sorted(c_.items())]
            for side, c_ in cliffs.items()
        },
    }
    return found


def _survival(rounds: dict[tuple, set[str]], muscle: dict[str, dict[str, str]]) -> dict[tuple, float]:
    """(measurement · washer · gauge, class, round) -> fraction of that class's needles still kept."""
    kept: defaultdict[tuple, int] = defaultdict(int)
    total: defaultdict[tuple, int] = defaultdict(int)
    for (measurement, washer, gauge, store, rnd), lost in rounds.items():
        group = f"{measurement} · {washer} · {gauge}"
        for nid, needle in muscle.get(store, {}).items():
            k = (group, needle_class(needle), rnd)
            total[k] += 1
            kept[k] += nid not in lost
    return {k: kept[k] / total[k] for k in total}


def _cliffs(survival: dict[tuple, float]) -> dict[tuple, int | None]:
    """(group, class) -> the first round its survival falls below 1 (None: never)."""
    out: dict[tuple, int | None] = {}
    for (group, cls, rnd), v in sorted(survival.items()):
        out.setdefault((group, cls), None)
        if v < 1 and out[(group, cls)] is None:
            out[(group, cls)] = rnd
    return out
