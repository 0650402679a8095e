"""The fidelity gate's inventory: every structured value a memory text states, per class.

A port of the extraction half of CoalWash's ``fidelity-gate.mjs`` (v1.1.0). Classes and keys:

    wikilinks    ``[[target|label]]`` keyed by target (a label edit is not a drop)
    dates        ISO ``2026-05-14`` and ``14-May-2026``, both keyed as ISO (a reformat is not a drop)
    versions     ``v2.31.0``, ``1.2.3.4-rc.1`` (whole dotted run), and ``v1.2`` (short form needs the ``v``)
    links        markdown destinations ``](url``, autolinks ``<https://..>``, bare URLs
    frontmatter  top-level keys of a leading ``---`` block (names only; values are the semantic layer's)
    codespans    ```code``` spans, verbatim
    quotes       text inside curly or straight double quotes (a restyle is not a drop)
    numbers      comma-grouped (keyed comma-less), ``150k``, ``43%``, ``4/5``, decimals, integers of 2+
                 digits; a leading sign counts; digits already inside a date, version or link are masked
    fencedLines  content lines of ``````/``~~~`` fences, whitespace-collapsed

Two layers, as in the real gate: a *set* layer read from the full text (has the value vanished?)
and a *multiset* layer for the seven single-line classes, counting occurrences over the text's
**distinct lines** (has the value collapsed onto fewer lines?). Counting per distinct line makes
cutting an exact-duplicate line free by construction.

JavaScript semantics are kept where Python differs: ``\\d``, ``\\w`` and ``\\b`` are ASCII
(``re.ASCII``), while JavaScript's ``\\s``, ``trim`` and ``.`` keep their Unicode sets, spelled
out below. Evidence windows and the frontmatter head scan count UTF-16 code units, as JS does.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache

A = re.ASCII

# JavaScript's \s (WhiteSpace + LineTerminator); U+FEFF is in it, U+001C..U+001F are not.
WS = r"\t\n\x0b\x0c\r \xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
WS_CHARS = (
    "\t\n\x0b\x0c\r \xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_WS_RUN = re.compile(f"[{WS}]+")
_NOT_WS = re.compile(f"[^{WS}]")
_LINE_BREAK = re.compile(r"\r?\n")  # the real gate splits lines on \r?\n only (a lone CR stays inside a line)

CLASSES = ("wikilinks", "dates", "versions", "links", "frontmatter", "codespans", "quotes", "numbers", "fencedLines")
"""Inventory classes, in the order the real gate reports their drops (numbers last among values)."""
COUNTED = ("wikilinks", "dates", "versions", "links", "codespans", "quotes", "numbers")
"""The single-line classes the multiset layer counts; frontmatter and fences are block parsers (sets only)."""

# The original's patterns as JavaScript spells them (with re.ASCII, Python reads them the same way).
# Those opening with \b, a lookbehind or an optional sign are compiled below in an equivalent
# spelling that opens on a character class, so Python's engine skips in C to the positions where a
# match can start instead of trying the pattern at every position (3x faster on digit-dense text);
# tests/test_wash_gate.py holds each spelling to the original's matches on random text.
_MON = "(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_SIGN = r"(?:(?<![\w.])[-+])?"  # a sign counts only when not glued to a word, digit or dot ("3-sub", "15-20")
_EXT = r"\.(?:md|mjs|cjs|js|json|jsonc|ps1|txt|yml|yaml|log|py|ts|sh)\b"
_MARKERS = ("proven", "verified", "measured", "confirmed")
ORIGINAL_PATTERNS = {
    "ISO_DATE": r"\b\d{4}-\d{2}-\d{2}\b",
    "DMY_DATE": rf"\b\d{{1,2}}-{_MON}-\d{{4}}\b",
    "VERSION": r"\bv?\d+\.\d+(?:\.\d+)+(?:-[0-9A-Za-z][0-9A-Za-z.-]*)?\b",
    "V_SHORT_VERSION": r"\bv\d+\.\d+(?:\.\d+)*(?:-[0-9A-Za-z][0-9A-Za-z.-]*)?\b",
    "COMMA_NUM": _SIGN + r"\b\d{1,3}(?:,\d{3})+(?:\.\d+)?\b%?",
    "MAGNITUDE": _SIGN + r"\b\d+(?:\.\d+)?[kK]\b",
    "PERCENT": _SIGN + r"\b\d+(?:\.\d+)?%",
    "RATIO": _SIGN + r"\b\d+/\d+\b",
    "DECIMAL": _SIGN + r"\b\d+\.\d+\b",
    "INTEGER": _SIGN + r"\b\d{2,}\b",
    "CLAIM_MARKER": rf"\b(?:{'|'.join(_MARKERS)})\b|\b100%",  # case-insensitive
    "FILE_REF": r"\b\w[\w.-]*" + _EXT,
}


def _signed(first_sign: str, first_digit: str, rest: str) -> str:
    """``(?:(?<![\\w.])[-+])?\\b\\d<q>`` + rest, opening on ``[-+\\d]``: after a sign the digits take
    ``first_sign``, after a first digit (preceded by no word character: the ``\\b``) ``first_digit``."""
    return rf"[-+\d](?:(?<=[-+])(?<![\w.][-+])\d{first_sign}|(?<=\d)(?<!\w\d)\d{first_digit}){rest}"


def _nocase(word: str) -> str:
    return "".join(f"[{c}{c.upper()}]" if c.isalpha() else re.escape(c) for c in word)


WIKILINK = re.compile(r"\[\[([^\[\]]+)\]\]", A)
ISO_DATE = re.compile(r"\d(?<!\w\d)\d{3}-\d{2}-\d{2}\b", A)
DMY_DATE = re.compile(rf"\d(?<!\w\d)\d?-{_MON}-\d{{4}}\b", A)
_PRE = r"(?:-[0-9A-Za-z][0-9A-Za-z.-]*)?\b"  # a version's pre-release tail
VERSION = re.compile(r"[v\d](?:(?<=v)(?<!\wv)\d+|(?<=\d)(?<!\w\d)\d*)\.\d+(?:\.\d+)+" + _PRE, A)
V_SHORT_VERSION = re.compile(r"v(?<!\wv)\d+\.\d+(?:\.\d+)*" + _PRE, A)
MDLINK_DEST = re.compile(f"\\]\\([{WS}]*<?([^{WS})>]+)", A)
AUTOLINK = re.compile(f"<((?:https?|ftp|mailto):[^>{WS}]+)>", A)
BARE_URL = re.compile(f"(?:https?|ftp)://[^{WS}<>()\\[\\]]+", A)
CODESPAN = re.compile(r"`([^`\n]+)`", A)
CURLY_QUOTE = re.compile("\u201c([^\u201d\\n]+)\u201d", A)
STRAIGHT_QUOTE = re.compile(r'"([^"\n]+)"', A)
FENCE_LINE = re.compile(r" {0,3}(`{3,}|~{3,})([^\n\r\u2028\u2029]*)", A)  # fullmatch; JS `.` excludes CR, LS, PS
_FENCE_START = re.compile(r"^ {0,3}(?:`{3}|~{3})", re.MULTILINE)  # a line where a fence may open or close

COMMA_NUM = re.compile(_signed("{1,3}", "{0,2}", r"(?:,\d{3})+(?:\.\d+)?\b%?"), A)
MAGNITUDE = re.compile(_signed("+", "*", r"(?:\.\d+)?[kK]\b"), A)
PERCENT = re.compile(_signed("+", "*", r"(?:\.\d+)?%"), A)
RATIO = re.compile(_signed("+", "*", r"/\d+\b"), A)
DECIMAL = re.compile(_signed("+", "*", r"\.\d+\b"), A)
INTEGER = re.compile(_signed("{2,}", "+", r"\b"), A)

_MONTH_NAMES = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
MONTHS = {m: f"{i:02d}" for i, m in enumerate(_MONTH_NAMES, 1)}
_DMY_PARTS = re.compile(r"(\d{1,2})-(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)-(\d{4})", A)


def js_trim(s: str) -> str:
    """``String.prototype.trim``: strips JavaScript whitespace, not Python's (U+001C..U+001F stay)."""
    return s.strip(WS_CHARS)


