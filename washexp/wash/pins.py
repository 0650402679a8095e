"""Is a store file pinned? Anything that could be a pin and cannot be read is a pin.

A file is pinned when its leading YAML frontmatter block has a top-level ``pinned`` key whose
value is not one of ``false``/``no``/``off`` (any case, quoted or not, a ``# comment`` after it
ignored): ``maybe``, ``0``, ``[]``, an empty value or a value on the next line all pin. The
answer "not pinned" has to be earned; each of these is a pin because it cannot be read:

- a second BOM, a NUL or U+FFFD in the head (an encoding this reader cannot parse);
- a first line that is ``---`` once invisible characters are removed but is not a plain fence
  (``---`` followed or preceded by U+200B, U+3164, U+2800, a no-break space ...): a fence
  followed by a printable ASCII glyph (``--- a/file``, ``----``) is prose, not frontmatter;
- a bare CR anywhere in the block (mixed line endings cut lines where YAML would not);
- a block that never closes (``---`` on a line of its own);
- a line at the block's root column that is not ``key: value``, a comment, a list item or blank;
  a tab in an indentation; a key line indented less than the first; a top-level key holding a
  character outside printable ASCII (``pinned\\u00a0``) or opening with a YAML indicator
  (``{pinned: true}``);
- ``pinned``, any whitespace (line breaks included), ``:``, any whitespace, ``true``: the
  floor, whatever the line reading says.

This is the floor CoalWash's ``apply.mjs`` sets (its ``pinVerdict``), read and re-written here on
the fidelity gate's own frontmatter reader (``washexp.wash.inventory``: one reading of a block,
the census and the pin each projecting it); the table in ``tests/test_wash_pins.py`` holds every
case.
"""

from __future__ import annotations

import re

from washexp.wash.inventory import WS, frontmatter_entries, read_frontmatter

_FLOOR = re.compile(f"^pinned[{WS}]*:[{WS}]*true[{WS}]*$", re.MULTILINE)
_CLEARS = frozenset({"false", "no", "off"})


def _unquote(s: str) -> str:
    return s[1:-1] if len(s) > 1 and s[0] in "\"'" and s[-1] == s[0] else s


def _clears(value: str) -> bool:
    bare = re.sub(r"\s+#.*$", "", value.strip()).strip()
    return _unquote(bare).strip().lower() in _CLEARS


def _hidden_fence(text: str) -> bool:
    """A first line that reads ``---`` once the characters a reader cannot see are dropped, but is
    not a fence a parser accepts (``\u200b---``, `` ---``): it could be frontmatter."""
    first = re.match(r"[^\r\n]*", text.removeprefix("\ufeff"))[0]
    return not first.startswith("---") and re.sub(r"[^\x21-\x7e]", "", first) == "---"


def is_pinned(text: str) -> bool:
    """True when ``text`` (a store file) is pinned or might be (see the module docstring)."""
    state, block = read_frontmatter(text)
    if state == "unverifiable" or (state == "none" and _hidden_fence(text)):
        return True
    if state == "none":
        return False
    if _FLOOR.search(block):
        return True
    entries, unreadable = frontmatter_entries(block)
    return unreadable is not None or any(
        e.top and _unquote(e.key.strip()).strip().lower() == "pinned" and not _clears(e.value) for e in entries
    )
