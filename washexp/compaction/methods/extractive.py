"""Extractive digests for the offline reference backend: one rule for S and H.

A line scores one point per structured token (ids, dates and timestamps, addresses, versions,
paths, key = value, quoted strings, numbers) and two per word it shares with the focus (the
initial task). Lines are taken greedily from the highest score down (ties in source order)
while the rendered digest stays within the token budget (Qwen tokens) and the word budget, and
are rendered in source order. Deterministic: the same input gives the same bytes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from washexp.tokens import count

STRUCTURED = re.compile(
    r"\b[A-Z][A-Z0-9]*-\d+\b"  # ids: PAY-4827
    r"|\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?)?"  # dates
    r"|\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"  # IPv4[:port]
    r"|\bv?\d+(?:\.\d+){1,3}\b"  # versions
    r"|(?:~|\.{1,2})?/[\w.-]+(?:/[\w.-]+)*|\b[\w-]+(?:/[\w.-]+)+"  # paths
    r"|\b[\w.-]+\s*[=:]\s*[^\s,;]+"  # key = value, key: value
    r"|\"[^\"\n]{1,80}\"|'[^'\n]{1,80}'"  # quoted strings
    r"|\b\d+(?:\.\d+)?%?"  # numbers
)
FOCUS_WEIGHT = 2
"""A word shared with the focus counts twice a structured token."""

_WORD = re.compile(r"[a-z0-9][\w.:/-]*[a-z0-9]|[a-z0-9]")
_STOP = frozenset(
    ("the", "and", "for", "with", "from", "that", "this", "what", "which", "where", "when", "who", "how", "was")
    + ("were", "are", "has", "have", "had", "its", "into", "your", "you", "our", "all", "any", "tell", "find")
)
_LINE_NUMBER = re.compile(r"^\s*\d+\|")


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 3 and w not in _STOP}


def clean(line: str) -> str:
    """A source line without its read_file line number, whitespace collapsed."""
    return " ".join(_LINE_NUMBER.sub("", line).split())


def score(line: str, focus_words: set[str]) -> int:
    return len(STRUCTURED.findall(line)) + FOCUS_WEIGHT * len(focus_words & words(line))


@dataclass(frozen=True)
class Line:
    score: int
    position: int
    text: str
    label: str = ""


def select(
    candidates: list[Line], render: Callable[[list[Line]], str], max_tokens: int, max_words: int | None = None
) -> list[Line]:
    """Greedy by score (ties in source order); a line joins when ``render`` of the digest with
    it still fits both budgets. Returns the chosen lines in source order."""
    chosen: list[Line] = []
    for line in sorted(candidates, key=lambda c: (-c.score, c.position)):
        trial = sorted([*chosen, line], key=lambda c: c.position)
        text = render(trial)
        if (max_words is None or len(text.split()) <= max_words) and count(text) <= max_tokens:
            chosen = trial
    return chosen