def lines(text: str) -> list[str]:
    """The real gate's line split: on ``\\n`` or ``\\r\\n`` only."""
    return _LINE_BREAK.split(text)


def canon_date(d: str) -> str:
    """``14-May-2026`` -> ``2026-05-14``; an ISO date is already canonical."""
    m = _DMY_PARTS.fullmatch(d)
    return f"{m[3]}-{MONTHS[m[2]]}-{m[1].zfill(2)}" if m else d


def _all(text: str, rx: re.Pattern, group: int = 0) -> list[str]:
    """Every match, in order (none of the gate's patterns can match empty)."""
    if rx.groups == (1 if group else 0):  # findall gives just that group (or the match): no match objects
        return rx.findall(text)
    return [m[group] for m in rx.finditer(text)]


def _take(text: str, rx: re.Pattern, group: int = 0) -> tuple[list[str], str]:
    """(every match, the text with each match blanked out by spaces): one scan for both, so a
    claimed span is not scanned again by the next pattern."""
    found: list[str] = []
    parts: list[str] = []
    last = 0
    for m in rx.finditer(text):
        found.append(m[group])
        start, end = m.span()
        parts.append(text[last:start])
        parts.append(" " * (end - start))
        last = end
    if not found:
        return found, text
    parts.append(text[last:])
    return found, "".join(parts)


