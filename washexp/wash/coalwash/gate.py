"""The fidelity gate: no structured value leaves a memory store unless the plan names the drop.

A port of CoalWash's ``scripts/lib/fidelity-gate.mjs`` (v1.1.0) ``checkFidelity``. The inventory
(``washexp.wash.coalwash.inventory``) is taken of the text before and after an edit; the rules:

- **Set layer.** A value present before and absent after is a drop, typed per class:
  ``wikilink-drop``, ``date-drop``, ``version-drop``, ``link-drop``, ``frontmatter-key-drop``,
  ``codespan-drop``, ``quote-drop``, ``fenced-line-drop``, ``number-drop``.
- **Precision.** A vanished number of 2+ significant digits whose quantity survives only in a
  strictly coarser form of the same kind (``44,192`` -> ``44k``, ``64.6%`` -> ``65%``,
  ``12.50`` -> ``12.5``) is a ``number-precision`` drop naming the survivor: rounding is a drop.
- **Multiset layer.** A value still present but on fewer *distinct lines* than before (``878`` on
  three lines -> one) is a drop of the same type, with its before/after counts. Cutting an exact
  duplicate line is free; frontmatter keys and fenced lines are sets only.
- **Evidence anchors.** An issue ref, hex id or file name near a proof marker (``verified``,
  ``100%``...) that vanishes while the marker still stands is an ``evidence-anchor-drop``.
- **Unverifiable frontmatter** on either side is a ``frontmatter-inventory-incomplete`` drop (the
  gate abstains rather than certify a census it could not take).
- **Introduced hazards** (``introduced``): a decomposed Thai sara-am U+0E4D U+0E32, a BOM at the
  start or mid-text, a zero-width space U+200B, a zero-width joiner U+200D, or a bidi control
  (U+202A..U+202E, U+2066..U+2069) in the after-text but not the before-text. Inherited ones only warn.

The gate passes iff every drop and hazard is approved. **Blind spot (the real gate's too):**
positionless inventories cannot see surviving values trade places (``pass 878 / fail 0`` rewritten
as ``pass 0 / fail 878`` passes); that is the semantic layer's job.

**approvedDrops** entries name one drop each, by type and value, as the real gate keys them:
the string ``"wikilink-drop:scratch-2026-05"`` (split at the first colon; types hold none) or the
mapping ``{"type": "wikilink-drop", "value": "scratch-2026-05"}``. An approval of a value covers its
full drop and its occurrence drop alike. The class name may stand for the type
(``{"type": "wikilinks", ...}``); ``numbers`` then covers both ``number-drop`` and
``number-precision``. Hazards are approvable the same way (``bom-introduced:U+FEFF at file start``).

Deliberate differences from the real gate:

- ``check_store`` gates a whole store (name -> text) in one inventory: values are pooled over all
  files, so a value moved from one file to another is not a drop and a deleted file's values are
  (unless they survive elsewhere). This is the real gate's own MERGE convention (orig = sources
  together) applied to the store, and matches the scorer, which searches the joined store. The
  real ``apply.mjs`` gates each rewritten file alone, so there a move between two rewritten files
  blocks. Distinct lines are pooled too: an exact-duplicate line cut from one file is free while
  another file keeps it. Hazards and frontmatter census are judged per changed file: the drop's
  ``file`` names it (as ``gateFiles`` puts ``path`` beside each drop) and its value keeps the real
  gate's wording, in ``--json`` too.
- ``Drop.count`` (mentions lost) is ours; the real gate reports ``occurrences`` only for the
  multiset layer.
- The class-name aliases in approvals are ours; the real gate accepts only ``type:value``.
- U+200C (ZWNJ) and U+2060 (word joiner) are *not* blocked, as in the real gate: ZWNJ is ordinary
  in Persian and Indic text.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

from washexp.errors import USAGE, FixtureError, Parser, UsageError, fail
from washexp.inputs import read_untrusted
from washexp.wash.coalwash.files import md_names
from washexp.wash.coalwash.inventory import (
    CLASSES,
    COUNTED,
    Inventory,
    evidence_anchors,
    evidence_tokens,
    frontmatter_keys,
    take_inventory,
)
from washexp.wash.store.apply import TornStore, pending_journal

FOLLOWS = "CoalWash v1.1.0 scripts/lib/fidelity-gate.mjs (checkFidelity)"
"""The release this port follows, as every wash run and record names it."""

DROP_TYPE = {
    "wikilinks": "wikilink-drop",
    "dates": "date-drop",
    "versions": "version-drop",
    "links": "link-drop",
    "frontmatter": "frontmatter-key-drop",
    "codespans": "codespan-drop",
    "quotes": "quote-drop",
    "numbers": "number-drop",
    "fencedLines": "fenced-line-drop",
    "evidenceAnchors": "evidence-anchor-drop",
}
ALIASES = {cls: {t} for cls, t in DROP_TYPE.items()} | {"numbers": {"number-drop", "number-precision"}}
"""Class name -> the drop types an approval naming the class covers."""

SARA_AM_DECOMPOSED = "\u0e4d\u0e32"
BIDI_ZW = [(0x202A, "LRE"), (0x202B, "RLE"), (0x202C, "PDF"), (0x202D, "LRO"), (0x202E, "RLO")]
BIDI_ZW += [(0x2066, "LRI"), (0x2067, "RLI"), (0x2068, "FSI"), (0x2069, "PDI"), (0x200D, "ZWJ")]


@dataclass(frozen=True)
class Drop:
    """One dropped value (or introduced hazard). ``before``/``after`` count the distinct lines that
    state it; ``survivor`` is the coarser form a rounded number survives as; ``marker`` the proof
    word an orphaned evidence anchor belonged to."""

    type: str
    value: str
    count: int = 1
    before: int | None = None
    after: int | None = None
    survivor: str | None = None
    marker: str | None = None
    file: str | None = None
    """In a store: the changed file a hazard or an unverifiable frontmatter was found in (the real
    ``gateFiles`` names it as ``path``); the value keeps the real gate's wording."""

    @property
    def key(self) -> str:
        """The real gate's approval key, ``type:value``."""
        return f"{self.type}:{self.value}"

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}

    def describe(self) -> str:
        """One line: the approval key, then what survives."""
        note = f" (survives only as {self.survivor})" if self.survivor else ""
        if self.after:
            note = f" ({self.before} mention(s) -> {self.after}; the value itself survives)"
        if self.marker:
            note = f" (its marker {self.marker!r} still stands)"
        return f"{self.file}: {self.key}{note}" if self.file else f"{self.key}{note}"


