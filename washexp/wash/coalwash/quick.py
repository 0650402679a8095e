"""The quick tier: free, mechanical edits that never remove a store's only copy of anything.

``quick_plan(files)`` proposes ``cls="quick"`` items for, in this order of precedence (a line
claimed by one rule is left alone by the later ones, so items never overlap):

1. the index (``MEMORY.md``, when present): its entry list is rebuilt from the files present.
   An entry is a list item that starts with ``[[name]]`` or ``[Title](name.md)`` naming a
   top-level file. An entry whose file is absent is removed (``delete``) and its link is named
   in ``approved_drops`` as ``{"type": "wikilinks", "value": target}`` or
   ``{"type": "links", "value": destination}``; a topic file with no entry gets one appended
   after the last live entry (``replace``), in the style of the index's first entry.
2. exact duplicate paragraphs within one file (lines between blank lines, compared with
   trailing spaces ignored): every later copy is deleted with the blank lines before it. A
   paragraph shorter than 24 characters, or made only of headings and rules, is structure, not
   a duplicate, and stays.
3. runs of 3 or more blank lines collapse to 2 (``replace``).
4. trailing spaces and tabs are stripped (``replace``, consecutive lines in one item).

Dead ``[[links]]`` (to no top-level file, names compared case-insensitively) are flagged in
``notes`` and never edited. Lines inside YAML frontmatter or a fenced code block are verbatim
content and are never edited. The tier is idempotent: on its own result it proposes no item
and no drop (the dead-link flags repeat, as flags do); on a clean lean store it proposes none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

from washexp.wash.plan import Plan, PlanItem, line_ending, split_lines

INDEX = "MEMORY.md"
WASHER = "quick"
MIN_DUPLICATE_CHARS = 24  # CoalWash's mechanical-fat floor: shorter repeats are structure, not fat

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_STRUCTURE = re.compile(r"^ {0,3}(#{1,6}(\s|$)|([-*_])[ \t]*(\3[ \t]*){2,}$)")  # ATX heading or thematic break
_ENTRY = re.compile(
    r"^(?P<lead>[ \t]*[-*+][ \t]+)(?:\[\[(?P<wiki>[^\[\]\n]+)\]\]|\[(?P<title>[^\[\]\n]*)\]\((?P<dest>[^()\s]+)\))"
)
_WIKILINK = re.compile(r"\[\[([^\[\]\n]+)\]\]")
_H1 = re.compile(r"^#[ \t]+(.+?)[ \t#]*$")


@dataclass
class _Doc:
    """One file as lines: ``content`` without endings, ``protected`` 0-based indices never edited."""

    content: list[str]
    protected: set[int]

    @classmethod
    def parse(cls, text: str) -> _Doc:
        content = [line[: len(line) - len(line_ending(line))] for line in split_lines(text)]
        return cls(content, protected_lines(content))

    def blank(self, j: int) -> bool:
        return j not in self.protected and not self.content[j].strip()


def protected_lines(content: list[str]) -> set[int]:
    """Frontmatter and fenced code blocks (an unclosed fence runs to the end, as CommonMark says)."""
    protected: set[int] = set()
    start = 0
    if content and content[0].lstrip("\ufeff").rstrip() == "---":
        for j in range(1, len(content)):
            if content[j].rstrip() in ("---", "..."):
                protected.update(range(j + 1))
                start = j + 1
                break
    fence = ""
    for j in range(start, len(content)):
        m = _FENCE.match(content[j])
        if fence:
            protected.add(j)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not content[j][m.end() :].strip():
                fence = ""
        elif m:
            protected.add(j)
            fence = m.group(1)
    return protected


def _item(name: str, start: int, end: int, reason: str, op: str, text: str | None = None) -> PlanItem:
    """A quick item on 0-based lines ``start..end`` inclusive."""
    return PlanItem(name, start + 1, end + 1, "quick", reason, op, text)


def _resolve(file_name: str, present: dict[str, str]) -> str | None:
    """The present store file a link names, compared case-insensitively (as wiki tools resolve)."""
    return present.get(file_name.lower())


def _entry_target(m: re.Match) -> tuple[str, str, str] | None:
    """(drop type, drop value, file name) for an index entry that names a top-level file."""
    if m["wiki"] is not None:
        target = m["wiki"].split("|")[0].split("#")[0].strip()
        if not target or "/" in target or "\\" in target:
            return None
        return "wikilinks", target, target if target.lower().endswith(".md") else target + ".md"
    dest = m["dest"]
    path = unquote(dest.split("#")[0]).removeprefix("./")
    if ":" in path or "/" in path or "\\" in path or not path.lower().endswith(".md"):
        return None  # a URL or a file outside the store is not an index entry
    return "links", dest, path


def _entry_line(name: str, text: str, wiki: bool, lead: str) -> str:
    """An index entry for ``name`` in the index's style; a name a wikilink cannot carry gets a link."""
    stem = name[:-3]
    if wiki and not set(stem) & set("[]|#^"):
        return f"{lead}[[{stem}]]"
    doc = _Doc.parse(text)
    titles = (m[1] for j, line in enumerate(doc.content) if j not in doc.protected and (m := _H1.match(line)))
    title = next(titles, stem).replace("[", "(").replace("]", ")")
    return f"{lead}[{title}]({quote(name)})"