def _mask(text: str, *patterns: re.Pattern) -> str:
    """Blank out each pattern's matches with spaces, in turn."""
    for rx in patterns:
        text = _take(text, rx)[1]
    return text


# A number's characters and the neighbours its \b and lookbehinds read lie in one run of [\w.,%/+-];
# runs without a digit hold no number, and any other character is a separator to every number form.
_DIGITLESS_RUN = re.compile(r"[A-Za-z_.,%/+-](?<![\w.,%/+-][A-Za-z_.,%/+-])[A-Za-z_.,%/+-]*(?![\w.,%/+-])", A)
_SEPARATORS = re.compile(r"[^\w.,%/+-]+", A)


def numbers(text: str) -> list[str]:
    """Every numeric token, most specific form first, each form's spans masked before the next.

    The number forms read only the runs of ``[\\w.,%/+-]`` that hold a digit, each as a whole with a
    separator either side, so they scan those runs alone, a space between each two."""
    work = _mask(text, ISO_DATE, DMY_DATE, VERSION, V_SHORT_VERSION, MDLINK_DEST, AUTOLINK, BARE_URL)
    work = _SEPARATORS.sub(" ", _DIGITLESS_RUN.sub("", work))
    found, work = _take(work, COMMA_NUM)
    out = [v.replace(",", "") for v in found]
    for rx in (MAGNITUDE, PERCENT, RATIO, DECIMAL):
        found, work = _take(work, rx)
        out += found
    return out + _all(work, INTEGER)


@lru_cache(maxsize=4096)
def token_lists(text: str) -> dict[str, list[str]]:
    """Every occurrence of each single-line class, in order.

    Overlapping patterns are chained with masking (whole version run before ``v1.2``; markdown
    destination before autolink before bare URL) so one physical token counts once.
    """
    versions, masked = _take(text, VERSION)
    versions += _all(masked, V_SHORT_VERSION)
    links, masked = _take(text, MDLINK_DEST, 1)
    autolinks, masked = _take(masked, AUTOLINK, 1)
    links += autolinks + _all(masked, BARE_URL)
    return {
        "wikilinks": [js_trim(v.split("|")[0]) for v in _all(text, WIKILINK, 1)],
        "dates": [canon_date(v) for v in _all(text, ISO_DATE) + _all(text, DMY_DATE)],
        "versions": versions,
        "links": links,
        "codespans": _all(text, CODESPAN, 1),
        "quotes": _all(text, CURLY_QUOTE, 1) + _all(text, STRAIGHT_QUOTE, 1),
        "numbers": numbers(text),
    }


