"""Plant typed facts into a session's own tool results, in the form of the surrounding output.

:func:`plant` is the whole interface: the tool results' texts, how many facts, a seed; it returns
the new texts and the :class:`PlantedFact` values (field, description, typed expected value,
needles, kind, depth, whether it supersedes an earlier value). The same texts, count and seed
give the same facts.

Each fact is one line inserted after a line boundary at its depth (the share of the session's
tool-result characters before it), written the way the line before it is written: a ``key:
value`` line in YAML-like output, ``key=value`` after an environment line, ``"key": value,`` in
JSON, ``<timestamp> INFO key=value`` in a log, behind the same line-number prefix in numbered
output. The kinds are declared with every other planted fact's in :mod:`washexp.tasks.facts`
(:data:`~washexp.tasks.facts.SESSION_KINDS`): identifier, number, boolean, date, path, line, list,
and a superseded identifier (an earlier value, then the later one the follow-up asks for). Their
values and lines are drawn here, fresh against the session's own text.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import Any

from washexp.tasks.facts import SESSION_KINDS

KINDS = tuple(SESSION_KINDS)

_WORDS_A = ("rollout", "shard", "cache", "ledger", "relay", "quota", "mirror", "beacon", "vault", "index")
_WORDS_B = ("owner", "epoch", "ticket", "anchor", "window", "marker", "target", "batch", "region", "lease")
_PREFIXES = ("REQ", "TKT", "BLD", "ORD", "INC", "CHG")
_DIRS = ("srv", "opt", "var/lib", "etc")
_NOUNS = ("replica", "worker", "queue", "volume", "tenant", "bucket")
_VERBS = ("drained", "rotated", "pinned", "throttled", "rebuilt", "quarantined")

_NUMBERED = re.compile(r"^(\s*\d+[|:\t]\s?)(.*)$")
_JSON_KEY = re.compile(r'^(\s*)"[^"]+"\s*:')
_ENV = re.compile(r"^(\s*)(?:export\s+)?[A-Z][A-Z0-9_]*=")
_YAML = re.compile(r"^(\s*)[A-Za-z_][\w.-]*:(?:\s|$)")
_LOG = re.compile(r"^(\s*\[?\d{4}-\d{2}-\d{2}[T ][\d:.,]+Z?\]?)\s")


@dataclass(frozen=True)
class PlantedFact:
    field: str
    kind: str
    description: str
    expected: Any
    needles: tuple[str, ...]
    unit: int
    """Index of the tool result that holds the fact (the later value, for a superseded one)."""
    depth: float
    """Share (0..1) of the session's tool-result characters before the fact."""
    supersedes: bool


@dataclass(frozen=True)
class _Value:
    expected: Any
    text: str  # as written in plain (YAML, env, log) output
    json: str  # as written in JSON output


def plant(units: list[str], n: int, seed: int, avoid: str = "") -> tuple[list[str], list[PlantedFact]]:
    """``n`` facts woven into ``units`` (tool-result texts) from ``seed``; no key or value drawn
    occurs in ``units`` or ``avoid`` (the query) already."""
    rng = random.Random(seed)
    texts = list(units)
    everything = "\n".join([avoid, *units])
    keys: set[str] = set()
    facts = []
    for i in range(n):
        kind = KINDS[i % len(KINDS)]
        key = _fresh(
            rng, lambda: f"{rng.choice(_WORDS_A)}_{rng.choice(_WORDS_B)}_{rng.randint(10, 99)}", everything, keys
        )
        depth = round((i + rng.uniform(0.2, 0.8)) / n, 4)
        if kind == "superseded":
            old = _value(rng, "identifier", everything)
            everything += old.text
            _insert(texts, depth / 2, key, old)
        value = _value(rng, kind, everything)
        everything += "\n" + value.text
        unit, needle_line = _insert(texts, depth, key, value)
        needles = _needles(kind, key, value, needle_line)
        facts.append(
            PlantedFact(
                f"fact_{i + 1:02d}",
                kind,
                _describe(kind, key),
                value.expected,
                needles,
                unit,
                depth,
                kind == "superseded",
            )
        )
    return texts, facts