@dataclass
class GateResult:
    """The verdict. ``drops`` and ``introduced`` hold what is *not* approved; ``approved`` what was.
    ``introduced`` names each hazard by its approval key (``zwsp-introduced:U+200B zero-width space``)."""

    passed: bool
    drops: list[Drop]
    introduced: list[str]
    approved: list[Drop] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    hazards: list[Drop] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "passed": self.passed,
            "drops": [d.to_dict() for d in self.drops],
            "introduced": self.introduced,
            "approved": [d.to_dict() for d in self.approved],
            "warnings": self.warnings,
            "hazards": [d.to_dict() for d in self.hazards],
        }


# --- approvals --------------------------------------------------------------------------------


def parse_approval(entry: str | Mapping | Drop | tuple) -> tuple[str, str]:
    """(type, value) of one approvedDrops entry; ValueError if it names no type and value."""
    if isinstance(entry, Drop):
        return entry.type, entry.value
    if isinstance(entry, str):
        kind, sep, value = entry.partition(":")
        if not sep or not kind:
            raise ValueError(f"approved drop {entry!r} is not TYPE:VALUE")
        return kind, value
    if isinstance(entry, Mapping):
        if not isinstance(entry.get("type"), str) or not isinstance(entry.get("value"), str):
            raise ValueError(f"approved drop {dict(entry)!r} needs string 'type' and 'value'")
        return entry["type"], entry["value"]
    if isinstance(entry, tuple) and len(entry) == 2:
        return str(entry[0]), str(entry[1])
    raise ValueError(f"approved drop {entry!r} is neither 'TYPE:VALUE' nor {{'type', 'value'}}")


