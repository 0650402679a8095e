"""The reference washer: deterministic, rule-based, offline; a baseline whose score means something.

It reads only the store's ``*.md`` texts it is given (never the ground-truth manifest, never a
file on disk) and proposes, in this order of
precedence (a unit claimed by one rule is left alone by the later ones, so items never overlap):

d. **Scratch files.** A file whose name starts with ``scratch`` (any case) or whose frontmatter
   says ``type: scratch`` is deleted whole (``delete-file``), and so is every ``MEMORY.md`` list
   entry linking to it (``[[stem]]`` or ``[..](name.md)``): class ``done-point-in-time``.
c. **Explicit done / superseded markers.** A paragraph or list item holding a done marker (a
   ``[x]`` checkbox, ``DONE`` in capitals, ``(done)``, or every entry of a section headed
   ``Done`` / ``Completed`` / ``Finished``) is deleted as ``done-point-in-time``; one holding a
   superseded marker (:data:`SUPERSEDED_MARKERS`: ``superseded by``, ``no longer applies``, ``was
   replaced by``...) or struck through whole (``~~...~~``) as ``superseded``. A partly struck line
   loses only its struck spans (``replace``). ``deprecated`` is *not* a marker: a deprecated thing
   is still live until its removal date.
a. **Near-duplicates.** Every paragraph and list item is a set of ``shingle_words``-word shingles
   (lower-cased words, surrounding punctuation stripped; a unit shorter than that is one
   shingle). A unit whose Jaccard similarity with an earlier surviving unit is at least
   ``near_dup_jaccard`` is deleted, class ``duplicate`` (the reason says ``duplicate`` for the
   same words, ``near-dup`` otherwise, and names the copy kept). **Which copy goes:** the later
   one in reading order (files in the scorer's order, then lines), except that a pinned file's
   units are read first, so a copy of pinned text goes wherever it sits. Units are compared
   within a file and across files alike.
b. **Padding.** Each line is split into sentences (at ``.!?`` and their CJK forms followed by a
   space, within one line). A sentence holding a phrase of :data:`PADDING_PHRASES` (matched
   case-insensitively at word boundaries) and no structured value the fidelity gate inventories
   (number, date, version, link, wikilink, code span, quote) is padding: the line is rewritten
   without it (``replace``), or deleted when nothing else is left. Class ``over-verbose``.

Never touched: a file with ``pinned: true`` frontmatter, lines inside frontmatter or a fenced
code block, headings (except one whose whole section a plan deletes: it goes with the section),
tables, and ``MEMORY.md``'s list entries that link to a file (only rule d removes those). A
deleted unit takes the blank lines just above it along, so no gap is left. Items whose target
(:func:`washexp.wash.washer.target_of`) an earlier wash kept are skipped and counted in ``notes``.

The plan's ``approved_drops`` are the candidates the gate would show for the whole plan
(:func:`washexp.wash.washers.entailed_drops`); only an operator's approval makes them pass.

This washer has no idea which text is load-bearing: twins differing by one token are as
similar to it as a restatement, and a hedge-marked sentence without a structured value can
still carry a lesson. It is meant to fall into such traps; the gates and the score show it.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from washexp.errors import ConfigError
from washexp.wash.coalwash.inventory import token_lists
from washexp.wash.coalwash.quick import protected_lines
from washexp.wash.plan import Plan, PlanItem, line_ending, split_lines
from washexp.wash.store.apply import is_pinned
from washexp.wash.washer import Keep, Proposal, target_of
from washexp.wash.washers import entailed_drops

NAME = "reference"
INDEX = "MEMORY.md"

PADDING_PHRASES: tuple[str, ...] = (
    # signposting and restating
    "as mentioned",
    "as already mentioned",
    "as noted above",
    "as noted earlier",
    "as already noted",
    "as stated above",
    "as discussed above",
    "as we have said",
    "to reiterate",
    "to restate",
    "needless to say",
    "it goes without saying",
    "once more",
    # throat-clearing
    "to be honest",
    "in my humble opinion",
    "for what it's worth",
    "for what it is worth",
    "it might be worth",
    "it may be worth",
    "perhaps worth",
    "it should be noted that",
    "it is worth noting",
    "it is worth mentioning",
    "at the end of the day",
    "all things considered",
    # hedges
    "might possibly",
    "could perhaps",
    "may or may not",
    "more or less",
    "broadly speaking",
    "generally speaking",
    "in principle",
    "give or take",
    "so to speak",
    "as it were",
    "at some point",
)
"""Filler and hedging phrases (lower case). A sentence holding one and no structured value is padding."""

SUPERSEDED_MARKERS: tuple[str, ...] = (
    "superseded by",
    "no longer applies",
    "no longer apply",
    "no longer valid",
    "no longer true",
    "no longer used",
    "no longer in use",
    "was replaced by",
    "has been replaced by",
    "is obsolete",
    "(obsolete)",
    "(superseded)",
)
"""Superseded markers (lower case, matched case-insensitively)."""

DONE_HEADINGS = frozenset({"done", "completed", "finished"})
"""A section under a heading with one of these names holds done entries."""

_PHRASE_RX = re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, PADDING_PHRASES)) + r")(?!\w)", re.IGNORECASE)
_SUPERSEDED_RX = re.compile("|".join(map(re.escape, SUPERSEDED_MARKERS)), re.IGNORECASE)
_DONE_RX = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\[[xX]\](?:\s|$)|\bDONE\b|\((?i:done)\)")
_STRUCK = re.compile(r"~~[^~\n]+~~")
_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t#]*$")
_LIST = re.compile(r"^(\s*(?:[-*+]|\d+[.)])\s+)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])")
_INDEX_ENTRY = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\[\[[^\[\]\n]+\]\]|\[[^\[\]\n]*\]\([^()\s]+\))")
_SCRATCH_TYPE = re.compile(r"""^type[ \t]*:[ \t]*["']?scratch["']?[ \t]*(?:#.*)?$""", re.IGNORECASE)
_PUNCT = ".,;:!?()[]{}<>\"'`*_“”‘’「」『』（）、。，；：！？"


# --- a file as units ----------------------------------------------------------------------------


@dataclass
class Unit:
    """A paragraph, list item, heading or table: 0-based lines ``lo..hi`` inclusive of one file."""

    file: str
    lo: int
    hi: int
    kind: str  # "para" | "item" | "heading" | "table"
    level: int = 0  # heading level
    title: str = ""  # heading text
    pinned: bool = False

    def text(self, doc: Doc) -> str:
        return "\n".join(doc.content[self.lo : self.hi + 1])


@dataclass
class Doc:
    """One file: its lines without endings, the lines never edited, and its units in order."""

    name: str
    content: list[str]
    protected: set[int]
    units: list[Unit] = field(default_factory=list)
    pinned: bool = False

    def blank(self, j: int) -> bool:
        return j not in self.protected and not self.content[j].strip()


def parse(name: str, text: str) -> Doc:
    """Split a file into units: a heading is one line, a list item runs over its indented
    continuation lines, a paragraph runs to a blank line, heading, list item or protected line."""
    content = [line[: len(line) - len(line_ending(line))] for line in split_lines(text)]
    doc = Doc(name, content, protected_lines(content), pinned=is_pinned(text))
    j = 0
    while j < len(content):
        if doc.blank(j) or j in doc.protected:
            j += 1
            continue
        line = content[j]
        if h := _HEADING.match(line):
            doc.units.append(Unit(name, j, j, "heading", len(h.group(1)), (h.group(2) or "").strip(), doc.pinned))
            j += 1
            continue
        kind = "item" if _LIST.match(line) else "table" if line.lstrip().startswith("|") else "para"
        k = j + 1
        while k < len(content) and not doc.blank(k) and k not in doc.protected and not _HEADING.match(content[k]):
            if _LIST.match(content[k]) or (kind == "item" and not content[k][:1].isspace()):
                break
            k += 1
        doc.units.append(Unit(name, j, k - 1, kind, pinned=doc.pinned))
        j = k
    return doc


def _prose(doc: Doc, unit: Unit) -> bool:
    """A paragraph or list item that is not an index entry: what rules a-c read."""
    return unit.kind in ("para", "item") and not (doc.name == INDEX and _INDEX_ENTRY.match(doc.content[unit.lo]))


def _editable(doc: Doc, unit: Unit) -> bool:
    """Rules a-c may cut this unit: prose in an unpinned file."""
    return not doc.pinned and _prose(doc, unit)


# --- the rules ----------------------------------------------------------------------------------


@dataclass
class Edit:
    """A proposed edit on 0-based lines ``lo..hi`` of one file (``text`` for a replace)."""

    file: str
    lo: int
    hi: int
    cls: str
    reason: str
    op: str = "delete"
    text: str | None = None
    unit: Unit | None = None  # the whole unit a delete removes (for blank and heading cleanup)
    needs: str | None = None  # the file whose delete this edit follows (a scratch file's index entry)

    def item(self) -> PlanItem:
        return PlanItem(self.file, self.lo + 1, self.hi + 1, self.cls, self.reason, self.op, self.text)


def is_scratch(name: str, text: str) -> bool:
    """A scratch file: its name starts with ``scratch`` or its frontmatter says ``type: scratch``."""
    if name.lower().startswith("scratch"):
        return True
    doc_lines = text.lstrip("\ufeff").splitlines()
    if not doc_lines or doc_lines[0].rstrip() != "---":
        return False
    for line in doc_lines[1:]:
        if line.rstrip() in ("---", "..."):
            return False
        if _SCRATCH_TYPE.match(line.rstrip("\r")):
            return True
    return False


def _links_to(line: str, name: str) -> bool:
    stem = re.escape(name[:-3])
    wiki = rf"\[\[\s*{stem}(?:\.md)?\s*(?:[|#][^\]]*)?\]\]"
    md = rf"\]\(\s*<?(?:\./)?{re.escape(name)}(?:#[^)\s]*)?>?\s*\)"
    return re.search(f"{wiki}|{md}", line, re.IGNORECASE) is not None


def scratch_edits(docs: dict[str, Doc], texts: dict[str, str]) -> tuple[list[Edit], list[str]]:
    """Rule d: each unpinned scratch file goes whole, with the ``MEMORY.md`` entries linking to it."""
    edits, notes = [], []
    for name, doc in docs.items():
        if name == INDEX or doc.pinned or not is_scratch(name, texts[name]):
            continue
        edits.append(Edit(name, 0, 0, "done-point-in-time", "scratch file: point-in-time notes", "delete-file"))
        index = docs.get(INDEX)
        if index is None:
            continue
        for unit in index.units:
            if unit.kind == "item" and _links_to(index.content[unit.lo], name):
                if index.pinned:
                    notes.append(f"{INDEX} is pinned: its entry for scratch file {name} stays")
                    continue
                reason = f"index entry of the deleted scratch file {name}"
                edits.append(Edit(INDEX, unit.lo, unit.hi, "done-point-in-time", reason, unit=unit, needs=name))
    return edits, notes


def _done_sections(doc: Doc) -> set[int]:
    """Indices of units in sections headed Done / Completed / Finished (to the next heading of the
    same or a higher level)."""
    out: set[int] = set()
    level = 0
    for i, unit in enumerate(doc.units):
        if unit.kind == "heading":
            if level and unit.level <= level:
                level = 0
            if not level and unit.title.lower().rstrip(":") in DONE_HEADINGS:
                level = unit.level
        elif level:
            out.add(i)
    return out


def marker_edits(doc: Doc, free: Iterable[int]) -> list[Edit]:
    """Rule c on the free units of one file."""
    edits = []
    done_section = _done_sections(doc)
    for i in free:
        unit = doc.units[i]
        text = unit.text(doc)
        if i in done_section or _DONE_RX.search(text):
            edits.append(Edit(doc.name, unit.lo, unit.hi, "done-point-in-time", "explicit done marker", unit=unit))
        elif superseded := _SUPERSEDED_RX.search(text):
            marker = superseded.group(0)
            edits.append(Edit(doc.name, unit.lo, unit.hi, "superseded", f"superseded marker {marker!r}", unit=unit))
        elif _STRUCK.search(text):
            edits += _struck_edits(doc, unit)
    return edits


def _struck_edits(doc: Doc, unit: Unit) -> list[Edit]:
    """A unit struck through whole goes; otherwise each line loses its struck spans."""
    rest = [_STRUCK.sub("", doc.content[j]) for j in range(unit.lo, unit.hi + 1)]
    if all(not _LIST.sub("", r).strip(" \t" + _PUNCT) for r in rest):
        return [Edit(doc.name, unit.lo, unit.hi, "superseded", "struck through (~~...~~)", unit=unit)]
    edits = []
    for j in range(unit.lo, unit.hi + 1):
        line = doc.content[j]
        if _STRUCK.search(line):
            new = re.sub(r"[ \t]*~~[^~\n]+~~", "", line)
            edits.append(Edit(doc.name, j, j, "superseded", "struck-through text", "replace", new))
    return edits


def words(text: str) -> list[str]:
    """Lower-cased words with surrounding punctuation stripped; tokens without a letter or digit drop."""
    out = []
    for tok in text.lower().split():
        tok = tok.strip(_PUNCT)
        if any(ch.isalnum() for ch in tok):
            out.append(tok)
    return out


def shingles(tokens: list[str], k: int) -> frozenset[tuple[str, ...]]:
    """The set of ``k``-word shingles; a unit shorter than ``k`` words is one shingle."""
    if len(tokens) < k:
        return frozenset([tuple(tokens)]) if tokens else frozenset()
    return frozenset(tuple(tokens[i : i + k]) for i in range(len(tokens) - k + 1))


def _prefix_length(size: int, threshold: float) -> int:
    """How many of a set's shingles, in the global order, must be indexed and probed so that any
    two sets with Jaccard >= ``threshold`` share one of them (prefix filtering). Jaccard >= t
    implies an overlap of at least t * |x| shingles, so the first |x| - ceil(t * |x|) + 1 of x and
    of y intersect; this takes floor (a shingle more where t * |x| is not whole, and safe against
    rounding)."""
    return min(size, size - math.floor(threshold * size - 1e-9) + 1)


def near_dup_edits(
    docs: dict[str, Doc], free: dict[str, list[int]], shingle_words: int, threshold: float, all_pairs: bool = False
) -> list[Edit]:
    """Rule a over the free units of every file (pinned files' units are compared, never cut).

    Each unit is compared with the earlier surviving units that share a shingle of its *prefix*:
    its rarest shingles (counted over all the units), as many as :func:`_prefix_length` says.
    Every unit at or above the threshold is among them (the prefix-filter argument), so the
    result is the all-pairs one; but a shingle most units share (a boilerplate opening) no
    longer makes every unit a candidate of every other: near-linear instead of quadratic.
    ``all_pairs`` indexes and probes every shingle instead: the quadratic pass it must equal."""
    order = [(d, i) for d in docs.values() if d.pinned for i, u in enumerate(d.units) if _prose(d, u)]
    order += [(docs[name], i) for name, idx in free.items() for i in idx]
    units = []
    for doc, i in order:
        unit = doc.units[i]
        toks = words(unit.text(doc))
        sh = shingles(toks, shingle_words)
        if sh:
            units.append((doc, unit, toks, sh))
    counts = Counter(s for *_, sh in units for s in sh)
    rank = {s: r for r, s in enumerate(sorted(counts, key=counts.__getitem__))}  # ties: first seen first
    kept: list[tuple[Doc, Unit, frozenset, list[str]]] = []
    by_shingle: dict[tuple[str, ...], list[int]] = {}
    edits = []
    for doc, unit, toks, sh in units:
        prefix = sh if all_pairs else sorted(sh, key=rank.__getitem__)[: _prefix_length(len(sh), threshold)]
        best = None
        for k in sorted({k for s in prefix for k in by_shingle.get(s, ())}):
            other = kept[k][2]
            jac = len(sh & other) / len(sh | other)
            if jac >= threshold and (best is None or jac > best[0]):
                best = (jac, k)
        if best is not None and not doc.pinned:
            jac, k = best
            odoc, ounit, _, otoks = kept[k]
            what = "duplicate" if toks == otoks else f"near-dup (Jaccard {jac:.2f})"
            reason = f"{what} of {odoc.name}:{ounit.lo + 1}"
            edits.append(Edit(doc.name, unit.lo, unit.hi, "duplicate", reason, unit=unit))
            continue
        for s in prefix:
            by_shingle.setdefault(s, []).append(len(kept))
        kept.append((doc, unit, sh, toks))
    return edits


def sentences(text: str) -> list[str]:
    """The sentences of one line (split after ``.!?`` + space, or after ``。！？``)."""
    return [s for s in _SENTENCE_END.split(text) if s.strip()]


def is_padding(sentence: str) -> bool:
    """A padding phrase and no structured value (nothing the fidelity gate would count as a drop)."""
    return bool(_PHRASE_RX.search(sentence)) and not any(token_lists(sentence).values())


def padding_edits(doc: Doc, free: Iterable[int]) -> list[Edit]:
    """Rule b on the free units of one file."""
    edits = []
    for i in free:
        unit = doc.units[i]
        for j in range(unit.lo, unit.hi + 1):
            line = doc.content[j]
            item = _LIST.match(line) if j == unit.lo and unit.kind == "item" else None
            lead = item.group(1) if item else ""
            if not lead:
                lead = line[: len(line) - len(line.lstrip())]
            parts = sentences(line[len(lead) :])
            kept = [s.strip() for s in parts if not is_padding(s)]
            if len(kept) == len(parts):
                continue
            if kept:
                edits.append(Edit(doc.name, j, j, "over-verbose", "padding sentence", "replace", lead + " ".join(kept)))
            elif unit.lo == unit.hi:
                edits.append(Edit(doc.name, j, j, "over-verbose", "padding: nothing but filler", unit=unit))
            else:
                edits.append(Edit(doc.name, j, j, "over-verbose", "padding line: nothing but filler"))
    return edits


# --- edits into a plan --------------------------------------------------------------------------


def _tidy(doc: Doc, edits: list[Edit]) -> None:
    """Whole-unit deletes take the blank lines above them; a heading whose section is deleted whole
    goes with the section's first delete."""
    gone = {(e.unit.lo, e.unit.hi) for e in edits if e.op == "delete" and e.unit is not None}
    first: dict[tuple[int, int], Edit] = {}
    for e in sorted(edits, key=lambda e: e.lo):
        if e.op == "delete" and e.unit is not None:
            first.setdefault((e.unit.lo, e.unit.hi), e)
    units = doc.units
    for h, head in enumerate(units):
        if head.kind != "heading" or head.pinned:
            continue
        section = []
        for u in units[h + 1 :]:
            if u.kind == "heading":
                break
            section.append(u)
        if section and all((u.lo, u.hi) in gone for u in section):
            e = first[(section[0].lo, section[0].hi)]
            e.lo, e.reason = head.lo, e.reason + " (and its now-empty heading)"
    for e in edits:
        if e.op == "delete" and e.unit is not None:
            while e.lo > 0 and doc.blank(e.lo - 1):
                e.lo -= 1


def _order(name: str) -> bytes:
    return name.encode("utf-16-be")


class ReferenceWasher:
    """The rule-based reference washer (see the module docstring for its rules)."""

    name = NAME

    def __init__(self, *, shingle_words: int = 4, near_dup_jaccard: float = 0.5):
        if isinstance(shingle_words, bool) or not isinstance(shingle_words, int) or shingle_words < 1:
            raise ConfigError(f"washer reference: shingle_words must be an integer >= 1, got {shingle_words!r}")
        if isinstance(near_dup_jaccard, bool) or not isinstance(near_dup_jaccard, int | float):
            raise ConfigError(f"washer reference: near_dup_jaccard must be a number, got {near_dup_jaccard!r}")
        if not 0 < near_dup_jaccard <= 1:
            raise ConfigError(f"washer reference: near_dup_jaccard must be in (0, 1], got {near_dup_jaccard!r}")
        self.shingle_words = shingle_words
        self.near_dup_jaccard = float(near_dup_jaccard)

    def edits(self, files: dict[str, str]) -> tuple[list[Edit], list[str]]:
        """Every rule's edits on ``files``, in precedence order (d, c, a, b), none overlapping."""
        docs = {name: parse(name, text) for name, text in files.items()}
        edits, notes = scratch_edits(docs, files)

        def by_file() -> dict[str, list[Edit]]:
            """The edits so far, by file: grouped once per rule, never scanned once per file (that
            was files x edits: a 1 MB store of 2,000 notes spent seconds here)."""
            out: dict[str, list[Edit]] = {}
            for e in edits:
                out.setdefault(e.file, []).append(e)
            return out

        def free(doc: Doc, mine: list[Edit]) -> list[int]:
            """The units of ``doc`` no earlier rule claimed (``mine``: its edits so far)."""
            if any(e.op == "delete-file" for e in mine):
                return []
            lines = {j for e in mine for j in range(e.lo, e.hi + 1)}
            return [i for i, u in enumerate(doc.units) if _editable(doc, u) and lines.isdisjoint(range(u.lo, u.hi + 1))]

        claimed = by_file()  # a rule's edits of one file never change another file's free units
        for doc in docs.values():
            edits += marker_edits(doc, free(doc, claimed.get(doc.name, [])))
        claimed = by_file()
        free_units = {n: free(d, claimed.get(n, [])) for n, d in docs.items()}
        edits += near_dup_edits(docs, free_units, self.shingle_words, self.near_dup_jaccard)
        claimed = by_file()
        for doc in docs.values():
            edits += padding_edits(doc, free(doc, claimed.get(doc.name, [])))
        claimed = by_file()
        for doc in docs.values():
            _tidy(doc, [e for e in claimed.get(doc.name, []) if e.op != "delete-file"])
        return edits, notes

    def propose(self, files: dict[str, str], keeps: tuple[Keep, ...] = (), scratch: Path | None = None) -> Proposal:
        """The plan for ``files``: sorted by file (scorer order) and line. An item whose target was
        kept is skipped, and so is a kept scratch file's index entry (it still points at a file)."""
        edits, notes = self.edits(files)
        kept_targets = {k.target for k in keeps}
        skipped = [e for e in edits if target_of(e.item(), files) in kept_targets]
        kept_files = {e.file for e in skipped if e.op == "delete-file"}
        seen = {id(e) for e in skipped}  # by identity, in a set: a list scan per edit was quadratic
        skipped += [e for e in edits if e.needs in kept_files and id(e) not in seen]
        if skipped:
            notes.append(f"{len(skipped)} item(s) skipped: an earlier wash kept their target")
        gone = {id(s) for s in skipped}
        live = [e.item() for e in edits if id(e) not in gone]
        items = sorted(live, key=lambda it: (_order(it.file), it.start, it.end))
        counts: dict[str, int] = {}
        for it in items:
            counts[it.cls] = counts.get(it.cls, 0) + 1
        summary = ", ".join(f"{n} {c}" for c, n in sorted(counts.items())) or "nothing to propose"
        notes.insert(0, f"reference washer: {summary}")
        plan = Plan(tuple(items), entailed_drops(files, items), NAME, tuple(notes))
        return Proposal(plan, cost_tokens=0, notes=tuple(notes))
