"""Is a store file pinned? Read the way CoalWash reads it, and pinned wherever that could differ.

CoalWash's ``apply.mjs`` (``pinVerdict``, v1.1.0) is the specification. A file is pinned when:

- its first 64 KiB (``PIN_READ_BYTES``, decoded with U+FFFD for bad bytes) hold no verifiable
  frontmatter head: a second BOM, a NUL or U+FFFD in the head, a fence line ending in a bare CR,
  a fence followed by no printable ASCII glyph (``---\\u200b``), or a block that does not close
  inside the window (when the file is longer than the window, the window's end is no close);
- the floor matches: ``^pinned\\s*:\\s*true\\s*$`` read as JavaScript reads it with the ``m``
  flag, where a line also ends at a CR, U+2028 or U+2029 (``title: x`` U+2028 ``pinned: true``
  is a pin) and ``\\s`` is JavaScript's whitespace;
- the block is not provably readable (``washexp.wash.coalwash.inventory.frontmatter_entries``: a bare CR,
  a tab in an indentation, a root line that is no key, ...);
- a top-level ``pinned`` key (quotes and case ignored) has a value other than ``false``/``no``/
  ``off`` once trimmed the JavaScript way and a ``\\s+#...`` comment is taken off (a comment ends
  at a JavaScript line break: ``no #x`` U+2028 ``y`` is not cleared).

Two tiers, as CoalWash's: a **marker** pin (the floor or a parsed ``pinned`` entry: the user
marked the file) makes a plan that touches it malformed, refused whole; an **incapacity** pin
(nothing could be proved) refuses that file alone.

Our own additions, each only ever adding pins (``docs/wash-measurements.md``, departures):

- a first line that reads ``---`` once invisible characters are removed (``\\u200b---``) is
  fence-shaped, hence a pin (CoalWash reads it as no frontmatter);
- a block that mentions ``pinned`` (any case) and holds a character JavaScript and Python read
  differently as whitespace or a line break (U+0085, U+001C..U+001F, U+FEFF, U+180E, U+2028,
  U+2029) is a pin: no port of a regex can be trusted to agree on it.

Both are incapacity pins.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from washexp.wash.coalwash.inventory import WS, WS_CHARS, frontmatter_entries, read_frontmatter

PIN_READ_BYTES = 65536
"""CoalWash's pin window: a block that does not close within it is unverifiable."""

_JS_EOL = "\n\r\u2028\u2029"  # JavaScript's LineTerminator: where ^ and $ of an m-flag regex stop
_FLOOR = re.compile(f"(?:\\A|(?<=[{_JS_EOL}]))pinned[{WS}]*:[{WS}]*true[{WS}]*(?=[{_JS_EOL}]|\\Z)")
_COMMENT = re.compile(f"[{WS}]+#[^{_JS_EOL}]*\\Z")  # /\s+#.*$/ : JS `.` stops at a line break
_CLEARS = frozenset({"false", "no", "off"})
_DISAGREE = re.compile("[\x1c-\x1f\x85\u180e\u2028\u2029\ufeff]")
"""Characters JavaScript's ``\\s``/``trim``/line breaks and Python's read differently."""


@dataclass(frozen=True)
class PinVerdict:
    pinned: bool
    marker: bool = False
    """A pin was read (the user marked the file): a plan touching it is refused whole."""
    why: str | None = None
    """Why an incapacity pin could not be cleared."""


NOT_PINNED = PinVerdict(False)
_MARKED = PinVerdict(True, marker=True)


def _unquote(s: str) -> str:
    return s[1:-1] if len(s) > 1 and s[0] in "\"'" and s[-1] == s[0] else s


def _js_trim(s: str) -> str:
    return s.strip(WS_CHARS)


def _clears(value: str) -> bool:
    bare = _js_trim(_COMMENT.sub("", _js_trim(value), count=1))
    return _js_trim(_unquote(bare)).lower() in _CLEARS


def _is_pin_key(key: str) -> bool:
    return _js_trim(_unquote(_js_trim(key))).lower() == "pinned"


def _hidden_fence(text: str) -> bool:
    """A first line that reads ``---`` once the characters a reader cannot see are dropped, but is
    not a fence a parser accepts (``\u200b---``, `` ---``): it could be frontmatter."""
    first = re.split(r"[\r\n]", text.removeprefix("\ufeff"), maxsplit=1)[0]
    return not first.startswith("---") and re.sub(r"[^\x21-\x7e]", "", first) == "---"


def pin_verdict(data: bytes | str) -> PinVerdict:
    """The pin verdict of a store file's bytes (or text, read as its UTF-8 bytes)."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    head = raw[:PIN_READ_BYTES].decode("utf-8", "replace")
    state, block = read_frontmatter(head, truncated=len(raw) > PIN_READ_BYTES)
    if state == "unverifiable":
        return PinVerdict(True, why="frontmatter unverifiable inside the pin read window")
    if state == "none":
        return PinVerdict(True, why="a hidden fence") if _hidden_fence(head) else NOT_PINNED
    if _FLOOR.search(block):
        return _MARKED
    entries, unreadable = frontmatter_entries(block)
    if unreadable is not None:
        return PinVerdict(True, why=unreadable)
    if any(e.top and _is_pin_key(e.key) and not _clears(e.value) for e in entries):
        return _MARKED
    if "pinned" in block.lower() and _DISAGREE.search(block):
        return PinVerdict(True, why="a character JavaScript and Python read differently, beside a pinned key")
    return NOT_PINNED


def is_pinned(data: bytes | str) -> bool:
    """True when the file is pinned or might be (see the module docstring)."""
    return pin_verdict(data).pinned