def _approved_keys(approved_drops: Iterable) -> set[str]:
    keys: set[str] = set()
    for entry in approved_drops:
        kind, value = parse_approval(entry)
        keys.update(f"{t}:{value}" for t in ALIASES.get(kind, {kind}))
    return keys


# --- the comparison ----------------------------------------------------------------------------


def _value_drops(before: Inventory, after: Inventory) -> list[Drop]:
    """Set-layer, precision and multiset drops, in the real gate's order."""
    drops = []
    for cls in CLASSES:
        if cls == "numbers":
            continue
        kept = after.values[cls]
        for v in before.values[cls]:
            if v not in kept:
                drops.append(_full(cls, v, before))
    survivors = _survivor_candidates(after.values["numbers"])
    for v in before.values["numbers"]:
        if v in after.values["numbers"]:
            continue
        survivor = _rounded_survivor(v, survivors)
        if survivor:
            drops.append(_full("numbers", v, before, kind="number-precision", survivor=survivor))
        else:
            drops.append(_full("numbers", v, before))
    for cls in COUNTED:
        for v, n in before.counts[cls].items():
            left = after.counts[cls][v]
            if n >= 2 and 0 < left < n and v in before.values[cls] and v in after.values[cls]:
                drops.append(Drop(DROP_TYPE[cls], v, n - left, n, left))
    return drops


@dataclass(frozen=True)
class _Num:
    """A numeric token's quantity and the unit in the last place its own spelling claims."""

    kind: str  # percent | plain | ratio | unknown (a signed token: plain drop, never sub-classified)
    value: float = 0.0
    ulp: float = 0.0
    sig: int = 0


def _pow10(n: int) -> float:
    try:
        return float(10**n)
    except OverflowError:  # JavaScript's 10 ** n is Infinity here
        return float("inf")


_RATIO_BODY = re.compile(r"[0-9]+/[0-9]+")
_K_BODY = re.compile(r"([0-9]+(?:\.[0-9]+)?)[kK]")
_PLAIN_BODY = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_NOT_SIG = re.compile(r"[.kK]")


@lru_cache(maxsize=65536)
def _parse_number(tok: str) -> _Num:
    """``44k`` -> 44000 in thousands; ``64.6%`` -> 64.6 in tenths; ``44000`` -> in thousands (trailing
    zeros coarsen an integer); significant digits exclude leading zeros and the ``k``."""
    percent = tok.endswith("%")
    body = tok[:-1] if percent else tok
    if body.isascii() and body.isdigit():  # a plain integer, the common case: no regex
        stripped = body.lstrip("0")
        ulp = _pow10(len(body) - len(body.rstrip("0")))
        return _Num("percent" if percent else "plain", float(body), ulp, len(stripped))
    if _RATIO_BODY.fullmatch(body):
        return _Num("ratio")
    if m := _K_BODY.fullmatch(body):
        decimals = len(m[1].partition(".")[2])
        value, ulp = float(m[1]) * 1000, 1000 / _pow10(decimals)
    elif _PLAIN_BODY.fullmatch(body):
        decimals = len(body.partition(".")[2])
        value = float(body)
        ulp = 1 / _pow10(decimals) if decimals else _pow10(len(body) - len(body.rstrip("0")))
    else:
        return _Num("unknown")
    sig = len(_NOT_SIG.sub("", body).lstrip("0"))
    return _Num("percent" if percent else "plain", value, ulp, sig)


