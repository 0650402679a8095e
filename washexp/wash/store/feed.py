"""A scripted growth feed for the sawtooth measurement (format: ``fixtures/wash-feed/README.md``).

A feed folder holds ``start/`` (a store: ``MEMORY.md``, topic files, ``expected.json``) and
``sessions.yaml``: session k appends labelled chunks to topic files, to ``MEMORY.md``, or as new
files with an index line in ``MEMORY.md``, and may relabel an earlier muscle needle as superseded
fat. The store after N sessions and its cumulative ``expected.json`` are a pure function of the
feed and N. Command line::

    washexp feed FEED --sessions N --out DIR

FEED is a path to a feed folder or a bare name under ``<project>/fixtures/wash-feed/``.
Exit codes: 0 written; 1 could not finish (I/O); 2 a usage or input error found before any write.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from washexp.errors import USAGE, ConfigError, FixtureError, Parser, WashexpError, fail
from washexp.inputs import is_path, load_yaml, named_folder
from washexp.needles import finder
from washexp.project import find_root
from washexp.registry import unknown_name
from washexp.wash.store.stores import (
    EXPECTED,
    FAT_CLASSES,
    ID_FORM,
    INDEX,
    Expected,
    Needle,
    Store,
    check_contents,
    dump_expected,
    load_store,
)

SESSIONS = "sessions.yaml"
START = "start"
_TOP_KEYS = ("feed", "description", "sessions")
_SESSION_KEYS = ("id", "note", "chunks", "supersede")
_CHUNK_KEYS = ("file", "label", "class", "text", "needles", "new", "index")
_NEEDLE_KEYS = ("id", "needle", "note")
_SUPERSEDE_KEYS = ("muscle", "as", "note")


@dataclass(frozen=True)
class Chunk:
    """Text appended to ``file`` (created when ``new``, its ``index`` line appended to MEMORY.md)."""

    file: str
    label: str
    cls: str | None
    text: str
    needles: tuple[Needle, ...]
    new: bool = False
    index: str | None = None


@dataclass(frozen=True)
class Supersede:
    """From this session on, muscle needle ``muscle`` counts as fat ``as_id`` of class superseded."""

    muscle: str
    as_id: str
    note: str


@dataclass(frozen=True)
class Session:
    id: str
    note: str
    chunks: tuple[Chunk, ...]
    supersede: tuple[Supersede, ...]


@dataclass(frozen=True)
class Feed:
    name: str
    path: Path
    description: str
    start: Store
    sessions: tuple[Session, ...]


def append_text(existing: str, text: str) -> str:
    """``existing`` with ``text`` appended on a fresh line (a missing final newline is supplied)."""
    sep = "\n" if existing and not existing.endswith("\n") else ""
    return existing + sep + text


def _keys(obj: Any, allowed: tuple[str, ...], required: tuple[str, ...], path: Path, at: str) -> dict:
    if not isinstance(obj, dict):
        raise FixtureError(path, at, f"expected a mapping with keys {', '.join(allowed)}")
    for key in required:
        if key not in obj:
            raise FixtureError(path, f"{at}.{key}" if at else key, "missing")
    for key in obj:
        if key not in allowed:
            where = f"{at}.{key}" if at else str(key)
            raise FixtureError(path, where, f"unknown key (allowed: {', '.join(allowed)})")
    return obj


def _string(value: Any, path: Path, at: str, empty_ok: bool = False) -> str:
    if not isinstance(value, str) or (not empty_ok and not value.strip()):
        raise FixtureError(path, at, "expected a non-empty string" if not empty_ok else "expected a string")
    return value


class _Builder:
    """Walks the sessions in order over an in-memory copy of the store, checking as it goes."""

    def __init__(self, path: Path, start: Store):
        self.path = path
        self.files = dict(start.files)
        self.muscle = list(start.expected.muscle)
        self.fat = list(start.expected.fat)
        self.ids = {n.id for n in self.muscle + self.fat}

    def new_id(self, nid: Any, kind: str, at: str) -> str:
        nid = _string(nid, self.path, at)
        if not ID_FORM[kind].fullmatch(nid):
            raise FixtureError(self.path, at, f"{nid!r} is not a {kind} id ({kind[0]}01, {kind[0]}02, ...)")
        if nid in self.ids:
            raise FixtureError(self.path, at, f"{nid!r} is already used by the start store or an earlier chunk")
        self.ids.add(nid)
        return nid

    def chunk(self, raw: Any, at: str) -> Chunk:
        raw = _keys(raw, _CHUNK_KEYS, ("file", "label", "text", "needles"), self.path, at)
        name = _string(raw["file"], self.path, f"{at}.file")
        if "/" in name or "\\" in name or name.startswith(".") or not name.endswith(".md"):
            raise FixtureError(self.path, f"{at}.file", f"{name!r}: a bare top-level *.md file name")
        label = raw["label"]
        if label not in ("muscle", "fat"):
            raise FixtureError(self.path, f"{at}.label", f"{label!r}: expected muscle or fat")
        cls = raw.get("class")
        if label == "muscle" and cls is not None:
            raise FixtureError(self.path, f"{at}.class", "only a fat chunk has a class")
        if label == "fat" and cls not in FAT_CLASSES:
            problem = (
                "missing (a fat chunk names its class)"
                if cls is None
                else unknown_name("fat class", str(cls), list(FAT_CLASSES))
            )
            raise FixtureError(self.path, f"{at}.class", problem)
        text = _string(raw["text"], self.path, f"{at}.text")
        if not text.endswith("\n"):
            raise FixtureError(self.path, f"{at}.text", "must end with a newline (use a YAML | block)")
        new = raw.get("new", False)
        if not isinstance(new, bool):
            raise FixtureError(self.path, f"{at}.new", "expected true or false")
        index = raw.get("index")
        if new != (index is not None):
            raise FixtureError(self.path, f"{at}.index", "a new file needs exactly one index line; an append has none")
        if index is not None and ("\n" in _string(index, self.path, f"{at}.index") or "\r" in index):
            raise FixtureError(self.path, f"{at}.index", "must be one line")
        if new and name in self.files:
            raise FixtureError(self.path, f"{at}.file", f"{name!r} already exists; new: true creates a file")
        if not new and name not in self.files:
            raise FixtureError(
                self.path, f"{at}.file", f"{name!r} does not exist yet (append) — add new: true and an index line"
            )
        needles_raw = raw["needles"]
        if not isinstance(needles_raw, list):
            raise FixtureError(self.path, f"{at}.needles", "expected a list")
        in_own = finder(text + "\n" + (index or ""))
        needles = []
        for j, n in enumerate(needles_raw):
            nat = f"{at}.needles[{j}]"
            n = _keys(n, _NEEDLE_KEYS, _NEEDLE_KEYS, self.path, nat)
            nid = self.new_id(n["id"], label, f"{nat}.id")
            needle = _string(n["needle"], self.path, f"{nat}.needle")
            if not in_own(needle):
                raise FixtureError(self.path, f"{nat}.needle", f"{needle!r} is not in the chunk's own text")
            needles.append(Needle(nid, needle, _string(n["note"], self.path, f"{nat}.note", empty_ok=True), cls))
        if not needles and not self._verbatim_repeat(name, text, cls):
            raise FixtureError(
                self.path,
                f"{at}.needles",
                "empty: only a verbatim repeat (class duplicate, every line already in the file) has none",
            )
        return Chunk(name, label, cls, text, tuple(needles), new, index)

    def _verbatim_repeat(self, name: str, text: str, cls: str | None) -> bool:
        present = set(self.files.get(name, "").split("\n"))
        return cls == "duplicate" and all(line in present for line in text.split("\n") if line.strip())

    def apply(self, chunk: Chunk) -> None:
        self.files[chunk.file] = append_text(self.files.get(chunk.file, ""), chunk.text)
        if chunk.index is not None:
            self.files[INDEX] = append_text(self.files[INDEX], chunk.index + "\n")
        (self.muscle if chunk.label == "muscle" else self.fat).extend(chunk.needles)

    def supersede(self, raw: Any, at: str) -> Supersede:
        raw = _keys(raw, _SUPERSEDE_KEYS, _SUPERSEDE_KEYS, self.path, at)
        target = raw["muscle"]
        old = next((n for n in self.muscle if n.id == target), None)
        if old is None:
            raise FixtureError(self.path, f"{at}.muscle", f"{target!r} is not a live muscle needle at this session")
        new_id = self.new_id(raw["as"], "fat", f"{at}.as")
        self.muscle.remove(old)
        self.fat.append(Needle(new_id, old.needle, _string(raw["note"], self.path, f"{at}.note", True), "superseded"))
        return Supersede(target, new_id, raw["note"])

    def check(self, session_id: str) -> None:
        expected = Expected("check", "", False, tuple(self.muscle), tuple(self.fat))
        try:
            check_contents(dict(sorted(self.files.items(), key=lambda kv: kv[0].encode("utf-16-be"))), expected, Path())
        except FixtureError as err:
            raise FixtureError(
                self.path, session_id, f"the store after this session breaks a store rule: {err}"
            ) from None


def load_feed(feed_dir: str | Path) -> Feed:
    """Load a feed folder, validated whole: ``start/`` is a valid store; ``sessions.yaml`` has
    exactly the documented keys; session ids run ``s01``, ``s02``, ...; a chunk appends to a file
    that exists or creates one that does not (with its index line); its labels, classes and ids are
    valid and new; each needle is in the chunk's own text; a chunk with no needle is a verbatim
    repeat; a supersede names a live muscle needle; and the store after every session passes the
    store content rules. The first problem is one :class:`FixtureError` naming file and field."""
    feed_dir = Path(feed_dir)
    if not feed_dir.is_dir():
        raise FixtureError(feed_dir, None, "not a folder")
    start = load_store(feed_dir / START)
    path = feed_dir / SESSIONS
    if not path.is_file():
        raise FixtureError(path, None, "missing: a feed scripts its sessions here")
    data = load_yaml(path)
    data = _keys(data, _TOP_KEYS, _TOP_KEYS, path, "")
    name = _string(data["feed"], path, "feed")
    if name != feed_dir.name:
        raise FixtureError(path, "feed", f"{name!r} must equal the folder name {feed_dir.name!r}")
    description = _string(data["description"], path, "description")
    if not isinstance(data["sessions"], list) or not data["sessions"]:
        raise FixtureError(path, "sessions", "expected a non-empty list")
    builder = _Builder(path, start)
    sessions = []
    for k, raw in enumerate(data["sessions"], start=1):
        sid = f"s{k:02d}"
        raw = _keys(raw, _SESSION_KEYS, ("id", "note", "chunks"), path, f"sessions[{k - 1}]")
        if raw["id"] != sid:
            raise FixtureError(path, f"sessions[{k - 1}].id", f"{raw['id']!r}: session {k} is {sid!r}")
        note = _string(raw["note"], path, f"{sid}.note")
        if not isinstance(raw["chunks"], list) or not raw["chunks"]:
            raise FixtureError(path, f"{sid}.chunks", "expected a non-empty list")
        chunks = []
        for j, c in enumerate(raw["chunks"]):
            chunk = builder.chunk(c, f"{sid}.chunks[{j}]")
            builder.apply(chunk)
            chunks.append(chunk)
        supersede = raw.get("supersede", [])
        if not isinstance(supersede, list):
            raise FixtureError(path, f"{sid}.supersede", "expected a list")
        relabels = tuple(builder.supersede(s, f"{sid}.supersede[{j}]") for j, s in enumerate(supersede))
        builder.check(sid)
        sessions.append(Session(sid, note, tuple(chunks), relabels))
    return Feed(name, feed_dir, description, start, tuple(sessions))


def _as_feed(feed: Feed | str | Path) -> Feed:
    return feed if isinstance(feed, Feed) else load_feed(feed)


def _check_n(feed: Feed, n: int, what: str = "sessions") -> None:
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= len(feed.sessions):
        raise ConfigError(f"{what} {n!r}: feed {feed.name!r} has sessions 0..{len(feed.sessions)}")


def expected_after(feed: Feed | str | Path, n: int) -> dict[str, Any]:
    """The cumulative ``expected.json`` (as a dict) of the store after sessions 1..n: the start's
    needles, each session's chunk needles in order, superseded muscle moved to fat."""
    feed = _as_feed(feed)
    _check_n(feed, n)
    muscle, fat = list(feed.start.expected.muscle), list(feed.start.expected.fat)
    for session in feed.sessions[:n]:
        for chunk in session.chunks:
            (muscle if chunk.label == "muscle" else fat).extend(chunk.needles)
        for s in session.supersede:
            old = next(m for m in muscle if m.id == s.muscle)
            muscle.remove(old)
            fat.append(Needle(s.as_id, old.needle, s.note, "superseded"))
    expected = Expected(
        fixture=f"{feed.name}-s{n:02d}",
        description=f"{feed.description} (after {n} of {len(feed.sessions)} sessions)",
        expect_no_op=feed.start.expected.expect_no_op and not fat,
        muscle=tuple(muscle),
        fat=tuple(fat),
    )
    return expected.to_json()


