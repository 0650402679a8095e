"""Typed planted facts: the kinds, their values, how each is written and its needle.

A fact is one field of a task's follow-up. Its kind fixes the JSON type of the expected value,
how the value is written into a tool result (:meth:`Kind.render`: the lines to plant), the
needles (verbatim strings that must all be in a context for the field to count as retained) and
a near miss (the same key with a value one edit off: a backup copy's, or a superseded one's).

This module declares every kind of planted fact: the generator's (:data:`KINDS`, written by
:mod:`washexp.tasks.generate` as setting lines) and those ``washexp import --plant`` weaves into a
recorded session (:data:`SESSION_KINDS`, written by :mod:`washexp.sessions.planting` in the form
of the surrounding output). Everything is drawn from a ``random.Random`` the caller owns, so the
same draws give the same facts.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

KINDS = ("identifier", "integer", "decimal", "boolean", "datetime", "path", "line", "list", "mapping")
"""Every kind the generator plants, in a fixed order (a set's tasks cycle through it so that kinds
are balanced)."""
SESSION_KINDS = {
    "identifier": "a string, exactly as shown",
    "number": "an integer",
    "boolean": "a JSON boolean",
    "date": "a string YYYY-MM-DD",
    "path": "a string",
    "line": "the whole text of the value, a string",
    "list": "a JSON array of strings, in the order shown",
    "superseded": "a string; it was set more than once: give the last value",
}
"""Every kind an imported session is planted with, in the order its facts cycle through them,
each with the type its follow-up names. Five are the generator's kinds by name; ``number`` is an
integer, ``date`` a day with no time, and ``superseded`` an identifier set twice (what the
generator records as a fact's ``superseded``). Their names are what ``import.json`` records."""

_ALNUM = string.ascii_lowercase + string.digits
_WORDS = (
    "amber", "basalt", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper",
    "kelp", "lumen", "marble", "nectar", "onyx", "pylon", "quartz", "raven", "sable", "tundra",
    "umber", "vesper", "willow", "xenon", "yarrow", "zephyr",
)  # fmt: skip
_MARKERS = ("ANOMALY:", "FATAL:", "MISMATCH:", "VIOLATION:", "STALE:")


@dataclass(frozen=True)
class Kind:
    """One kind of fact. ``make`` draws a value; ``near`` draws a different value one edit away."""

    name: str
    type_text: str
    """How the follow-up names the value's type ("an integer", ...)."""
    make: Callable[[random.Random], Any]
    near: Callable[[random.Random, Any], Any]

    def render(self, key: str, value: Any) -> list[str]:
        """The lines that state ``key``'s value, as a config, a log or a note writes them."""
        if self.name == "line":
            return [value]
        if self.name == "mapping":
            return [f"{key}[{k}] = {_scalar(v)}" for k, v in value.items()]
        if self.name == "list":
            return [f"{key} = " + ", ".join(_scalar(v) for v in value)]
        return [f"{key} = {_scalar(value)}"]

    def needles(self, key: str, value: Any) -> list[str]:
        """Each planted line is a needle: the key with its value, so that a number alone (found
        anywhere in a log) never counts as the fact."""
        return self.render(key, value)

    def describe(self, key: str) -> str:
        """The follow-up's description of the field: names the key, never the value."""
        if self.name == "line":
            return (
                f"The last line that starts with '{key}', exactly as written (a string); "
                "the one in effect at the end, not a backup copy's."
            )
        what = {
            "list": "as an ordered list",
            "mapping": "as a mapping of each bracketed name to its value",
        }.get(self.name, f"as {self.type_text}")
        return f"The value of {key} {what}; the one in effect at the end, not a backup copy's."


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _identifier(rng: random.Random) -> str:
    return rng.choice(("ord", "req", "job", "txn", "inc")) + "-" + "".join(rng.choices(_ALNUM, k=6))


def _one_char_off(rng: random.Random, text: str) -> str:
    """``text`` with one character (never the first, never a separator) replaced."""
    spots = [i for i, c in enumerate(text) if i and c.isalnum()]
    i = rng.choice(spots)
    pool = (
        string.digits if text[i].isdigit() else string.ascii_uppercase if text[i].isupper() else string.ascii_lowercase
    )
    return text[:i] + rng.choice([c for c in pool if c != text[i]]) + text[i + 1 :]


def _integer(rng: random.Random) -> int:
    return rng.randrange(1000, 99999)


def _near_integer(rng: random.Random, value: int) -> int:
    return int(_one_char_off(rng, str(value)))


def _decimal(rng: random.Random) -> float:
    return rng.randrange(1001, 99999) / 100  # two places, never a whole number (1.0 would read 1)


def _near_decimal(rng: random.Random, value: float) -> float:
    text = _one_char_off(rng, f"{value:.2f}")
    near = float(text)
    return near if f"{near:.2f}" == text and near != int(near) else round(value + 0.01, 2)


def _datetime(rng: random.Random) -> str:
    return (
        f"2026-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}T"
        f"{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}Z"
    )


def _near_datetime(rng: random.Random, value: str) -> str:
    day = int(value[8:10])
    return value[:8] + f"{day % 28 + 1:02d}" + value[10:]


def _path(rng: random.Random) -> str:
    top = rng.choice(("var/lib", "srv", "opt", "etc", "data"))
    return (
        f"{top}/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}-{rng.randrange(10, 99)}.{rng.choice(('db', 'sock', 'json'))}"
    )


def _near_path(rng: random.Random, value: str) -> str:
    head, _, tail = value.rpartition("/")
    name, _, ext = tail.partition(".")
    return f"{head}/{_one_char_off(rng, name)}.{ext}"


def _line(rng: random.Random) -> str:
    marker = rng.choice(_MARKERS)
    code = "".join(rng.choices(string.ascii_uppercase + string.digits, k=4))
    what = rng.choice(("checksum drift", "replica lag", "clock skew", "quota breach", "schema drift"))
    return f"{marker} {what} in shard {rng.randrange(2, 64)} (code {code})"


def _near_line(rng: random.Random, value: str) -> str:
    head, _, code = value.rpartition("(code ")
    return f"{head}(code {_one_char_off(rng, code[:-1])})"


def _list(rng: random.Random) -> list[str]:
    return rng.sample(_WORDS, rng.randrange(3, 6))


def _near_list(rng: random.Random, value: list[str]) -> list[str]:
    near = list(value)
    i = rng.randrange(len(near) - 1)
    near[i], near[i + 1] = near[i + 1], near[i]  # the same items, two swapped: order matters
    return near


def _mapping(rng: random.Random) -> dict[str, int]:
    names = sorted(rng.sample(_WORDS, 3))
    return {n: rng.randrange(2, 500) for n in names}


def _near_mapping(rng: random.Random, value: dict[str, int]) -> dict[str, int]:
    k = rng.choice(list(value))
    return {**value, k: value[k] + rng.randrange(1, 9)}


KIND = {
    k.name: k
    for k in (
        Kind("identifier", "an identifier (a string)", _identifier, _one_char_off),
        Kind("integer", "an integer", _integer, _near_integer),
        Kind("decimal", "a decimal number", _decimal, _near_decimal),
        Kind("boolean", "a boolean", lambda rng: rng.random() < 0.5, lambda rng, v: not v),
        Kind("datetime", "a UTC date and time (a string)", _datetime, _near_datetime),
        Kind("path", "a path (a string)", _path, _near_path),
        Kind("line", "an exact line (a string)", _line, _near_line),
        Kind("list", "an ordered list", _list, _near_list),
        Kind("mapping", "a mapping", _mapping, _near_mapping),
    )
}
assert tuple(KIND) == KINDS

_KEY_STEMS = (
    "retry_budget", "flush_interval", "shard_owner", "drain_timeout", "lease_holder", "spill_dir",
    "quorum_size", "canary_weight", "replay_cursor", "cutover_at", "ingest_window", "evict_ratio",
    "fence_token", "probe_path", "rollout_stage", "dedupe_horizon", "warm_pool", "sink_order",
)  # fmt: skip


def key_for(rng: random.Random, kind: str, taken: set[str]) -> str:
    """A key no other fact of the task uses. A line's key is its marker (the line starts with it);
    every other key is a setting name the filler never writes."""
    if kind == "line":
        free = [m for m in _MARKERS if m not in taken]
    else:
        free = [f"{s}_{w}" for s in _KEY_STEMS for w in ("main", "eu", "ledger", "batch") if f"{s}_{w}" not in taken]
    key = rng.choice(free)
    taken.add(key)
    return key


def draw_value(rng: random.Random, kind: str, key: str) -> Any:
    """A value of ``kind`` for ``key`` (a line starts with its key, the marker)."""
    value = KIND[kind].make(rng)
    return key + value.partition(":")[2] if kind == "line" else value


@dataclass(frozen=True)
class Fact:
    """A planted fact: the field the follow-up asks for, its kind and key, the expected value;
    ``old``, when set, is an earlier value it supersedes (written first; the answer is ``value``);
    ``near``, when set, is a near miss written in a backup copy."""

    field: str
    kind: str
    key: str
    value: Any
    old: Any = None
    near: Any = None

    @property
    def needles(self) -> list[str]:
        return KIND[self.kind].needles(self.key, self.value)

    @property
    def lines(self) -> list[str]:
        return KIND[self.kind].render(self.key, self.value)

    def lines_of(self, value: Any) -> list[str]:
        return KIND[self.kind].render(self.key, value)

    @property
    def description(self) -> str:
        return KIND[self.kind].describe(self.key)


def plan(rng: random.Random, field: str, kind: str, taken: set[str], *, superseded: bool, near: bool) -> Fact:
    """One fact of ``kind`` under a fresh key. An old value or a near miss is redrawn until no
    text of it holds all the fact's needles: only the answer's own lines prove it."""
    key = key_for(rng, kind, taken)
    value = draw_value(rng, kind, key)
    fact = Fact(field, kind, key, value)

    def other(draw: Callable[[], Any]) -> Any:
        while True:
            candidate = draw()
            text = "\n".join(fact.lines_of(candidate))
            if candidate != value and not all(n in text for n in fact.needles):
                return candidate

    old = (
        other(lambda: KIND[kind].near(rng, value) if kind == "boolean" else draw_value(rng, kind, key))
        if superseded
        else None
    )
    miss = other(lambda: KIND[kind].near(rng, value)) if near else None
    return Fact(field, kind, key, value, old, miss)
