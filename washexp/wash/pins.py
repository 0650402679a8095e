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

This is the floor CoalWash's ``apply.mjs`` sets (its ``pinVerdict``), read and re-written here;
the table in ``tests/test_wash_pins.py`` holds every case.
"""

from __future__ import annotations

import re

# JavaScript's \s, which the floor and the key trimming use (Python's \s leaves out U+FEFF)
_WS = "\t\n\v\f\r \u00a0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000\ufeff"
_S = f"[{re.escape(_WS)}]"
_FLOOR = re.compile(rf"^pinned{_S}*:{_S}*true{_S}*$", re.MULTILINE)
_CLEARS = frozenset({"false", "no", "off"})
_PRINTABLE = re.compile(r"[\x21-\x7e]")
_NON_ASCII = re.compile(r"[^\x20-\x7e]")
_INDICATOR = re.compile(r"^[,\[\]{}&*!|>%@`?]")
_SEQUENCE_ITEM = re.compile(r"^-(?:[ \t].*)?$")
_CLOSE = re.compile(r"\r?\n---[ \t]*(?:\r?\n|$)")
HEAD_SCAN = 64  # an encoding preamble sits at the head; deeper U+FFFD is content


def _unquote(s: str) -> str:
    return s[1:-1] if len(s) > 1 and s[0] in "\"'" and s[-1] == s[0] else s


def _clears(value: str) -> bool:
    bare = re.sub(r"\s+#.*$", "", value.strip()).strip()
    return _unquote(bare).strip().lower() in _CLEARS


def _key_line(body: str) -> tuple[str, str] | None:
    """(key, value) of a ``key: value`` line, the separator the first ``:`` before whitespace or
    the end, else the first ``:``; None when the line cannot be a key."""
    if not body or body[0] in f"{_WS}:#-":
        return None
    m = re.search(rf":(?={_S}|$)", body) or re.search(":", body)
    if m is None:
        return None
    return body[: m.start()].rstrip(_WS), body[m.end() :]


def _block(text: str) -> str | None:
    """The frontmatter block, "" when the file has none, None when it cannot be read."""
    if text.startswith("\ufeff"):
        text = text[1:]  # one BOM is a signature
    head = text[:HEAD_SCAN]
    if text.startswith("\ufeff") or "\0" in head or "\ufffd" in head:
        return None
    first = re.match(r"[^\r\n]*", text)[0]
    ending = text[len(first) : len(first) + 2]
    visible = re.sub(r"[^\x21-\x7e]", "", first)
    if not first.startswith("---"):
        return None if visible == "---" else ""  # an invisible character before a fence
    tail = first[3:]
    if tail.strip(" \t"):
        return "" if _PRINTABLE.search(tail) else None  # `--- a/file` is prose; `---\u200b` is unreadable
    if ending.startswith("\r") and ending != "\r\n":
        return None  # a bare CR ends the fence line
    end = _CLOSE.search(text, len(first))
    if end is None or ending == "":
        return None  # an opened block that never closes
    return text[len(first) : end.start()]


def _unreadable_or_pinned(block: str) -> bool:
    """True when some line of the block cannot be read, or a top-level ``pinned`` does not clear."""
    if re.search(r"\r(?!\n)", block):
        return True
    root = None
    for line in re.split(r"\r?\n", block):
        if not line.strip(_WS):
            continue
        if re.match(r"^ *\t", line):
            return True
        indent = len(line) - len(line.lstrip(" "))
        body = line[indent:]
        if body.startswith("#"):
            continue
        if root is None:
            root = indent
        if indent > root:
            continue  # nested content can never be a top-level key
        if _SEQUENCE_ITEM.match(body):
            continue
        parsed = _key_line(body)
        if parsed is None or indent < root:
            return True
        key, value = parsed
        if _NON_ASCII.search(key) or _INDICATOR.match(key):
            return True
        if _unquote(key.strip()).strip().lower() == "pinned" and not _clears(value):
            return True
    return False


def is_pinned(text: str) -> bool:
    """True when ``text`` (a store file) is pinned or might be (see the module docstring)."""
    block = _block(text)
    if block is None:
        return True
    if not block:
        return False
    return bool(_FLOOR.search(block)) or _unreadable_or_pinned(block)