def apply_session(feed: Feed | str | Path, k: int, store_dir: str | Path) -> None:
    """Append session ``k`` (1-based) to the store in ``store_dir``, which may have been washed:
    each chunk's text goes at the end of its file (a file the washer deleted is recreated with the
    chunk alone), a new file's index line at the end of ``MEMORY.md``. ``expected.json`` is not
    touched: the manifest of a pristine run is :func:`expected_after`."""
    feed = _as_feed(feed)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= len(feed.sessions):
        raise ConfigError(f"session {k!r}: feed {feed.name!r} has sessions 1..{len(feed.sessions)}")
    store_dir = Path(store_dir)
    for chunk in feed.sessions[k - 1].chunks:
        _append_file(store_dir / chunk.file, chunk.text)
        if chunk.index is not None:
            _append_file(store_dir / INDEX, chunk.index + "\n")


def _append_file(path: Path, text: str) -> None:
    existing = path.read_bytes().decode("utf-8") if path.exists() else ""
    path.write_bytes(append_text(existing, text).encode("utf-8"))


def _refuse_nonempty(out_dir: Path) -> None:
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise ConfigError(f"{out_dir}: exists and is not an empty folder; refusing to write into it")


def materialise(feed_dir: str | Path | Feed, sessions: int, out_dir: str | Path) -> Path:
    """Write the store after ``sessions`` sessions into ``out_dir`` (absent or empty): the start
    files, sessions 1..N appended, and the cumulative ``expected.json``. Built in a sibling temp
    folder and renamed into place, so a failure leaves nothing half-written."""
    feed = _as_feed(feed_dir)
    _check_n(feed, sessions)
    out_dir = Path(out_dir)
    _refuse_nonempty(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        for src in sorted(feed.start.path.iterdir()):
            if src.is_file() and src.name != EXPECTED:
                shutil.copyfile(src, tmp / src.name)
        for k in range(1, sessions + 1):
            apply_session(feed, k, tmp)
        manifest = Expected(**_expected_fields(expected_after(feed, sessions)))
        (tmp / EXPECTED).write_bytes(dump_expected(manifest).encode("utf-8"))
        if out_dir.exists():
            out_dir.rmdir()
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


def _expected_fields(data: dict[str, Any]) -> dict[str, Any]:
    def needles(entries: list[dict]) -> tuple[Needle, ...]:
        return tuple(Needle(e["id"], e["needle"], e["note"], e.get("class")) for e in entries)

    return {
        "fixture": data["fixture"],
        "description": data["description"],
        "expect_no_op": data["expectNoOp"],
        "muscle": needles(data["muscle"]),
        "fat": needles(data["fat"]),
    }


def feed_folder(root: Path, arg: Any, cwd: Path) -> Path:
    """The feed ``arg`` names: a path to a feed folder (relative to ``cwd``), or a bare name of
    a folder under ``root`` (unknown -> "did you mean"); see :func:`washexp.inputs.named_folder`."""
    known = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    return named_folder("feed", arg, root, known, cwd)


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="washexp feed", description="Write a growth feed's store after N sessions.")
    p.add_argument("feed", help="feed folder, or a bare name under <project>/fixtures/wash-feed/")
    p.add_argument("--sessions", type=int, required=True, metavar="N", help="sessions to apply (0..feed length)")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="absent or empty folder to write")
    return p


def main(argv: list[str] | None = None) -> int:
    """``washexp feed FEED --sessions N --out DIR``."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = _parser().parse_args(argv)
        root = Path() if is_path(args.feed) else find_root() / "fixtures" / "wash-feed"  # a name needs the project
        feed = load_feed(feed_folder(root, args.feed, Path.cwd()))
        _check_n(feed, args.sessions, "--sessions")
        _refuse_nonempty(args.out)
    except WashexpError as err:  # all found before any work
        return fail("washexp feed", err, USAGE)
    try:
        out = materialise(feed, args.sessions, args.out)
    except (OSError, WashexpError) as err:
        print(f"washexp feed: could not write {args.out}: {err}", file=sys.stderr)
        return 1
    manifest = expected_after(feed, args.sessions)
    print(
        f"{out}: {feed.name} after {args.sessions} of {len(feed.sessions)} sessions · "
        f"{len(manifest['muscle'])} muscle · {len(manifest['fat'])} fat"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
