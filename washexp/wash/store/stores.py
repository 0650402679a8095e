"""Load and validate wash stores (format: ``fixtures/wash/README.md``).

A store is a folder: a ``MEMORY.md`` index, topic ``*.md`` files, and ``expected.json``, the
ground truth in CoalWash's schema. A store is validated whole before anything runs; the first
problem found is raised as a :class:`~washexp.errors.FixtureError` naming the file and the field.
The content rules use the scorer's own matching rule (``norm(needle) in norm(joined(files))``),
so a store that loads is a store the scorer can score.

Only the scorer, this loader and the benchmark operator read ``expected.json``; a washer never does.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from washexp.errors import ConfigError, FixtureError
from washexp.hashing import sha256_bytes, tree_digest
from washexp.inputs import load_json, named_folder
from washexp.needles import contains, finder, norm
from washexp.registry import unknown_name
from washexp.wash.coalwash.files import joined, read_md
from washexp.wash.store.apply import refuse_torn

FAT_CLASSES = ("duplicate", "near-dup", "over-verbose", "superseded", "done-point-in-time", "retired-key", "hedging")
"""The fat classes of CoalWash's fixtures; any other class is a typo."""

INDEX = "MEMORY.md"
EXPECTED = "expected.json"
ID_FORM = {"muscle": re.compile(r"m\d{2,}"), "fat": re.compile(r"f\d{2,}")}
_JS_WS_RUN = re.compile("[\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]+")


@dataclass(frozen=True)
class Needle:
    """One planted needle: muscle (``cls`` is None) must survive a wash, fat must go."""

    id: str
    needle: str
    note: str
    cls: str | None = None


@dataclass(frozen=True)
class Expected:
    """A store's ground truth, as ``expected.json`` states it."""

    fixture: str
    description: str
    expect_no_op: bool
    muscle: tuple[Needle, ...]
    fat: tuple[Needle, ...]

    def to_json(self) -> dict[str, Any]:
        """The CoalWash schema, keys in its order (what ``expected.json`` holds)."""

        def entry(n: Needle) -> dict[str, str]:
            out = {"id": n.id, "needle": n.needle}
            if n.cls is not None:
                out["class"] = n.cls
            out["note"] = n.note
            return out

        return {
            "fixture": self.fixture,
            "description": self.description,
            "expectNoOp": self.expect_no_op,
            "muscle": [entry(n) for n in self.muscle],
            "fat": [entry(n) for n in self.fat],
        }


@dataclass(frozen=True)
class Store:
    name: str
    path: Path
    files: dict[str, str]
    """name -> text of the top-level ``*.md`` files, in the scorer's order (what a washer washes)."""
    expected: Expected
    manifest: dict[str, str]
    """path -> sha256 of every file in the folder, ``expected.json`` and subfolders included, as
    loaded (a run's manifest names these, never a second read of the user's folder)."""

    @property
    def digest(self) -> str:
        """The store's identity: its content, never its path."""
        return tree_digest(self.manifest)


def dump_expected(expected: Expected) -> str:
    """The canonical text of an ``expected.json``: two-space indent, UTF-8 kept, final newline."""
    return json.dumps(expected.to_json(), indent=2, ensure_ascii=False) + "\n"


def _kind(value: Any) -> str:
    names = {bool: "a boolean", str: "a string", list: "a list", dict: "an object", type(None): "null"}
    return names.get(type(value), "a number")


def _need(value: Any, typ: type, path: Path, field: str | None) -> Any:
    if not isinstance(value, typ):
        raise FixtureError(path, field, f"expected {_kind(typ())}, got {_kind(value)}")
    return value


def _optional(obj: dict, key: str, typ: type, default: Any) -> Any:
    """An optional field the scorer does not read: its value when of the right type, else ``default``."""
    value = obj.get(key, default)
    return value if isinstance(value, typ) else default