def fenced_lines(text: str) -> list[str]:
    """Distinct content lines of ``````/``~~~`` fences, whitespace-collapsed (a reindent is not a drop).

    A fence closes on the same character, a run at least as long, and nothing but whitespace after;
    a backtick opener whose info string holds a backtick is inline code, not a fence. Indented
    (4-space) code blocks are not tracked: the real gate's own open gap.
    """
    out: dict[str, None] = {}
    if not _FENCE_START.search(text):
        return []  # no line can open a fence
    fence: tuple[str, int] | None = None
    for line in lines(text):
        m = FENCE_LINE.fullmatch(line)
        if fence:
            if m and m[1][0] == fence[0] and len(m[1]) >= fence[1] and js_trim(m[2]) == "":
                fence = None
                continue
            collapsed = _WS_RUN.sub(" ", js_trim(line))
            if collapsed:
                out[collapsed] = None
        elif m:
            if m[1][0] == "`" and "`" in m[2]:
                continue
            fence = (m[1][0], len(m[1]))
    return list(out)


# --- frontmatter -------------------------------------------------------------------------------

_FM_OPEN = re.compile(r"---([^\r\n]*)\r?\n")
_FM_OPEN_CR = re.compile(r"---([^\r\n]*)\r")
_FM_CLOSE = re.compile(r"\r?\n---[ \t]*(?:\r?\n|\Z)")
_FM_CLOSE_TRUNCATED = re.compile(r"\r?\n---[ \t]*\r?\n")  # a cut window's end proves no close
_KEY_FIRST = re.compile(f"[^{WS}:#-]")
_KEY_SEP = re.compile(f":(?=[{WS}]|\\Z)")
_SEQ_ITEM = re.compile(r"-(?:[ \t][^\n]*)?")


def _u16_prefix(s: str, units: int) -> str:
    """``s.slice(0, units)`` in JavaScript: the prefix measured in UTF-16 code units."""
    used = 0
    for i, ch in enumerate(s):
        used += 2 if ord(ch) > 0xFFFF else 1
        if used > units:
            return s[:i]
    return s


def read_frontmatter(text: str, truncated: bool = False) -> tuple[str, str]:
    """(state, block): ``none`` (no block), ``closed`` (block found), or ``unverifiable``.

    ``truncated``: ``text`` is a window cut from a longer file (the pin reader's 64 KiB), so its end
    is not the file's: a closing fence must then end in a real line break.

    One leading BOM is a legal signature and is skipped; a second one, a NUL or U+FFFD in the head
    (an undecodable encoding), a fence line ending in a bare CR, a fence line followed by invisible
    non-ASCII bytes, or a block that never closes are *unverifiable*: the census cannot be trusted.
    """
    s = text[1:] if text.startswith("\ufeff") else text
    if s.startswith("\ufeff"):
        return "unverifiable", ""
    head = _u16_prefix(s, 64)
    if "\0" in head or "\ufffd" in head:
        return "unverifiable", ""
    opened = _FM_OPEN.match(s)
    cr = None if opened else _FM_OPEN_CR.match(s)
    tail = opened[1] if opened else (cr[1] if cr else None)
    if tail is not None and not re.fullmatch(r"[ \t]*", tail):
        # 'none' must be earned by a visible ASCII glyph (prose like "--- a/file"); anything else refuses.
        return ("none", "") if re.search(r"[\x21-\x7e]", tail) else ("unverifiable", "")
    if cr:
        return "unverifiable", ""
    if not opened:
        return "none", ""
    start = len(opened[0]) - (2 if opened[0].endswith("\r\n") else 1)  # keep the newline the close anchors on
    end = (_FM_CLOSE_TRUNCATED if truncated else _FM_CLOSE).search(s, start)
    if not end:
        return "unverifiable", ""
    return "closed", s[start : end.start()]


