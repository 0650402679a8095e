"""The caliper: what a memory store costs a session, measured as CoalWash's ``measureEntries`` does.

    washexp caliper STORE [--json] [--gauge coalwash-1.0|coalwash-beta5|off] [--state FILE]

The store is its top-level ``*.md`` files (``washexp.wash.coalwash.files``). The entries, in the order
CoalWash's class-B discovery yields them (governance before the memory folder):

- **always-loaded**: the governance files ``CLAUDE.md`` then ``AGENTS.md`` present in the store
  folder, then the index ``MEMORY.md``. Their text is read while the bytes read so far plus the
  file's bytes stay within a 256 KiB budget; a file that does not fit (or cannot be read) is
  estimated as ``round(bytes / 4)`` and contributes no fat. The budget is not a stop: a later,
  smaller file may still fit.
- **recall**: every other ``*.md`` file, sized from its bytes only: ``round(bytes / 4)``.

Figures (keys of ``Measurement.to_dict`` follow ``measureEntries``): ``files``, ``totalBytes``,
``totalTokensEst`` (read estimates + byte estimates), ``alwaysLoaded{files, bytes, tokensEst}``
(the footprint a session pays), ``index{bytes, lines}`` (lines = ``text.split('\\n').length``, so
a trailing newline counts one more line; an index over the budget keeps its bytes, lines 0), and
``mechFat``: certain fat summed over the **always-loaded files actually read** (never recall files),
by ``mech_fat``. Every token figure is the caliper heuristic (``~est``), not a real count.

The command keeps the gauge's state (``washexp.wash.coalwash.gauge``: ``<store>/.washexp-gauge.json`` unless
``--state`` names another non-``.md`` file; a store under ``fixtures/`` keeps none), writing it
only when the verdict changed it, before anything is printed.

Exit codes: 0 measured; 1 could not finish (the gauge state could not be written); 2 a usage or
input error found before any work (missing or unreadable store, bad state file, unknown gauge).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from washexp.errors import USAGE, Parser, WashexpError, fail
from washexp.inputs import store_folder_problem
from washexp.tokens import caliper_estimate
from washexp.wash.coalwash.files import md_names
from washexp.wash.coalwash.gauge import (
    DEFAULT_GAUGE,
    Verdict,
    gauge_names,
    load_gauge,
    load_state,
    save_state,
    state_path,
)
from washexp.wash.store.apply import refuse_torn

FOLLOWS = "CoalWash v1.1.0 scripts/lib/caliper.mjs (measureEntries, mechFatFromText, tokensEst)"
"""The release this port follows, as every wash run and record names it."""

READ_BUDGET_BYTES = 256 * 1024
"""Always-loaded text is read up to this many bytes in all (caliper.mjs ``readBudgetBytes``)."""

INDEX_NAME = "MEMORY.md"
GOVERNANCE_NAMES = ("CLAUDE.md", "AGENTS.md")
"""Governance files counted as always-loaded when they sit in the store folder, in this order."""

DUP_MIN_CHARS = 24
"""A trimmed line shorter than this (UTF-16 units) is markdown structure, never duplicate fat."""

_LINE_BREAK = re.compile(r"\r?\n")  # JavaScript split(/\r?\n/): a lone \r stays in its line
# JavaScript's String.prototype.trim set: WhiteSpace + LineTerminator (U+FEFF in, U+001C..1F out).
_JS_TRIM = "\t\n\v\f\r \u00a0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000\ufeff"


def _js_round(value: float) -> int:
    """JavaScript ``Math.round``: halves go up (Python's ``round`` would go to even)."""
    return math.floor(value + 0.5)


def _utf16_len(text: str) -> int:
    """JavaScript ``String.length``: an astral character is two code units."""
    return len(text.encode("utf-16-le")) // 2


def bytes_estimate(n_bytes: int) -> int:
    """Tokens of a file sized but not read: ``round(bytes / 4)`` (an ASCII assumption)."""
    return _js_round(n_bytes / 4)


class MechFat(NamedTuple):
    dup_tokens: int
    blank_tokens: int

    @property
    def tokens(self) -> int:
        return self.dup_tokens + self.blank_tokens


def mech_fat_split(text: str) -> MechFat:
    """Certain fat of one file's text, in its two classes (CoalWash ``mechFatFromText``).

    Lines split on ``\\n`` or ``\\r\\n`` (a lone ``\\r`` does not split; a trailing newline yields a
    final empty line). A line is blank when its JavaScript-trimmed text is empty.

    - duplicates: a trimmed line of at least 24 UTF-16 units seen before *in this text* costs the
      estimate of its untrimmed line (so a repeat differing only in outer spaces still counts);
    - blank runs: every blank line after the second in a row costs 1 token.
    """
    seen: set[str] = set()
    dup = blank = run = 0
    for raw in _LINE_BREAK.split(text):
        trimmed = raw.strip(_JS_TRIM)
        if not trimmed:
            run += 1
            if run > 2:
                blank += 1
            continue
        run = 0
        if _utf16_len(trimmed) >= DUP_MIN_CHARS:
            if trimmed in seen:
                dup += caliper_estimate(raw)
            seen.add(trimmed)
    return MechFat(dup, blank)


def mech_fat(text: str) -> int:
    """Certain fat of one file's text in ``~est`` tokens: duplicate substance lines + blank-run excess."""
    return mech_fat_split(text).tokens


@dataclass(frozen=True)
class Measurement:
    """One caliper reading of a store. Token figures are ``~est``."""

    store: str
    files: int
    total_bytes: int
    total_tokens_est: int
    always_loaded: tuple[str, ...]
    always_loaded_bytes: int
    always_loaded_tokens_est: int
    unread: tuple[str, ...]
    """Always-loaded files over the read budget (or unreadable): estimated from bytes, no fat."""
    index_bytes: int
    index_lines: int
    mech_fat_dup_tokens: int
    mech_fat_blank_tokens: int

    @property
    def footprint_tokens(self) -> int:
        """What every session pays: the always-loaded estimate."""
        return self.always_loaded_tokens_est

    @property
    def mech_fat_tokens(self) -> int:
        return self.mech_fat_dup_tokens + self.mech_fat_blank_tokens

    def to_dict(self) -> dict:
        """The ``measureEntries`` shape (its key names), plus the store and which files were read."""
        return {
            "store": self.store,
            "files": self.files,
            "totalBytes": self.total_bytes,
            "totalTokensEst": self.total_tokens_est,
            "alwaysLoaded": {
                "files": len(self.always_loaded),
                "bytes": self.always_loaded_bytes,
                "tokensEst": self.always_loaded_tokens_est,
                "names": list(self.always_loaded),
                "unread": list(self.unread),
            },
            "index": {"bytes": self.index_bytes, "lines": self.index_lines},
            "mechFat": {
                "tokensEst": self.mech_fat_tokens,
                "dupTokens": self.mech_fat_dup_tokens,
                "blankTokens": self.mech_fat_blank_tokens,
            },
            "gzipRatio": None,  # measureEntries without withGzip (its default): informational, never computed
            "est": True,
        }


def _entry_order(names: list[str]) -> list[str]:
    """Governance, then the index, then the recall files in sorted order (class-B discovery order)."""
    first = [n for n in (*GOVERNANCE_NAMES, INDEX_NAME) if n in names]
    return first + [n for n in names if n not in first]


def measure(store: str | Path, read_budget_bytes: int = READ_BUDGET_BYTES) -> Measurement:
    """Measure ``store`` (see the module docstring for every rule).

    Raises ``WashexpError`` naming the folder when it is missing, not a folder or not listable.
    """
    folder = Path(store)
    problem = store_folder_problem(folder)
    if problem:
        raise WashexpError(problem)
    try:
        names = md_names(folder)
        sizes = {n: (folder / n).stat().st_size for n in names}
    except OSError as err:
        raise WashexpError(f"{folder}: cannot read the store ({err.strerror or err})") from None

    always = tuple(n for n in (*GOVERNANCE_NAMES, INDEX_NAME) if n in sizes)
    total_tokens = al_bytes = al_tokens = index_bytes = index_lines = dup = blank = read_so_far = 0
    unread: list[str] = []
    for name in _entry_order(names):
        size = sizes[name]
        tokens = bytes_estimate(size)
        if name in always:
            al_bytes += size
            if name == INDEX_NAME:
                index_bytes = size  # known even when the text is not read
            text = None
            if read_so_far + size <= read_budget_bytes:
                try:
                    # Node's 'utf8' read replaces bad bytes and keeps a BOM; so do we
                    text = (folder / name).read_bytes().decode("utf-8", errors="replace")
                except OSError:
                    text = None  # the byte estimate stands, as caliper.mjs does
            if text is None:
                unread.append(name)
            else:
                read_so_far += size
                tokens = caliper_estimate(text)
                fat = mech_fat_split(text)
                dup += fat.dup_tokens
                blank += fat.blank_tokens
                if name == INDEX_NAME:
                    index_lines = text.count("\n") + 1
            al_tokens += tokens
        total_tokens += tokens

    return Measurement(
        store=str(folder),
        files=len(names),
        total_bytes=sum(sizes.values()),
        total_tokens_est=total_tokens,
        always_loaded=always,
        always_loaded_bytes=al_bytes,
        always_loaded_tokens_est=al_tokens,
        unread=tuple(unread),
        index_bytes=index_bytes,
        index_lines=index_lines,
        mech_fat_dup_tokens=dup,
        mech_fat_blank_tokens=blank,
    )


def summary_line(m: Measurement, verdict: Verdict) -> str:
    """The one-line report; at the wall it names the wall (``absolute-cap`` or ``externalize``)."""
    wall = f" · wall: {verdict.reason}" if verdict.reason in ("absolute-cap", "externalize") else ""
    return (
        f"[washexp] {verdict.band} — always-loaded ~{m.footprint_tokens} tok/session (~est)"
        f" · fat ~{m.mech_fat_tokens} tok{wall}"
    )


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="washexp caliper", description="What a store costs a session, and whether a wash is due.")
    p.add_argument("store", type=Path, help="the store folder (its top-level *.md files)")
    p.add_argument("--json", action="store_true", help="print the full measurement and verdict as JSON")
    p.add_argument("--gauge", default=DEFAULT_GAUGE, help=f"band gauge: {' | '.join(gauge_names())}")
    p.add_argument("--state", type=Path, help="gauge state file (default: <store>/.washexp-gauge.json)")
    return p


def main(argv: list[str] | None = None) -> int:
    """``washexp caliper``: measure, give the gauge's verdict, keep the gauge's state, print."""
    try:
        args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
        gauge = load_gauge(args.gauge)
        state_file = args.state or state_path(args.store)
        refuse_torn(args.store)  # read-only: it never rolls a journal back, it names it
        m = measure(args.store)
        if m.files == 0:
            raise WashexpError(f"{args.store}: not a store (no top-level *.md files)")
        before = load_state(args.store, state_file)
    except WashexpError as err:  # all found before any work
        return fail("washexp caliper", err, USAGE)

    verdict = gauge.verdict(m, before)
    if verdict.state != before:  # an unchanged state leaves no file behind
        try:
            save_state(args.store, verdict.state, state_file)
        except (OSError, WashexpError) as err:
            print(f"washexp caliper: {state_file}: cannot write the gauge state ({err})", file=sys.stderr)
            return 1

    if args.json:
        payload = {**m.to_dict(), "gauge": gauge.config.name, "verdict": verdict.to_dict()}
        print(json.dumps(payload, ensure_ascii=False, indent=2))
    else:
        print(summary_line(m, verdict))
    return 0


if __name__ == "__main__":
    sys.exit(main())