def _index_items(
    doc: _Doc, files: dict[str, str], present: dict[str, str]
) -> tuple[list[PlanItem], list[dict], set[int], set[int]]:
    """Items rebuilding the index entry list, drops, lines claimed, and the dead entry lines."""
    entries = []  # (line, drop type, drop value, lead, resolved file or None)
    for j, line in enumerate(doc.content):
        if j not in doc.protected and (m := _ENTRY.match(line)) and (target := _entry_target(m)):
            entries.append((j, target[0], target[1], m["lead"], _resolve(target[2], present)))
    covered = {e[4] for e in entries if e[4]}
    missing = [n for n in files if n != INDEX and n not in covered]
    wiki, lead = (entries[0][1] == "wikilinks", entries[0][3]) if entries else (True, "- ")
    new_lines = [_entry_line(n, files[n], wiki, lead) for n in missing]
    items: list[PlanItem] = []
    drops: list[dict] = []
    dead = [e for e in entries if not e[4]]
    live = [e for e in entries if e[4]]
    anchor = None  # the line the new entries are appended to (or that they replace)
    if new_lines:
        added = f"index entries added for {', '.join(missing)}"
        if live:
            anchor = live[-1][0]
            text = "\n".join([doc.content[anchor].rstrip(" \t"), *new_lines])
            items.append(_item(INDEX, anchor, anchor, added, "replace", text))
        elif dead:
            anchor = dead[-1][0]
            reason = f"{added}; the entry for a missing file goes"
            items.append(_item(INDEX, anchor, anchor, reason, "replace", "\n".join(new_lines)))
        else:
            last = max((j for j, line in enumerate(doc.content) if line.strip()), default=None)
            if last is not None:
                anchor = last
                kept = doc.content[last] if last in doc.protected else doc.content[last].rstrip(" \t")
                items.append(_item(INDEX, last, last, added, "replace", "\n".join([kept, "", *new_lines])))
    for j, kind, value, _lead, _file in dead:
        if j != anchor:
            items.append(_item(INDEX, j, j, f"index entry for a missing file ({value})", "delete"))
        if {"type": kind, "value": value} not in drops:
            drops.append({"type": kind, "value": value})
    dead_lines = {e[0] for e in dead}
    claimed = dead_lines | ({anchor} if anchor is not None else set())
    return items, drops, claimed, dead_lines


def _duplicate_items(name: str, doc: _Doc, claimed: set[int]) -> list[PlanItem]:
    """Delete every later verbatim copy of a paragraph, with the blank lines that precede it."""
    items = []
    first: dict[tuple[str, ...], int] = {}
    j, n = 0, len(doc.content)
    while j < n:
        if j in doc.protected or not doc.content[j].strip():
            j += 1
            continue
        start = j
        while j < n and j not in doc.protected and doc.content[j].strip():
            j += 1
        key = tuple(line.rstrip(" \t") for line in doc.content[start:j])
        lead = start
        while lead > 0 and doc.blank(lead - 1):
            lead -= 1
        span = set(range(lead, j))
        if key in first and _is_fat(key) and not span & claimed:
            reason = f"exact duplicate of the paragraph at line {first[key] + 1}"
            items.append(_item(name, lead, j - 1, reason, "delete"))
            claimed |= span
        else:
            first.setdefault(key, start)
    return items


def _is_fat(paragraph: tuple[str, ...]) -> bool:
    if sum(len(line.strip()) for line in paragraph) < MIN_DUPLICATE_CHARS:
        return False
    return not all(_STRUCTURE.match(line) for line in paragraph)


def _blank_run_items(name: str, doc: _Doc, claimed: set[int]) -> list[PlanItem]:
    items = []
    j, n = 0, len(doc.content)
    while j < n:
        if not doc.blank(j) or j in claimed:
            j += 1
            continue
        start = j
        while j < n and doc.blank(j) and j not in claimed:
            j += 1
        if j - start >= 3:
            items.append(_item(name, start, j - 1, f"{j - start} blank lines collapsed to 2", "replace", "\n"))
            claimed |= set(range(start, j))
    return items


def _trailing_items(name: str, doc: _Doc, claimed: set[int]) -> list[PlanItem]:
    items = []
    j, n = 0, len(doc.content)

    def dirty(k: int) -> bool:
        line = doc.content[k]
        return k not in doc.protected and k not in claimed and line != line.rstrip(" \t")

    while j < n:
        if not dirty(j):
            j += 1
            continue
        start = j
        while j < n and dirty(j):
            j += 1
        text = "\n".join(line.rstrip(" \t") for line in doc.content[start:j])
        items.append(_item(name, start, j - 1, "trailing whitespace stripped", "replace", text))
    return items


def _dead_links(name: str, doc: _Doc, present: dict[str, str], skip: set[int]) -> list[str]:
    notes = []
    for j, line in enumerate(doc.content):
        if j in doc.protected or j in skip:
            continue
        for m in _WIKILINK.finditer(line):
            target = m[1].split("|")[0].split("#")[0].strip()
            base = target.replace("\\", "/").rsplit("/", 1)[-1]
            if base and not _resolve(base if base.lower().endswith(".md") else base + ".md", present):
                notes.append(f"dead link [[{target}]] in {name}:{j + 1} (flagged, not edited)")
    return notes


def quick_plan(files: dict[str, str]) -> Plan:
    """The quick tier's plan for a store given as name -> text (see the module docstring)."""
    present = {name.lower(): name for name in files}
    items: list[PlanItem] = []
    drops: list[dict] = []
    notes: list[str] = []
    for name, text in files.items():
        doc = _Doc.parse(text)
        claimed: set[int] = set()
        dead_lines: set[int] = set()
        if name == INDEX:
            index_items, drops, claimed, dead_lines = _index_items(doc, files, present)
            items += index_items
        items += _duplicate_items(name, doc, claimed)
        items += _blank_run_items(name, doc, claimed)
        items += _trailing_items(name, doc, claimed)
        notes += _dead_links(name, doc, present, dead_lines)
    items.sort(key=lambda i: (i.file, i.start))
    return Plan(tuple(items), tuple(drops), WASHER, tuple(notes))