def _key(body: str) -> tuple[str, str, bool] | None:
    """(key, value, strict) of a ``key: value`` line; strict = the colon is followed by whitespace
    or the end, else the first colon anywhere separates (a loose key)."""
    if not _KEY_FIRST.match(body):
        return None
    sep = _KEY_SEP.search(body)
    at = sep.start() if sep else body.find(":")
    return (body[:at].rstrip(WS_CHARS), body[at + 1 :], sep is not None) if at >= 0 else None


@dataclass(frozen=True)
class FrontmatterEntry:
    key: str
    value: str
    strict: bool
    top: bool
    """At the block's own root column (or column 0)."""


def frontmatter_entries(block: str) -> tuple[list[FrontmatterEntry], str | None]:
    """The one reading of a frontmatter block: its key lines, and why it is not provably readable
    (None when every line is accounted for).

    Blank lines, comments, lines deeper than the root column (set by the first key line) and
    sequence items are understood by position. A bare CR, a tab in an indentation, a root line that
    is no key, a key line indented less than the root, or a top-level key with a character outside
    printable ASCII or opening with a YAML indicator make the block unreadable (its entries are
    still returned: the census keeps what it could read; the pin reader refuses).
    """
    entries: list[FrontmatterEntry] = []
    problems: list[str] = ["a bare CR line break"] if re.search(r"\r(?!\n)", block) else []
    root: int | None = None
    for line in lines(block):
        if not _NOT_WS.search(line):
            continue
        if re.match(r"[ ]*\t", line):
            problems.append(f"a tab in the indentation of {line!r}")
            continue
        indent = len(line) - len(line.lstrip(" "))
        body = line[indent:]
        if body.startswith("#"):
            continue
        if root is None:
            root = indent
        if indent > root or _SEQ_ITEM.fullmatch(body):
            continue
        parsed = _key(body)
        if parsed is None:
            problems.append(f"{line!r} is no key, comment or list item")
            continue
        top = indent == root or indent == 0
        if indent < root:
            problems.append(f"{line!r} is indented less than the block's first key")
        if top and (re.search(r"[^\x20-\x7e]", parsed[0]) or re.match(r"[,\[\]{}&*!|>%@`?]", parsed[0])):
            problems.append(f"the top-level key of {line!r} is not a plain ASCII key")
        entries.append(FrontmatterEntry(parsed[0], parsed[1], parsed[2], top))
    return entries, (problems[0] if problems else None)


def frontmatter_keys(text: str) -> tuple[list[str], bool]:
    """(top-level keys, incomplete). Top level is the block's own root column (or column 0).

    Only strict mapping keys count (:func:`frontmatter_entries`; an unreadable line is skipped, a
    census keeps what it could read). ``incomplete`` is True when the block is unverifiable: an
    empty key list then means "could not look", not "no keys".
    """
    state, block = read_frontmatter(text)
    if state != "closed":
        return [], state == "unverifiable"
    entries, _unreadable = frontmatter_entries(block)
    return list(dict.fromkeys(e.key for e in entries if e.strict and e.top)), False


# --- evidence anchors (class 10) ---------------------------------------------------------------