class _Survivors:
    """The surviving numbers of one kind, indexed so a dropped number finds the first (in inventory
    order) that states its quantity more coarsely without trying every survivor: per last-place unit
    ``u``, the survivors sorted by value, so only those within ``2u`` of the dropped value are tried
    (a survivor ``c`` qualifies only if ``|value - c.value| < c.ulp``)."""

    def __init__(self, found: list[tuple[int, str, _Num]]):
        by_ulp: dict[float, list[tuple[float, int, str, float]]] = {}
        for order, tok, n in found:
            if math.isfinite(n.value) and math.isfinite(n.ulp) and n.ulp > 0:  # others never qualify
                by_ulp.setdefault(n.ulp, []).append((n.value, order, tok, n.ulp))
        self.groups = sorted((ulp, sorted(group)) for ulp, group in by_ulp.items())
        self.ulps = [ulp for ulp, _ in self.groups]
        self.values = [[v for v, *_ in group] for _, group in self.groups]

    def first(self, o: _Num) -> str | None:
        best: tuple[int, str] | None = None
        for k in range(bisect_right(self.ulps, o.ulp), len(self.groups)):
            ulp, group = self.groups[k]
            values = self.values[k]
            lo = bisect_left(values, o.value - 2 * ulp)
            hi = bisect_right(values, o.value + 2 * ulp)
            for value, order, tok, c_ulp in group[lo:hi]:
                if c_ulp > o.ulp and abs(o.value - value) < c_ulp and (best is None or order < best[0]):
                    best = (order, tok)
        return best[1] if best else None


def _survivor_candidates(after_numbers: Iterable[str]) -> dict[str, _Survivors]:
    """Surviving numbers by kind, in inventory order (the first qualifying one is named)."""
    by_kind: dict[str, list[tuple[int, str, _Num]]] = {"percent": [], "plain": []}
    for order, tok in enumerate(after_numbers):
        n = _parse_number(tok)
        if n.kind in by_kind:
            by_kind[n.kind].append((order, tok, n))
    return {kind: _Survivors(found) for kind, found in by_kind.items()}


def _rounded_survivor(tok: str, candidates: dict[str, _Survivors]) -> str | None:
    """The surviving token that states the same quantity at strictly coarser precision (within its
    own last-place unit, so round, floor and ceil all count), if the dropped one had 2+ digits."""
    o = _parse_number(tok)
    if o.kind not in candidates or o.sig < 2:
        return None
    return candidates[o.kind].first(o)


def _full(cls: str, value: str, before: Inventory, kind: str | None = None, survivor: str | None = None) -> Drop:
    n = max(1, before.counts[cls][value]) if cls in before.counts else 1
    return Drop(kind or DROP_TYPE[cls], value, n, n, 0, survivor)


_TRIE_NESTING_CAP = 64  # deeper alternations are searched token by token (the regex compiler recurses)


def _trie_pattern(node: dict, depth: int = 0) -> str | None:
    """A regex matching the longest of a trie's words at a position (None: nested too deep)."""
    alts = []
    for ch, child in sorted((ch, child) for ch, child in node.items() if ch):
        rest = _trie_pattern(child, depth + (len(node) > 1))
        if rest is None or depth > _TRIE_NESTING_CAP:
            return None
        alts.append(re.escape(ch) + rest)
    if not alts:
        return ""
    if len(alts) == 1 and "" not in node:
        return alts[0]
    return "(?:" + "|".join(alts) + ")" + ("?" if "" in node else "")


def occurring(tokens: Iterable[str], text: str) -> set[str]:
    """The ASCII tokens that occur in ``text`` as substrings (``tok in text`` for each), in one scan
    of the text rather than one per token: a trie of the tokens as one regex finds the longest token
    at each position where any starts, and the tokens that are prefixes of it start there too.
    UTF-8 never encodes a non-ASCII character with ASCII bytes, so the scan reads the text's bytes."""
    trie: dict = {}
    for tok in tokens:
        node = trie
        for ch in tok:
            node = node.setdefault(ch, {})
        node[""] = True
    if not trie:
        return set()
    data = text.encode("utf-8", "surrogatepass")
    pattern = _trie_pattern(trie)
    if pattern is None:
        return {tok for tok in tokens if tok.encode() in data}
    rx = re.compile(pattern.encode("ascii"))
    found: set[str] = set()
    pos = 0
    while m := rx.search(data, pos):
        node, word = trie, m[0].decode("ascii")
        for k, ch in enumerate(word, 1):
            node = node[ch]
            if "" in node:
                found.add(word[:k])
        pos = m.start() + 1
    return found