def parse_expected(data: Any, path: Path) -> Expected:
    """Check ``data`` (parsed JSON) against what CoalWash's scorer reads and return it typed.

    Required, as ``score.mjs`` needs them: ``muscle`` and ``fat`` lists of objects, each with a
    string ``id`` and ``needle``. Everything else is optional and other keys are ignored, as the
    scorer ignores them: ``fixture`` (default: the folder's name), ``description``, ``expectNoOp``
    (a no-op is expected only when it is ``true``), an entry's ``note`` and a fat entry's
    ``class`` (a known fat class when given). Our own rules on top: ids ``m01``.. / ``f01``..,
    each used once (records name a needle by its id); needles hold a non-whitespace character; a
    store that expects a no-op plants no fat.
    """
    _need(data, dict, path, None)
    for kind in ("muscle", "fat"):
        if kind not in data:
            raise FixtureError(path, kind, "missing (the scorer reads each entry's id and needle from it)")
    fixture = _optional(data, "fixture", str, "").strip() and data["fixture"]
    fixture = fixture or path.parent.name
    description = _optional(data, "description", str, "")
    no_op = data.get("expectNoOp") is True
    seen: dict[str, str] = {}
    parsed: dict[str, tuple[Needle, ...]] = {}
    for kind in ("muscle", "fat"):
        entries = []
        for i, entry in enumerate(_need(data[kind], list, path, kind)):
            at = f"{kind}[{i}]"
            _need(entry, dict, path, at)
            for key in ("id", "needle"):
                if key not in entry:
                    raise FixtureError(path, f"{at}.{key}", "missing")
                _need(entry[key], str, path, f"{at}.{key}")
            nid, needle = entry["id"], entry["needle"]
            if not ID_FORM[kind].fullmatch(nid):
                raise FixtureError(path, f"{at}.id", f"{nid!r} is not of the form {kind[0]}01, {kind[0]}02, ...")
            if nid in seen:
                raise FixtureError(path, f"{at}.id", f"{nid!r} is used twice (first by {seen[nid]})")
            seen[nid] = at
            if not norm(needle).strip(" "):
                raise FixtureError(path, f"{at}.needle", "is empty (a needle needs a non-whitespace character)")
            cls = _optional(entry, "class", str, None) if kind == "fat" else None
            if cls is not None and cls not in FAT_CLASSES:
                raise FixtureError(path, f"{at}.class", unknown_name("fat class", cls, list(FAT_CLASSES)))
            entries.append(Needle(nid, needle, _optional(entry, "note", str, ""), cls))
        parsed[kind] = tuple(entries)
    if no_op and parsed["fat"]:
        raise FixtureError(path, "fat", f"expectNoOp is true, so the store plants no fat (found {len(parsed['fat'])})")
    return Expected(fixture, description, no_op, parsed["muscle"], parsed["fat"])


def _line_spans(text: str) -> tuple[str, list[int]]:
    """``norm(text)`` and, for each of its characters, the 1-based line of the source character
    it came from (a collapsed whitespace run maps to the line where the run starts)."""
    out: list[str] = []
    lines: list[int] = []
    line, pos = 1, 0
    for m in _JS_WS_RUN.finditer(text):
        for ch in text[pos : m.start()]:
            out.append(ch)
            lines.append(line)
        out.append(" ")
        lines.append(line)  # text[pos:m.start()] holds no whitespace, so the run starts on `line`
        line += text.count("\n", m.start(), m.end())
        pos = m.end()
    for ch in text[pos:]:
        out.append(ch)
        lines.append(line)
    return "".join(out), lines


def _occurrences(normed: str, lines: list[int], needle: str) -> list[range]:
    """The source lines each occurrence of the normalized ``needle`` spans, one range per occurrence."""
    found = []
    start = normed.find(needle)
    while start >= 0:
        found.append(range(lines[start], lines[start + len(needle) - 1] + 1))
        start = normed.find(needle, start + 1)
    return found


def _trapped(files: dict[str, str], expected: Expected) -> tuple[str, int, str, str] | None:
    """The first (file, line, fat id, muscle id) where cutting a fat needle's line would lose a
    muscle needle: CoalWash's rule, a muscle needle on a fat line is lost only when every copy of
    it in the store shares a line with fat (a copy elsewhere survives the cut)."""
    order = {name: i for i, name in enumerate(files)}
    fat_at: dict[tuple[str, int], str] = {}  # (file, line) -> the first fat needle on it
    copies: dict[str, list[list[tuple[str, int]]]] = {m.id: [] for m in expected.muscle}  # the lines of each copy
    for name, text in files.items():
        normed, lines = _line_spans(text)
        for f in expected.fat:
            for span in _occurrences(normed, lines, norm(f.needle)):
                for line in span:
                    fat_at.setdefault((name, line), f.id)
        for m in expected.muscle:
            copies[m.id] += [[(name, line) for line in span] for span in _occurrences(normed, lines, norm(m.needle))]
    trapped = []
    for mid, spans in copies.items():
        if spans and all(any(at in fat_at for at in span) for span in spans):
            rank, line, name = min((order[n], line, n) for span in spans for n, line in span if (n, line) in fat_at)
            trapped.append((rank, line, mid, name))
    if not trapped:
        return None
    _, line, mid, name = min(trapped)
    return name, line, fat_at[(name, line)], mid


def _check_index(files: dict[str, str], folder: Path) -> None:
    if INDEX not in files:
        raise FixtureError(folder / INDEX, None, "missing: every store has a MEMORY.md index")