CLAIM_MARKER = re.compile(  # \b(?:proven|verified|measured|confirmed)\b|\b100%, case-insensitive
    "[pPvVmMcC1](?<!\\w[pPvVmMcC1])(?:"
    + "|".join(f"(?<=[{w[0]}{w[0].upper()}]){_nocase(w[1:])}\\b" for w in _MARKERS)
    + "|(?<=1)00%)",
    A,
)
ISSUE_REF = re.compile(r"#\d+\b", A)
HEX_ID = re.compile(r"\b[0-9a-f]{7,40}\b", A)
FILE_REF = re.compile(r"\w(?<!\w\w)[\w.-]*" + _EXT, A)
_FILE_RUN = re.compile(r"[\w.-]+", A)
_LONG_FILE_RUN = re.compile(r"[\w.-]{257,}", A)  # FILE_REF_RUN_CAP + 1
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
EVIDENCE_WINDOW = 200  # UTF-16 units either side of the marker, clamped to its line
FILE_REF_RUN_CAP = 256  # bounds the file-name regex's backtracking on long runs without a valid extension


def _is_hex_evidence(tok: str) -> bool:
    """A hex id counts only if it mixes letters and digits (never a plain number or word)."""
    return bool(re.search("[a-f]", tok)) and bool(re.search("[0-9]", tok))


class _Lines:
    """Line bounds and UTF-16 offsets of one text, looked up in log time (one pass to build)."""

    def __init__(self, text: str):
        self.text = text
        self.breaks = [m.start() for m in re.finditer("\n", text)]
        self.astral = [m.start() for m in _ASTRAL.finditer(text)]  # each is 2 UTF-16 units, not 1
        self.second_halves = [i + k + 1 for k, i in enumerate(self.astral)]  # UTF-16 offsets

    def line(self, at: int) -> tuple[int, int]:
        """(start, end) of the line holding ``at`` (``end`` at its newline or the text's end)."""
        k = bisect_left(self.breaks, at)
        start = self.breaks[k - 1] + 1 if k else 0
        return start, self.breaks[k] if k < len(self.breaks) else len(self.text)

    def units(self, i: int) -> int:
        """UTF-16 offset of code point ``i``."""
        return i + bisect_left(self.astral, i)

    def index(self, u: int) -> int:
        """The first code point whose UTF-16 offset is ``u`` or more: ``u`` less the second halves
        of the surrogate pairs that end before it."""
        return u - bisect_left(self.second_halves, u)


def evidence_anchors(text: str) -> dict[str, str]:
    """token -> the proof marker it sits near (first marker wins): issue refs, hex ids, file names
    within 200 UTF-16 units of ``proven``/``verified``/``measured``/``confirmed``/``100%`` on its line."""
    out: dict[str, str] = {}
    markers = list(CLAIM_MARKER.finditer(text))
    if not markers:
        return out
    at = _Lines(text)
    for m in markers:
        line_start, line_end = at.line(m.start())
        if not at.astral:
            lo = max(line_start, m.start() - EVIDENCE_WINDOW)
            hi = min(line_end, m.end() + EVIDENCE_WINDOW)
        else:  # JS slices at UTF-16 offsets; a slice edge inside a surrogate pair moves as bisect did
            lo = at.index(max(at.units(line_start), at.units(m.start()) - EVIDENCE_WINDOW))
            hi_u = min(at.units(line_end), at.units(m.end()) + EVIDENCE_WINDOW)
            hi = at.index(hi_u)
            hi = hi if at.units(hi) <= hi_u else hi - 1
        win = text[lo:hi]
        toks = list(dict.fromkeys(_all(win, ISSUE_REF)))
        toks += [t for t in dict.fromkeys(_all(win, HEX_ID)) if _is_hex_evidence(t)]
        toks += list(dict.fromkeys(_all(win, FILE_REF)))
        for t in toks:
            out.setdefault(t, m[0])
    return out


def evidence_tokens(text: str) -> set[str]:
    """Every evidence-shaped token anywhere in a text (where a relocated anchor may have gone).

    File names are read per run of ``[\\w.-]`` capped at 256 characters, as the original does; a
    match never crosses a run's edge, so one scan of the text (with the long runs blanked and read
    capped on their own) finds the same names."""
    found = set(_all(text, ISSUE_REF)) | set(_all(text, HEX_ID))
    long_runs = _take(text, _LONG_FILE_RUN)
    found.update(_all(long_runs[1], FILE_REF))
    for run in long_runs[0]:
        found.update(_all(run[:FILE_REF_RUN_CAP], FILE_REF))
    return found


