"""The transactional apply: a plan lands on a store whole, or not at all.

The rule, step by step (``on_step(name)`` is called before each one, so a test can fail any):

1. ``lock``: take ``<store>/.washexp.lock`` without waiting; a second apply or ``recover`` on
   the same store is refused with ``ApplyError``. A WAL left by a crashed apply is rolled back
   first (``recover``).
2. ``pinned``: refuse any item on a file whose YAML frontmatter says ``pinned: true``.
3. ``external-writer``: abort if any top-level ``*.md`` file differs from ``seen`` (its sha256
   when the plan was made), or appeared, or vanished. The plan is then computed in memory
   (``apply_to_texts``); a bad plan is refused. Nothing has been written up to here.
4. ``snapshot``: copy every top-level ``*.md`` file into ``<store>/.washexp-snapshot/`` and
   re-hash each copy against the original.
5. ``wal``: write ``wal.jsonl`` (JSON lines, fsynced) in the snapshot folder; its ``begin``
   record lists the snapshot's digests. From here on the store may change.
6. ``write:<file>``: each edited file, in name order, is re-checked against ``seen`` and written
   atomically (a temp file in the store folder, fsync, ``os.replace``, fsync of the folder).
7. ``delete:<file>``: deletes come last, once every write has landed.
8. ``commit``: a ``commit`` record is appended to the WAL, then the snapshot folder (WAL included)
   is removed. Undo after success is the caller's business (a wash runs on a scratch copy).

Any failure before the commit record restores every file to its snapshot bytes (a deleted file
comes back, temp files are removed), removes the snapshot, and raises ``ApplyError`` naming the
step and the cause. The lock file stays in the store (harmless: it is not a ``*.md`` file).
If the restore itself fails, the WAL and snapshot are kept and ``recover`` finishes the job.
None of the apply's own files end in ``.md``, so the store (its top-level ``*.md`` files) never
contains them.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from washexp.errors import WashexpError
from washexp.hashing import sha256_bytes
from washexp.wash.files import md_names
from washexp.wash.plan import Plan, PlanError, apply_to_texts

LOCK_NAME = ".washexp.lock"
SNAPSHOT_DIR = ".washexp-snapshot"
WAL_NAME = "wal.jsonl"
TEMP_PREFIX = ".washexp-tmp-"  # never ends in .md: a leftover temp file is not part of the store
WAL_VERSION = 1


class ApplyError(WashexpError):
    """An apply that was refused or rolled back; ``str(err)`` names the step and the cause."""


@dataclass(frozen=True)
class Applied:
    """What an apply changed: files written and deleted, and sha256 of every file before and after."""

    written: tuple[str, ...]
    deleted: tuple[str, ...]
    before: dict[str, str]
    after: dict[str, str]


def digests(store: str | Path) -> dict[str, str]:
    """name -> sha256 of every top-level ``*.md`` file of ``store``."""
    store = Path(store)
    return {name: sha256_bytes((store / name).read_bytes()) for name in md_names(store)}


_FRONTMATTER_PIN = re.compile(r"""^pinned[ \t]*:[ \t]*(?:true|"true"|'true')[ \t]*(?:#.*)?$""", re.IGNORECASE)


def is_pinned(text: str) -> bool:
    """True when the file opens with a YAML frontmatter block whose top-level ``pinned`` is true."""
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].rstrip() != "---":
        return False
    for line in lines[1:]:
        if line.rstrip() in ("---", "..."):
            return False
        if _FRONTMATTER_PIN.match(line.rstrip("\r")):
            return True
    return False  # an unclosed block is not frontmatter


def _fsync_dir(folder: Path) -> None:
    """Make a rename or unlink in ``folder`` durable (best effort where folders cannot be opened)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_durable(path: Path, data: bytes) -> None:
    """Write ``data`` to a new file and fsync it (used for snapshot copies)."""
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so a reader sees the old bytes or the new, never a mix."""
    fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


class _Wal:
    """The write-ahead log: one JSON object a line, each fsynced before the step it announces."""

    def __init__(self, path: Path):
        self.path = path

    def append(self, record: dict) -> None:
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record, sort_keys=True) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    @staticmethod
    def read(path: Path) -> list[dict]:
        """The complete records; a torn last line (a crash mid-append) is ignored."""
        records = []
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                break
        return records