def _evidence_drops(before_texts: list[str], after_text: str) -> list[Drop]:
    """Anchors near a proof marker that vanished while their marker still stands anywhere after."""
    anchors: dict[str, str] = {}
    for text in before_texts:
        for tok, marker in evidence_anchors(text).items():
            anchors.setdefault(tok, marker)
    present = evidence_tokens(after_text)
    alive: dict[str, bool] = {}
    for marker in anchors.values():
        if marker not in alive:
            alive[marker] = (
                "100%" in after_text
                if marker == "100%"
                else bool(re.search(rf"\b{re.escape(marker)}\b", after_text, re.ASCII | re.IGNORECASE))
            )
    gone = [tok for tok, marker in anchors.items() if alive[marker] and tok not in present]
    still = occurring(gone, after_text)
    return [Drop("evidence-anchor-drop", tok, marker=anchors[tok]) for tok in gone if tok not in still]


def _hazards(before: str, after: str, where: str = "") -> tuple[list[Drop], list[str]]:
    """Hazards the after-text introduces (blocking) and inherited ones (warnings only)."""
    found: list[Drop] = []
    warnings: list[str] = []
    at = f"{where}: " if where else ""

    def introduced(kind: str, value: str) -> None:
        found.append(Drop(kind, value, file=where or None))

    if SARA_AM_DECOMPOSED in after and SARA_AM_DECOMPOSED not in before:
        introduced("thai-sara-am-decomposed", "U+0E4D+U+0E32 introduced (must stay U+0E33)")
    elif SARA_AM_DECOMPOSED in after:
        warnings.append(
            f"{at}decomposed Thai sara-am present in BOTH versions (pre-existing — consider NFC-normalizing separately)"
        )
    if after.startswith("\ufeff") and not before.startswith("\ufeff"):
        introduced("bom-introduced", "U+FEFF at file start")
    if "\u200b" in after and "\u200b" not in before:
        introduced("zwsp-introduced", "U+200B zero-width space")
    for cp, name in BIDI_ZW:
        if chr(cp) in after and chr(cp) not in before:
            introduced("bidi-control-introduced", f"U+{cp:04X} {name} (Trojan-Source bidi/zero-width) introduced")
    if "\ufeff" in after[1:] and "\ufeff" not in before[1:]:
        introduced("bom-introduced", "U+FEFF mid-string (zero-width no-break space)")
    return found, warnings


def _verdict(drops: list[Drop], hazards: list[Drop], warnings: list[str], approved_drops: Iterable) -> GateResult:
    keys = _approved_keys(approved_drops)
    approved = [d for d in drops + hazards if d.key in keys]
    open_drops = [d for d in drops if d.key not in keys]
    open_hazards = [d for d in hazards if d.key not in keys]
    return GateResult(
        passed=not open_drops and not open_hazards,
        drops=open_drops,
        introduced=[d.key for d in open_hazards],
        approved=approved,
        warnings=warnings,
        hazards=hazards,
    )


def check(before: str, after: str, approved_drops: Iterable = ()) -> GateResult:
    """Gate one edit of one text. Blocked iff a value drop or introduced hazard is not approved."""
    bi, ai = take_inventory([before]), take_inventory([after])
    drops = []
    if bi.frontmatter_incomplete or ai.frontmatter_incomplete:
        side = (
            "both"
            if bi.frontmatter_incomplete and ai.frontmatter_incomplete
            else "orig"
            if bi.frontmatter_incomplete
            else "next"
        )
        drops.append(Drop("frontmatter-inventory-incomplete", side))
    drops += _value_drops(bi, ai) + _evidence_drops([before], after)
    hazards, warnings = _hazards(before, after)
    return _verdict(drops, hazards, warnings, approved_drops)