def _fresh(rng: random.Random, make, text: str, taken: set[str]) -> str:
    for _ in range(1000):
        candidate = make()
        if candidate not in text and candidate not in taken:
            taken.add(candidate)
            return candidate
    raise RuntimeError("no fresh value in 1000 draws")  # cannot happen with these vocabularies


def _value(rng: random.Random, kind: str, text: str) -> _Value:
    def fresh(make) -> str:
        return _fresh(rng, make, text, set())

    if kind in ("identifier", "superseded"):
        v = fresh(lambda: f"{rng.choice(_PREFIXES)}-{rng.randint(10000, 99999)}{rng.choice('abcdefghjk')}")
        return _Value(v, v, json.dumps(v))
    if kind == "number":
        n = int(fresh(lambda: str(rng.randint(100000, 999999))))
        return _Value(n, str(n), str(n))
    if kind == "boolean":
        b = rng.random() < 0.5
        return _Value(b, str(b).lower(), json.dumps(b))
    if kind == "date":
        v = fresh(lambda: f"20{rng.randint(18, 29)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}")
        return _Value(v, v, json.dumps(v))
    if kind == "path":
        v = fresh(
            lambda: f"/{rng.choice(_DIRS)}/{rng.choice(_NOUNS)}-{rng.randint(100, 999)}/{rng.choice(_WORDS_A)}.conf"
        )
        return _Value(v, v, json.dumps(v))
    if kind == "line":
        v = fresh(
            lambda: f"{rng.choice(_NOUNS)} {rng.randint(10, 99)} {rng.choice(_VERBS)} after {rng.randint(200, 999)} ms"
        )
        return _Value(v, v, json.dumps(v))
    if kind == "list":
        items = [fresh(lambda: f"{rng.choice(_NOUNS)}-{rng.randint(1000, 9999)}") for _ in range(3)]
        return _Value(items, ", ".join(items), json.dumps(items))
    raise ValueError(f"no value is drawn for a fact of kind {kind!r}")  # a kind added to KINDS, not here


def _insert(texts: list[str], depth: float, key: str, value: _Value) -> tuple[int, str]:
    """Insert the fact's line at ``depth``; returns the unit index and the line written."""
    total = sum(len(t) for t in texts)
    target, index = depth * total, 0
    while index < len(texts) - 1 and target > len(texts[index]):
        target -= len(texts[index])
        index += 1
    text = texts[index]
    cut = text.find("\n", int(target))
    cut = len(text) if cut < 0 else cut
    before = text[:cut].rsplit("\n", 1)[-1]
    line = _render(before, key, value)
    texts[index] = text[:cut] + ("\n" if cut else "") + line + text[cut:]
    return index, line


def _render(before: str, key: str, value: _Value) -> str:
    """The fact as a line in the form of ``before``, the line it follows."""
    prefix = ""
    if m := _NUMBERED.match(before):
        prefix, before = m.group(1), m.group(2)
    if m := _JSON_KEY.match(before):
        return f'{prefix}{m.group(1)}"{key}": {value.json},'
    if m := _ENV.match(before):
        return f"{prefix}{m.group(1)}{key}={value.text}"
    if m := _LOG.match(before):
        return f"{prefix}{m.group(1)} INFO {key}={value.text}"
    indent = m.group(1) if (m := _YAML.match(before)) else ""
    return f"{prefix}{indent}{key}: {value.text}"


def _needles(kind: str, key: str, value: _Value, line: str) -> tuple[str, ...]:
    if kind == "list":
        return tuple(value.expected)
    if kind == "boolean":  # "true" alone proves nothing: the key with its value, as written
        return (line[line.index(key) :].removesuffix(","),)
    return (value.text,)


def _describe(kind: str, key: str) -> str:
    return f"The value of {key} in the tool output ({SESSION_KINDS[kind]})."