def _lock(store: Path) -> FileLock:
    lock = FileLock(store / LOCK_NAME, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise ApplyError(f"{store}: another apply holds {LOCK_NAME}; refusing to run concurrently") from None
    return lock


def _snapshot(store: Path, snap: Path, before: dict[str, str]) -> None:
    """Copy every file of ``before`` into ``snap`` and prove each copy hashes as the original."""
    if snap.exists():
        shutil.rmtree(snap)  # a stale snapshot with no WAL: nothing was ever written from it
    snap.mkdir()
    for name, digest in before.items():
        data = (store / name).read_bytes()
        if sha256_bytes(data) != digest:
            raise ApplyError(f"snapshot: {name} changed while it was being copied")
        _write_durable(snap / name, data)
    _fsync_dir(snap)
    for name, digest in before.items():
        if sha256_bytes((snap / name).read_bytes()) != digest:
            raise ApplyError(f"snapshot: the copy of {name} does not verify")


def _restore(store: Path, snap: Path, manifest: dict[str, str]) -> None:
    """Put every manifest file back to its snapshot bytes and clear the apply's temp files."""
    for name, digest in manifest.items():
        data = (snap / name).read_bytes()
        if sha256_bytes(data) != digest:
            raise ApplyError(f"rollback: the snapshot copy of {name} is corrupt; left in {snap} for a human")
        target = store / name
        if not target.exists() or target.read_bytes() != data:
            write_atomic(target, data)
    for leftover in store.glob(TEMP_PREFIX + "*"):
        leftover.unlink()


def recover(store: str | Path) -> bool:
    """Roll a store back after a crashed apply; True when a rollback was needed and done.

    A WAL whose ``begin`` record is complete and that has no ``commit`` record means files may
    be half-written: every snapshot file is restored and the snapshot removed. A snapshot
    without a readable ``begin`` (the crash came before any write) or a committed WAL is just
    removed. Takes the store lock; refuses with ``ApplyError`` if an apply is running.
    """
    store = Path(store)
    lock = _lock(store)
    try:
        return _recover_locked(store)
    finally:
        lock.release()


def _recover_locked(store: Path) -> bool:
    snap = store / SNAPSHOT_DIR
    wal = snap / WAL_NAME
    if not snap.exists():
        return False
    records = _Wal.read(wal) if wal.exists() else []
    begun = records and records[0].get("event") == "begin"
    committed = any(r.get("event") == "commit" for r in records)
    if begun and not committed:
        _restore(store, snap, records[0]["files"])
    shutil.rmtree(snap)
    _fsync_dir(store)
    return bool(begun and not committed)


def apply_plan(
    store: str | Path, plan: Plan, seen: dict[str, str], *, on_step: Callable[[str], None] | None = None
) -> Applied:
    """Apply ``plan`` to ``store`` transactionally (see the module docstring for the rule)."""
    store = Path(store)
    step = "lock"
    hook = on_step or (lambda _name: None)
    lock: FileLock | None = None
    mutating = False
    try:
        hook(step)
        lock = _lock(store)
        _recover_locked(store)  # a crashed apply's half-written store is rolled back before anything else
        step = "pinned"
        hook(step)
        raw = {name: (store / name).read_bytes() for name in md_names(store)}  # one read: texts and digests agree
        files = {name: data.decode("utf-8") for name, data in raw.items()}
        pinned = sorted({i.file for i in plan.items if i.file in files and is_pinned(files[i.file])})
        if pinned:
            raise ApplyError(f"refused: {', '.join(pinned)} is pinned (frontmatter pinned: true)")
        step = "external-writer"
        hook(step)
        before = {name: sha256_bytes(data) for name, data in raw.items()}
        _check_unchanged(before, seen)
        try:
            new_texts = apply_to_texts(files, plan)
        except PlanError as err:
            raise ApplyError(f"refused: {err}") from None
        writes = {n: t.encode("utf-8") for n, t in new_texts.items() if t != files[n]}
        deletes = sorted(set(files) - set(new_texts))
        step = "snapshot"
        hook(step)
        snap = store / SNAPSHOT_DIR
        mutating = True  # from here a failure cleans up the snapshot and restores
        _snapshot(store, snap, before)
        step = "wal"
        hook(step)
        wal = _Wal(snap / WAL_NAME)
        wal.append(
            {"event": "begin", "version": WAL_VERSION, "files": before, "writes": sorted(writes), "deletes": deletes}
        )
        for name in sorted(writes):
            step = f"write:{name}"
            hook(step)
            if sha256_bytes((store / name).read_bytes()) != seen[name]:
                raise ApplyError(f"{name} was changed by another writer during the apply")
            wal.append({"event": "write", "file": name, "sha256": sha256_bytes(writes[name])})
            write_atomic(store / name, writes[name])
        for name in deletes:
            step = f"delete:{name}"
            hook(step)
            wal.append({"event": "delete", "file": name})
            (store / name).unlink()
            _fsync_dir(store)
        step = "commit"
        hook(step)
        after = digests(store)
        wal.append({"event": "commit"})
        mutating = False  # committed: a later hiccup must not undo it; recover() just clears a committed WAL
        shutil.rmtree(snap, ignore_errors=True)
        return Applied(tuple(sorted(writes)), tuple(deletes), before, after)
    except BaseException as err:
        if mutating:
            _roll_back(store, step, err)
        if isinstance(err, ApplyError):
            raise ApplyError(f"{store}: apply failed at {step}: {err}") from err
        if not isinstance(err, Exception):
            raise  # an interrupt after a clean rollback still interrupts
        raise ApplyError(f"{store}: apply failed at {step}: {type(err).__name__}: {err}") from err
    finally:
        if lock is not None:
            lock.release()


def _check_unchanged(now: dict[str, str], seen: dict[str, str]) -> None:
    appeared = sorted(set(now) - set(seen))
    vanished = sorted(set(seen) - set(now))
    changed = sorted(n for n in set(now) & set(seen) if now[n] != seen[n])
    parts = [
        f"{label} {', '.join(names)}"
        for label, names in (("changed", changed), ("appeared", appeared), ("vanished", vanished))
        if names
    ]
    if parts:
        raise ApplyError(f"another writer touched the store since the plan was made ({'; '.join(parts)})")


def _roll_back(store: Path, step: str, cause: BaseException) -> None:
    """Undo a failed apply; if the undo fails, keep WAL + snapshot so ``recover`` can finish."""
    snap = store / SNAPSHOT_DIR
    try:
        records = _Wal.read(snap / WAL_NAME) if (snap / WAL_NAME).exists() else []
        if records and records[0].get("event") == "begin":
            _restore(store, snap, records[0]["files"])
        else:  # failed before the WAL: nothing in the store was touched
            for leftover in store.glob(TEMP_PREFIX + "*"):
                leftover.unlink()
        if snap.exists():
            shutil.rmtree(snap)
    except Exception as err:
        raise ApplyError(
            f"{store}: apply failed at {step} ({type(cause).__name__}: {cause}) and its rollback failed "
            f"({type(err).__name__}: {err}); the WAL and snapshot are kept: run recover()"
        ) from err