def check_store(before: Mapping[str, str], after: Mapping[str, str], approved_drops: Iterable = ()) -> GateResult:
    """Gate an edit of a whole store (file name -> text). Values are pooled over the store: a value
    moved between files is kept, a deleted file's values are dropped unless they survive elsewhere.
    Hazards and unverifiable frontmatter are judged per changed file and named with it."""
    b_texts, a_texts = list(before.values()), list(after.values())
    bi, ai = take_inventory(b_texts), take_inventory(a_texts)
    drops, hazards, warnings = [], [], []
    for name in sorted(set(before) | set(after), key=lambda n: n.encode("utf-16-be")):
        old, new = before.get(name), after.get(name)
        if old == new:
            continue  # an untouched file cannot introduce anything
        old_fm = old is not None and frontmatter_keys(old)[1]
        new_fm = new is not None and frontmatter_keys(new)[1]
        if old_fm or new_fm:
            side = "both" if old_fm and new_fm else "orig" if old_fm else "next"
            drops.append(Drop("frontmatter-inventory-incomplete", side, file=name))
        if new is not None:
            found, warned = _hazards(old or "", new, name)
            hazards += found
            warnings += warned
    drops += _value_drops(bi, ai) + _evidence_drops(b_texts, "\n".join(a_texts))
    return _verdict(drops, hazards, warnings, approved_drops)


def drops_between(before_files: Mapping[str, str], after_files: Mapping[str, str]) -> list[Drop]:
    """Every value drop a planned store edit entails: the candidates a washer declares in its plan's
    approvedDrops (``d.key`` or ``{"type": d.type, "value": d.value}``) for an operator to approve."""
    return check_store(before_files, after_files).drops


# --- command line ------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="washexp gate",
        description="Fidelity gate: exit 0 if no structured value was dropped, 1 if blocked, 2 on bad input.",
    )
    p.add_argument("before", type=Path, help="the text (file) or store (folder of *.md) before the edit")
    p.add_argument("after", type=Path, help="the same after the edit")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")
    p.add_argument("--approve", action="append", default=[], metavar="TYPE:VALUE", help="an approved drop; repeatable")
    return p


def read_side(path: Path) -> str | dict[str, str]:
    """A file's text, or a folder's store (its top-level ``*.md``); UsageError names the bad path."""
    if path.is_dir():
        if (wal := pending_journal(path)) is not None:
            raise UsageError(str(TornStore(path, wal)))
        return {name: _read_text(path / name) for name in md_names(path)}
    return _read_text(path)


def _read_text(path: Path) -> str:
    try:  # its type checked before a byte is read: a FIFO or a device is refused, never waited on
        data = read_untrusted(path, inside=False)
    except FixtureError as err:
        raise UsageError(str(err)) from None
    if data is None:
        raise UsageError(f"{path}: no such file or folder")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UsageError(f"{path}: not UTF-8 ({err.reason} at byte {err.start})") from None


def _report(result: GateResult, before: Path, after: Path) -> str:
    head = "PASS" if result.passed else "BLOCKED"
    out = [
        f"fidelity gate: {head} · {len(result.drops)} unapproved drop(s) · {len(result.introduced)} introduced"
        f" hazard(s) · {len(result.approved)} approved · {before} -> {after}"
    ]
    out += [f"  drop      {d.describe()}" for d in result.drops]
    out += [f"  hazard    {h.describe()}" for h in result.hazards if h not in result.approved]
    out += [f"  approved  {d.describe()}" for d in result.approved]
    out += [f"  warning   {w}" for w in result.warnings]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """``washexp gate BEFORE AFTER [--json] [--approve TYPE:VALUE ...]``: 0 pass, 1 blocked, 2 usage."""
    try:
        args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
        approvals = [parse_approval(a) for a in args.approve]
        if args.before.is_dir() != args.after.is_dir() and args.before.exists() and args.after.exists():
            raise UsageError(f"{args.before} and {args.after}: compare two files or two store folders, not one of each")
        before, after = read_side(args.before), read_side(args.after)
    except (UsageError, ValueError) as err:  # ValueError: an --approve that is not TYPE:VALUE
        return fail("washexp gate", err, USAGE)
    except SystemExit as done:  # --help
        return int(done.code or 0)
    if isinstance(before, dict) and isinstance(after, dict):
        result = check_store(before, after, approvals)
    else:  # read_side: a folder's files or a file's text, both sides one kind (checked above)
        assert isinstance(before, str) and isinstance(after, str)
        result = check(before, after, approvals)
    print(
        json.dumps(result.to_dict(), ensure_ascii=False, indent=2)
        if args.json
        else _report(result, args.before, args.after)
    )
    return 0 if result.passed else 1


if __name__ == "__main__":
    sys.exit(main())