def check_contents(files: dict[str, str], expected: Expected, folder: Path, where: Path | None = None) -> None:
    """The content rules, on ``files`` (name -> text, the scorer's order) under ``folder``, with
    ``expected`` read from ``where`` (default: the folder's ``expected.json``).

    ``MEMORY.md`` exists; every needle is in the store under the scorer's matching rule; no
    needle is a substring of another (after ``norm``: the scorer could not tell them apart);
    no line holds both a fat needle and a muscle needle that is nowhere else in the store
    (cutting the fat would cut the muscle; see :func:`_trapped`).
    """
    _check_index(files, folder)
    where = where or folder / EXPECTED
    in_store = finder(joined(files))
    labelled = [("muscle", i, n) for i, n in enumerate(expected.muscle)]
    labelled += [("fat", i, n) for i, n in enumerate(expected.fat)]
    for kind, i, n in labelled:
        if not in_store(n.needle):
            raise FixtureError(
                where, f"{kind}[{i}].needle", f"{n.needle!r} is not in the store's .md files (whitespace-normalized)"
            )
    for kind, i, n in labelled:
        for _, _, other in labelled:
            if other is not n and contains(other.needle, n.needle):
                raise FixtureError(
                    where, f"{kind}[{i}].needle", f"{n.needle!r} is a substring of {other.id}'s needle {other.needle!r}"
                )
    trapped = _trapped(files, expected)
    if trapped is not None:
        name, line, fid, mid = trapped
        raise FixtureError(
            folder / name,
            f"line {line}",
            f"holds fat needle {fid} and muscle needle {mid}, which is nowhere else in the store (cut one, lose both)",
        )


def _manifest(folder: Path) -> dict[str, str]:
    """Content only, never the path: a store copied anywhere keeps its digest. A symlink counts
    as its target's name (it is not followed: a user's store is untrusted)."""
    entries = {}
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        if p.is_symlink():
            entries[rel] = sha256_bytes(b"symlink -> " + os.fsencode(os.readlink(p)))
        elif p.is_file():
            entries[rel] = sha256_bytes(p.read_bytes())
    return entries


def load_expected(path: Path) -> Expected:
    """Read and check one ``expected.json``."""
    if not os.path.lexists(path):
        raise FixtureError(
            path, None, "missing: a scored store states its ground truth here (see docs/your-own-store.md)"
        )
    return parse_expected(load_json(path, inside=path.name == EXPECTED), path)


def store_files(folder: str | Path) -> dict[str, str]:
    """The store's ``*.md`` files, checked as every store is before any work (the rules that need
    no ground truth: a folder, no pending journal, UTF-8 text, a ``MEMORY.md`` index)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FixtureError(folder, None, "not a folder")
    refuse_torn(folder)
    files = read_md(folder)  # plain NAME.md names, UTF-8, each problem named
    _check_index(files, folder)
    return files


def load_store(folder: str | Path) -> Store:
    """Load one store folder, validated whole (see :func:`parse_expected`, :func:`check_contents`)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FixtureError(folder, None, "not a folder")
    expected = load_expected(folder / EXPECTED)
    files = store_files(folder)
    check_contents(files, expected, folder)
    return Store(folder.name, folder, files, expected, _manifest(folder))


def store_names(root: str | Path) -> list[str]:
    """The stores under ``root``: its subfolders, except hidden or ``_``-prefixed ones."""
    root = Path(root)
    if not root.is_dir():
        raise ConfigError(f"{root}: no such stores folder")
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))


def load_stores(root: str | Path, selection: Any = "all", cwd: str | Path | None = None) -> list[Store]:
    """Load the selected stores (``"all"`` under ``root``, or one entry, or a list), every one
    validated before any is returned. An entry is a bare name under ``root`` or a path to a store
    folder, relative to ``cwd`` (default: this process's; see :func:`washexp.inputs.named_folder`).
    Runs and records name a store by its folder name, its identity is its digest: two entries
    that are one folder, two stores with one name, or two with one content are refused."""
    root = Path(root)
    known = store_names(root)
    entries = known if selection == "all" else [selection] if isinstance(selection, str) else list(selection)
    if not entries:
        raise ConfigError(f"{root}: no store selected")
    folders = [named_folder("store", e, root, known, Path(cwd or os.getcwd())) for e in entries]
    if len(set(folders)) != len(folders):
        raise ConfigError(f"store selection {entries}: a store is named twice")
    by_name: dict[str, Path] = {}
    for folder in folders:
        if by_name.setdefault(folder.name, folder) != folder:
            raise ConfigError(
                f"store selection: {by_name[folder.name]} and {folder} are both named {folder.name!r} "
                "(runs and records name a store by its folder name: rename one)"
            )
    stores = [load_store(folder) for folder in folders]
    by_digest: dict[str, Store] = {}
    for store in stores:
        first = by_digest.setdefault(store.digest, store)
        if first is not store:
            raise ConfigError(f"store selection: {first.path} and {store.path} are the same store (same content)")
    return stores