# --- the inventory ----------------------------------------------------------------------------


@dataclass
class Inventory:
    """One side of a comparison: ordered value sets per class, distinct-line counts per counted
    class, and whether any frontmatter census was unverifiable."""

    values: dict[str, dict[str, None]] = field(default_factory=lambda: {c: {} for c in CLASSES})
    counts: dict[str, Counter] = field(default_factory=lambda: {c: Counter() for c in COUNTED})
    frontmatter_incomplete: bool = False

    def add(self, text: str) -> None:
        """Add one file's set layer (its own full text: no token spans two files)."""
        for cls, found in token_lists(text).items():
            self.values[cls].update(dict.fromkeys(found))
        keys, incomplete = frontmatter_keys(text)
        self.values["frontmatter"].update(dict.fromkeys(keys))
        self.values["fencedLines"].update(dict.fromkeys(fenced_lines(text)))
        self.frontmatter_incomplete |= incomplete

    def count_lines(self, texts: list[str]) -> None:
        """The multiset layer: occurrences over the distinct lines of all texts together."""
        distinct = "\n".join(dict.fromkeys(line for t in texts for line in lines(t)))
        for cls, found in token_lists(distinct).items():
            self.counts[cls] = Counter(found)


def take_inventory(texts: list[str]) -> Inventory:
    """The inventory of one text, or of a whole store (its files' texts in store order). Read-only:
    the same texts give the same (cached) object, since a wash gates one store many times."""
    return _inventory_of(tuple(texts))


_WIKILINK_CROSSING = re.compile(r"\[\[[^\[\]\n]*\n[^\[\]]*\]\]")
_MDLINK_MAY_CROSS = re.compile(f"\\]\\([{WS}0-9A-Za-z.-]*\n", A)


def _line_local(text: str) -> bool:
    """No match of the gate's patterns can cross a line break. Only two can hold one: a wikilink,
    and the whitespace after a markdown link's ``](``, which in the number scan may also be a date or
    version already blanked out (``](1.2.3`` then a line break); every other pattern excludes ``\n``
    or is made of digits, letters and punctuation, and a mask is a match's own span."""
    return not _WIKILINK_CROSSING.search(text) and not _MDLINK_MAY_CROSS.search(text)


@lru_cache(maxsize=256)
def _inventory_of(texts: tuple[str, ...]) -> Inventory:
    inv = Inventory()
    if len(texts) == 1:
        text = texts[0]
        distinct = "\n".join(dict.fromkeys(lines(text)))
        if distinct != text and _line_local(text) and _line_local(distinct):
            # Every match then lies on one line and sees the same neighbours (a line break or the
            # text's edge) in both texts, so the distinct lines state the same values in the same
            # first-seen order: one scan serves both layers.
            for cls, found in token_lists(distinct).items():
                inv.values[cls].update(dict.fromkeys(found))
                inv.counts[cls] = Counter(found)
            keys, inv.frontmatter_incomplete = frontmatter_keys(text)
            inv.values["frontmatter"].update(dict.fromkeys(keys))
            inv.values["fencedLines"].update(dict.fromkeys(fenced_lines(text)))
            return inv
    for text in texts:
        inv.add(text)
    inv.count_lines(list(texts))
    return inv


def inventory(text: str) -> dict[str, Counter]:
    """Per class, each value and how many distinct lines state it (1 for frontmatter keys and
    fenced lines, which are sets; at least 1 for any value the set layer sees)."""
    inv = take_inventory([text])
    return {
        cls: Counter({v: max(1, inv.counts[cls][v]) if cls in inv.counts else 1 for v in vals})
        for cls, vals in inv.values.items()
    }
