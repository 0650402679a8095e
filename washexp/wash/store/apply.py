"""The transactional apply: a change lands on a store whole, or not at all, and only inside it.

A :class:`Change` names files of the store folder (plain names, no folder) to write and to delete,
and the sha256 each touched file had when the change was made (``None``: the file is new). A
:class:`Transaction` applies one change, step by step (``on_step(name)`` is called before each
one, so a test can fail any):

1. ``lock``: ``flock`` on the store folder itself (nothing is created for it); a second
   transaction on the same store is refused with ``ApplyError``: at once within this process, after
   ``LOCK_WAIT_S`` when another process holds the lock (a child this process forks holds a copy of
   its lock until the child execs, so a lock just released can look held for a moment). A journal
   left by a crashed apply is checked, then rolled back (:func:`recover`).
2. ``pinned``: refuse a change that writes or deletes a pinned ``*.md`` file (``washexp.wash.coalwash.pins``).
3. ``external-writer``: abort if any top-level ``*.md`` file differs from ``seen`` (its sha256 when
   the plan was made), appeared or vanished, or a touched file differs from the change's base.
4. ``snapshot``: in ``<store>/.washexp-snapshot/``, the bytes of every file to write that exists,
   one after another in one file (``snapshot.pack``; the ``begin`` record gives each one's offset,
   size and sha256), and a copy of each file to delete (the copy carries its mode and owner, which
   a rollback recreates it with); each re-read and re-hashed. One pack, not a copy per file: on a
   filesystem mounted with ``discard`` every freed file costs a few ms (1,400 copies: 4.4 s to
   remove), one pack one unlink.
5. ``stage``: write each new file's bytes to a temp file in the store folder, with the mode and
   owner of the file it will replace; then make the copies and the temp files durable in one go
   (:func:`sync_files`: one ``syncfs`` on Linux, else one fsync per file).
6. ``wal``: write ``wal.jsonl`` there (JSON lines) and fsync it and its folder once; its ``begin``
   record lists each snapshot's sha256, mode and owner, the files to create, and every write (with
   the sha256 of its bytes) and delete the apply will make. From here on the store may change.
7. ``write:<file>``: each file, in name order, is re-checked (a plain regular file with one link,
   the bytes of its base); a ``write`` record is appended (not fsynced), and its temp file renamed
   over it (``os.replace``).
8. ``delete:<file>``: deletes come last, each re-checked the same way, recorded, then unlinked.
9. ``commit``: the store folder is fsynced (the renames and unlinks durable), a ``commit`` record
   is appended and fsynced, then the snapshot folder is removed.

So a wash costs a fixed number of flushes whatever its size (4 fsyncs per file written, before:
39 s for a store of 2,001 notes on a loaded 2-core machine). The per-file records tell a rollback
which files this apply reached (a kill leaves them in the page cache); the ``begin`` record's
sha256 of each write lets a rollback after a power cut, which may lose those records but not the
durable ``begin``, still recognise and undo a rename that landed.

Any failure or interrupt (SIGINT, or SIGTERM raised as :class:`Terminated` by the command) before
the commit record rolls back at once, with both signals held off until the rollback is done. A
rollback undoes only what the journal says this apply did: a file is put back from its verified
snapshot, with its mode and owner, when it holds the bytes the journal announced for it (or is
gone after an announced delete); a file created is removed only when it holds the bytes announced.
A file the apply reached (a ``write`` or ``delete`` record) that someone else changed since is
left alone and the journal kept: ``ApplyError``; one it never reached is left as it is.

A store, its journal and its snapshot are untrusted input (a synced folder, a crafted
``wal.jsonl``): before anything is touched, :func:`check_journal` proves every name they hold is
a plain name of the store folder, and every file it names is a regular file with one link (no
symlink, hard link, folder or special file); otherwise :class:`UnsafeStore` (one line, nothing
touched). After a finished apply, nothing of it is left in the store.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import shutil
import signal
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from washexp.errors import FixtureError, WashexpError
from washexp.hashing import sha256_bytes
from washexp.inputs import read_untrusted
from washexp.wash.coalwash.files import entry_problem, md_names, name_problem
from washexp.wash.coalwash.pins import is_pinned
from washexp.wash.plan import Plan, PlanError, apply_to_texts

SNAPSHOT_DIR = ".washexp-snapshot"
WAL_NAME = "wal.jsonl"
TEMP_PREFIX = ".washexp-tmp-"  # never ends in .md: a leftover temp file is not part of the store
PACK_NAME = "snapshot.pack"
WAL_VERSION = 4
"""4: a manifest entry may hold ``offset`` and ``size``: its bytes are that slice of ``snapshot.pack``
(else, as before, the copy of the same name). 3: the ``begin`` record also holds ``write_sha256``
(name -> sha256 of each write's bytes). Versions 3 and 2 (no such map; each write announced in its
own fsynced record), which a killed wash of an earlier washexp leaves, are still read."""
_READ_VERSIONS = (2, 3, WAL_VERSION)
LEGACY_LOCK = ".washexp.lock"
_SIGNALS = {signal.SIGINT, signal.SIGTERM}
LOCK_WAIT_S = 2.0
"""How long a lock held outside this process is waited for before the apply is refused."""
_HELD: set[tuple[int, int]] = set()  # (device, inode) of the store folders this process holds
_HELD_GUARD = threading.Lock()

__all__ = [
    "ApplyError",
    "Change",
    "Terminated",
    "TornStore",
    "Transaction",
    "UnsafeStore",
    "apply_plan",
    "is_pinned",
    "pending_journal",
    "refuse_torn",
]


class ApplyError(WashexpError):
    """An apply that was refused or rolled back; ``str(err)`` names the step and the cause."""


class UnsafeStore(ApplyError):
    """A journal, snapshot or store entry that would take a write outside the store's plain files."""


class Terminated(BaseException):
    """SIGTERM, raised where the process is, so a running apply rolls back (as SIGINT does)."""


@dataclass(frozen=True)
class Applied:
    """What an apply changed: files written and deleted, and sha256 of every ``*.md`` before and after."""

    written: tuple[str, ...]
    deleted: tuple[str, ...]
    before: dict[str, str]
    after: dict[str, str]


@dataclass(frozen=True)
class Change:
    """Files of one store folder to write (name -> bytes) and delete, and what each touched file
    held when the change was made (name -> sha256, or None for a file the change creates)."""

    writes: Mapping[str, bytes]
    deletes: tuple[str, ...]
    base: Mapping[str, str | None] = field(default_factory=dict)

    def touched(self) -> list[str]:
        return sorted({*self.writes, *self.deletes})


def digests(store: str | Path) -> dict[str, str]:
    """name -> sha256 of every top-level ``*.md`` file of ``store``."""
    store = Path(store)
    return {name: sha256_bytes((store / name).read_bytes()) for name in md_names(store)}


def _digest_of(path: Path) -> str | None:
    try:
        return sha256_bytes(path.read_bytes())
    except FileNotFoundError:
        return None


def _fsync_dir(folder: Path) -> None:
    """Make a rename or unlink in ``folder`` durable (best effort where folders cannot be opened)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _libc_syncfs() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):  # not Linux (no syncfs in its C library)
        return None


_syncfs = _libc_syncfs()


def sync_files(folder: Path, paths: Iterable[Path]) -> None:
    """Make the bytes of ``paths`` (files in or under ``folder``) durable. On Linux one ``syncfs``
    of ``folder``'s filesystem: one device flush, where an fsync per file costs one each (1,400 of
    them took 5 to 7 s on this project's machines); elsewhere one fsync per file."""
    if _syncfs is not None:
        fd = os.open(folder, os.O_RDONLY)
        try:
            if _syncfs(fd) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"syncfs: {os.strerror(err)}")
        finally:
            os.close(fd)
        return
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _new_file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_atomic(path: Path, data: bytes, like: os.stat_result | _Mode | None = None) -> None:
    """Replace ``path`` with ``data`` so a reader sees the old bytes or the new, never a mix. The
    file keeps the mode and (where permitted) the owner of ``like``, or of the file it replaces; a
    new file gets the mode the umask gives."""
    tmp = _stage(path, data, like, fsync=True)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _stage(path: Path, data: bytes, like: os.stat_result | _Mode | None = None, *, fsync: bool = False) -> Path:
    """A temp file beside ``path`` holding ``data``, with the mode and owner ``write_atomic`` gives."""
    if like is None:
        with contextlib.suppress(FileNotFoundError):
            like = os.lstat(path)
    fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), stat.S_IMODE(like.st_mode) if like else _new_file_mode())
            if like is not None and (like.st_uid, like.st_gid) != (os.getuid(), os.getgid()):
                with contextlib.suppress(PermissionError):
                    os.fchown(fh.fileno(), like.st_uid, like.st_gid)
            fh.write(data)
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return Path(tmp)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block is done (a rollback is never cut short)."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


# ------------------------------------------------------------------------- the journal


def _read_wal(path: Path) -> list[dict]:
    """The complete records; a torn last line (a crash mid-append) is ignored."""
    records = []
    raw = read_untrusted(path)  # a regular file of the store, capped: never a FIFO, device or link out
    try:
        text = (raw or b"").decode("utf-8")
    except UnicodeDecodeError:
        raise FixtureError(path, None, "not UTF-8") from None
    for line in text.splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            break
        except ValueError as err:  # an integer of more digits than int() converts
            raise FixtureError(path, None, f"not usable JSON: {str(err).split(';')[0]}") from None
        except RecursionError:
            raise FixtureError(path, None, "not usable JSON: nested too deeply") from None
    return records


def _append(path: Path, *records: dict, sync: bool = True) -> None:
    """Append ``records``; unsynced, they still reach the page cache, which a kill leaves whole."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("".join(json.dumps(record, sort_keys=True) + "\n" for record in records))
        fh.flush()
        if sync:
            os.fsync(fh.fileno())


@dataclass(frozen=True)
class _Journal:
    """A checked journal: the begin record's snapshot manifest, creations, and what was done."""

    files: dict[str, dict]
    """name -> {"sha256", "mode", "uid", "gid"} of each snapshot copy (and ``offset``, ``size``:
    a slice of the pack)."""
    created: tuple[str, ...]
    written: dict[str, str | None]
    """name -> sha256 of the bytes announced for it (None: a version-2 write record that named none)."""
    deleted: tuple[str, ...]
    """The deletes announced."""
    committed: bool
    reached: frozenset[str] = frozenset()
    """The files the apply reached (a ``write`` or ``delete`` record each): past its re-check."""


def _names_in(record: dict) -> list[Any]:
    """Every file name a journal record holds, whatever its shape."""
    files = record.get("files", {})
    names: list[Any] = list(files) if isinstance(files, dict) else [files]
    for key in ("created", "writes", "deletes", "write_sha256"):
        value = record.get(key, [])
        names += list(value) if isinstance(value, (list, dict)) else [value]
    if "file" in record:
        names.append(record["file"])
    return names


def _well_formed(records: list[dict]) -> bool:
    """The journal's shape: a begin record of a version read here with a manifest of sha256, mode
    and owner per file (version 3: and the lists of writes and deletes, a sha256 per write), then
    write and delete records naming a file each."""
    begin = records[0]
    files, created = begin.get("files"), begin.get("created", [])
    if not isinstance(files, dict) or not isinstance(created, list) or begin.get("version") not in _READ_VERSIONS:
        return False
    if begin["version"] >= 3:
        writes, deletes, shas = begin.get("writes", []), begin.get("deletes", []), begin.get("write_sha256", {})
        if not (isinstance(writes, list) and isinstance(deletes, list) and isinstance(shas, dict)):
            return False
        if sorted(shas) != sorted(writes) or not all(isinstance(v, str) for v in shas.values()):
            return False
    for meta in files.values():
        if not isinstance(meta, dict) or not isinstance(meta.get("sha256"), str):
            return False
        if not all(type(meta.get(k)) is int for k in ("mode", "uid", "gid")):
            return False
        if ("offset" in meta or "size" in meta) and not (
            begin["version"] >= 4 and all(type(meta.get(k)) is int and meta[k] >= 0 for k in ("offset", "size"))
        ):
            return False  # a slice of the pack: two non-negative integers, in a journal that has packs
    return all(isinstance(r.get("file"), str) for r in records[1:] if r.get("event") in ("write", "delete"))


def pending_journal(store: str | Path) -> Path | None:
    """The journal an interrupted apply left in ``store``, or None. Until it is rolled back
    (:func:`recover`) the store's files may be torn, some of the wash's writes landed and some not."""
    wal = Path(store) / SNAPSHOT_DIR / WAL_NAME
    return wal if os.path.lexists(wal) else None


class TornStore(FixtureError):
    """A store read while an interrupted apply's journal is pending (one line: the journal, and the
    command that rolls it back); a read-only command refuses it rather than write to recover it.
    An input error found before any work (exit 2; ``washexp score`` keeps score.mjs's 1)."""

    def __init__(self, store: str | Path, wal: Path):
        super().__init__(
            store,
            None,
            f"a wash's journal is pending ({wal}: a wash is running or was interrupted), so its files may be "
            f"torn and nothing was read; `washexp wash {store} --recover` rolls an interrupted one back",
        )


def refuse_torn(store: str | Path) -> None:
    """Raise :class:`TornStore` when ``store`` holds a pending journal; a file is no store, never torn."""
    if (wal := pending_journal(store)) is not None:
        raise TornStore(store, wal)


def check_journal(store: str | Path) -> _Journal | None:
    """The store's journal, proved confined (see the module doc), or None when there is none.

    Raises :class:`UnsafeStore` naming the first entry or name that is not a plain file of the
    store folder; reads only, writes nothing.
    """
    store = Path(store)
    snap = store / SNAPSHOT_DIR
    where = f"{store}: {SNAPSHOT_DIR}"

    def unsafe(problem: str) -> UnsafeStore:
        return UnsafeStore(f"{where}{problem}; refusing to touch the store")

    try:
        st = os.lstat(snap)
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        raise unsafe(" is not a folder (a symlink or a file)")
    for entry in sorted(os.listdir(snap)):
        if problem := name_problem(entry) or entry_problem(snap / entry):
            raise unsafe(f": {problem}")
    wal = snap / WAL_NAME
    if not wal.exists():
        return _Journal({}, (), {}, (), committed=False)  # a snapshot with no WAL: nothing was written
    try:
        records = _read_wal(wal)
    except (OSError, UnicodeDecodeError) as err:
        raise unsafe(f"/{WAL_NAME}: unreadable ({type(err).__name__})") from None
    if not records:
        return _Journal({}, (), {}, (), committed=False)
    if not all(isinstance(r, dict) for r in records) or records[0].get("event") != "begin":
        raise unsafe(f"/{WAL_NAME}: not a washexp journal")
    for record in records:
        for name in _names_in(record):
            if problem := name_problem(name) or entry_problem(store / name):
                raise unsafe(f"/{WAL_NAME}: {problem}")
    if not _well_formed(records):
        raise unsafe(f"/{WAL_NAME}: an unknown journal shape")
    begin = records[0]
    files, created = begin["files"], begin.get("created", [])
    committed = any(r.get("event") == "commit" for r in records)
    pack_size = (snap / PACK_NAME).stat().st_size if (snap / PACK_NAME).is_file() else -1
    for name, meta in files.items() if not committed else ():  # a committed apply needs no copy
        if "offset" in meta:
            if meta["offset"] + meta["size"] > pack_size:
                raise unsafe(f"/{WAL_NAME}: no snapshot copy of {name!r} (not within {PACK_NAME})")
        elif not (snap / name).is_file():
            raise unsafe(f"/{WAL_NAME}: no snapshot copy of {name!r}")
    reached = frozenset(r["file"] for r in records if r.get("event") in ("write", "delete"))
    if begin["version"] == 2:  # each write and delete was announced in its own record, fsynced
        written = {r["file"]: r.get("sha256") for r in records if r.get("event") == "write"}
        deleted = tuple(r["file"] for r in records if r.get("event") == "delete")
    else:
        written, deleted = dict(begin.get("write_sha256", {})), tuple(begin.get("deletes", []))
    return _Journal(files, tuple(created), written, deleted, committed, reached)


def _roll_back_journal(store: Path, journal: _Journal) -> None:
    """Undo what the journal says was done, and only that (see the module doc)."""
    snap = store / SNAPSHOT_DIR
    conflicts = []
    pack = (snap / PACK_NAME).read_bytes() if any("offset" in m for m in journal.files.values()) else b""
    for name, meta in journal.files.items():
        # a slice's bounds are proved by check_journal; the sha256 below proves the bytes
        data = _slice(pack, meta) if "offset" in meta else (snap / name).read_bytes()
        if sha256_bytes(data) != meta.get("sha256"):
            raise ApplyError(f"rollback: the snapshot copy of {name} is corrupt; left in {snap} for a human")
        now = _digest_of(store / name)
        if now == meta["sha256"]:
            continue  # untouched by this apply, or its write never landed: nothing of ours to undo
        if (name in journal.written and now == journal.written[name]) or (now is None and name in journal.deleted):
            # the mode and owner the file has (the apply kept them), or its snapshot copy's (made
            # with the original's); never the journal's own figures, which anyone could write
            if now is None and "offset" in meta:  # a delete's bytes are never packed (no mode of their own)
                raise ApplyError(f"rollback: no snapshot copy of the deleted {name}; left in {snap} for a human")
            write_atomic(store / name, data, None if now is not None else _Mode(os.lstat(snap / name)))
        elif name in journal.reached:
            conflicts.append(name)  # ours, then changed by someone else: a human decides
        # else: the apply never reached it (its re-check failed, or the kill came first): not ours
    for name in journal.created:
        if name in journal.written and _digest_of(store / name) == journal.written[name]:
            (store / name).unlink()
    if conflicts:
        raise ApplyError(
            f"rollback: {', '.join(conflicts)} changed since the interrupted apply; "
            f"left as it is, the journal kept in {snap} for a human"
        )


def _slice(pack: bytes, meta: dict) -> bytes:
    """A packed original's bytes: its manifest entry's ``size`` bytes from its ``offset``."""
    return pack[meta["offset"] : meta["offset"] + meta["size"]]


class _Mode:
    """A stat-like view of a snapshot copy's mode and owner (what ``write_atomic`` copies); no
    set-id or sticky bit is taken from it."""

    def __init__(self, st: os.stat_result):
        self.st_mode, self.st_uid, self.st_gid = stat.S_IMODE(st.st_mode) & 0o777, st.st_uid, st.st_gid


def _clear(store: Path) -> None:
    """Remove the snapshot folder and the apply's temp files (plain files of our prefix only)."""
    snap = store / SNAPSHOT_DIR
    if snap.is_dir() and not snap.is_symlink():
        # The journal goes first: a kill inside rmtree then leaves copies without a journal
        # (nothing was written), never a journal whose copies are half gone.
        with contextlib.suppress(FileNotFoundError):
            (snap / WAL_NAME).unlink()
            _fsync_dir(snap)
        shutil.rmtree(snap)
    for leftover in store.glob(TEMP_PREFIX + "*"):
        if not leftover.is_dir() or leftover.is_symlink():
            leftover.unlink()
    legacy = store / LEGACY_LOCK
    if entry_problem(legacy) is None and legacy.exists() and legacy.stat().st_size == 0:
        legacy.unlink()  # the empty lock file earlier versions left beside every store's files
    _fsync_dir(store)


# ------------------------------------------------------------------------- the transaction


def _flock_within(fd: int, seconds: float) -> bool:
    """Lock ``fd`` exclusively, trying again for ``seconds`` while another holds it."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)


class Transaction:
    """The store folder locked for one or more changes: ``with Transaction(store) as tx: tx.apply(...)``.

    Entering locks the folder and recovers a crashed apply (after :func:`check_journal`)."""

    def __init__(self, store: str | Path):
        self.store = Path(store)
        self._fd: int | None = None
        self._key = (0, 0)

    def __enter__(self) -> Transaction:
        fd = os.open(self.store, os.O_RDONLY | os.O_DIRECTORY)
        info = os.fstat(fd)
        key = (info.st_dev, info.st_ino)
        refused = ApplyError(f"{self.store}: another apply holds the store; refusing to run concurrently")
        with _HELD_GUARD:
            if key in _HELD:
                os.close(fd)
                raise refused
            _HELD.add(key)
        if not _flock_within(fd, LOCK_WAIT_S):
            with _HELD_GUARD:
                _HELD.discard(key)
            os.close(fd)
            raise refused
        self._fd, self._key = fd, key
        try:
            self.recovered = self._recover()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None
            with _HELD_GUARD:
                _HELD.discard(self._key)

    def _recover(self, done: set[str] | None = None) -> bool:
        """Roll back a journal left in the store; ``done``: the files this process's own failed apply
        reached, which it knows exactly (a journal read after a kill or a power cut counts every
        file holding its announced bytes, or gone after an announced delete, as this apply's)."""
        journal = check_journal(self.store)
        if journal is None:
            _clear(self.store)
            return False
        if done is not None:
            journal = replace(
                journal,
                written={n: sha for n, sha in journal.written.items() if n in done},
                deleted=tuple(n for n in journal.deleted if n in done),
                reached=journal.reached & done,
            )
        rolled = bool(journal.files or journal.created) and not journal.committed
        with _signals_held():
            if rolled:
                _roll_back_journal(self.store, journal)
            _clear(self.store)
        return rolled

    def apply(self, change: Change, seen: dict[str, str], on_step: Callable[[str], None] | None = None) -> Applied:
        """Apply ``change`` (see the module docstring for the rule)."""
        store, hook = self.store, on_step or (lambda _name: None)
        step, begun, done = "pinned", False, set()
        try:
            hook(step)
            for name in change.touched():
                if problem := name_problem(name) or entry_problem(store / name):
                    raise ApplyError(f"refused: {problem}")
            raw = {name: (store / name).read_bytes() for name in md_names(store)}
            pinned = [n for n in change.touched() if n in raw and is_pinned(raw[n])]
            if pinned:
                raise ApplyError(f"refused: {', '.join(pinned)} is pinned (frontmatter)")
            step = "external-writer"
            hook(step)
            before = {name: sha256_bytes(data) for name, data in raw.items()}
            _check_unchanged(before, seen)
            bases = {n: change.base.get(n, seen.get(n)) for n in change.touched()}
            moved = [n for n in change.touched() if _digest_of(store / n) != bases[n]]
            if moved:
                raise ApplyError(
                    f"another writer touched the store since the plan was made (changed {', '.join(moved)})"
                )
            step = "snapshot"
            hook(step)
            begun = True  # from here a failure rolls back
            manifest = self._snapshot(change)
            step = "stage"
            hook(step)
            staged = {name: _stage(store / name, change.writes[name]) for name in sorted(change.writes)}
            # one flush for the copies and the new bytes, before the journal can name them
            copies = [store / SNAPSHOT_DIR / n for n, meta in manifest.items() if "offset" not in meta]
            sync_files(store, [store / SNAPSHOT_DIR / PACK_NAME, *copies, *staged.values()])
            _fsync_dir(store / SNAPSHOT_DIR)
            step = "wal"
            hook(step)
            shas = {name: sha256_bytes(data) for name, data in change.writes.items()}
            wal = store / SNAPSHOT_DIR / WAL_NAME
            begin = {
                "event": "begin",
                "version": WAL_VERSION,
                "files": manifest,
                "created": sorted(n for n in change.writes if n not in manifest),
                "writes": sorted(change.writes),
                "write_sha256": shas,
                "deletes": sorted(change.deletes),
            }
            _append(wal, begin)
            _fsync_dir(wal.parent)  # the journal's name too, before any file of the store changes
            for name in sorted(change.writes):
                step = f"write:{name}"
                hook(step)
                self._recheck(name, bases[name])
                done.add(name)  # before the rename: an interrupt between the two finds the old bytes
                _append(wal, {"event": "write", "file": name, "sha256": shas[name]}, sync=False)
                os.replace(staged[name], store / name)
            for name in sorted(change.deletes):
                step = f"delete:{name}"
                hook(step)
                self._recheck(name, bases[name])
                done.add(name)
                _append(wal, {"event": "delete", "file": name}, sync=False)
                (store / name).unlink()
            _fsync_dir(store)  # every rename and unlink durable before the commit record is
            step = "commit"
            hook(step)
            after = digests(store)
            _append(wal, {"event": "commit"})
            begun = False  # committed: a later hiccup must not undo it
            with _signals_held():
                _clear(store)
            return Applied(_md(change.writes), _md(change.deletes), before, after)
        except BaseException as err:
            if begun:
                self._roll_back(step, err, done)
            if isinstance(err, ApplyError):
                raise ApplyError(f"{store}: apply failed at {step}: {err}") from err
            if not isinstance(err, Exception):
                raise  # an interrupt after a clean rollback still interrupts
            raise ApplyError(f"{store}: apply failed at {step}: {type(err).__name__}: {err}") from err

    def _snapshot(self, change: Change) -> dict[str, dict]:
        """Pack the bytes of every file to write that exists, copy every file to delete (with its
        mode and owner), into the snapshot folder, verified; its manifest."""
        store, snap = self.store, self.store / SNAPSHOT_DIR
        snap.mkdir()
        manifest, packed = {}, []
        offset = 0
        for name in change.touched():
            try:
                st = os.lstat(store / name)
            except FileNotFoundError:
                continue
            data = (store / name).read_bytes()
            meta = {"sha256": sha256_bytes(data), "mode": stat.S_IMODE(st.st_mode), "uid": st.st_uid, "gid": st.st_gid}
            if name in change.writes:  # a rollback keeps the mode and owner the file has then
                manifest[name] = {**meta, "offset": offset, "size": len(data)}
                packed.append(data)
                offset += len(data)
                continue
            with open(snap / name, "wb") as fh:
                os.fchmod(fh.fileno(), stat.S_IMODE(st.st_mode) & 0o777)  # the copy carries the original's
                if (st.st_uid, st.st_gid) != (os.getuid(), os.getgid()):  # mode and owner for a rollback
                    with contextlib.suppress(PermissionError):
                        os.fchown(fh.fileno(), st.st_uid, st.st_gid)
                fh.write(data)  # made durable with the staged files, in one flush (the stage step)
            if sha256_bytes((snap / name).read_bytes()) != meta["sha256"]:
                raise ApplyError(f"snapshot: the copy of {name} does not verify")
            manifest[name] = meta
        with open(snap / PACK_NAME, "wb") as fh:  # made durable with the staged files (the stage step)
            fh.write(b"".join(packed))
        pack = (snap / PACK_NAME).read_bytes()
        for name, meta in manifest.items():
            if "offset" in meta and sha256_bytes(_slice(pack, meta)) != meta["sha256"]:
                raise ApplyError(f"snapshot: the copy of {name} does not verify")
        return manifest

    def _recheck(self, name: str, base: str | None) -> None:
        """Just before a write or delete: still a plain file, still the bytes the change was made on."""
        if problem := entry_problem(self.store / name):
            raise ApplyError(f"refused: {problem}")
        if _digest_of(self.store / name) != base:
            raise ApplyError(f"{name} was changed by another writer during the apply")

    def _roll_back(self, step: str, cause: BaseException, done: set[str]) -> None:
        """Undo a failed apply; if the undo fails, keep the journal so the next start finishes it."""
        try:
            self._recover(done)
        except Exception as err:
            raise ApplyError(
                f"{self.store}: apply failed at {step} ({type(cause).__name__}: {cause}) and its rollback failed "
                f"({type(err).__name__}: {err}); the journal is kept for the next start"
            ) from err


def _md(names) -> tuple[str, ...]:
    return tuple(n for n in sorted(names) if n.endswith(".md"))


def _check_unchanged(now: Mapping[str, str | None], seen: Mapping[str, str | None]) -> None:
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


def plan_change(raw: Mapping[str, bytes], plan: Plan) -> Change:
    """The change ``plan`` makes to the ``*.md`` files ``raw`` (name -> bytes); ``ApplyError`` if it cannot.

    A file the plan edits must be UTF-8: a rewrite would replace its other bytes with U+FFFD and
    lose them (CoalWash's ``sniffUnrewritable``), so the plan is refused, naming the file. A file
    the plan does not edit is never decoded; one it deletes whole is not rewritten, so it is not
    asked to be UTF-8.
    """
    edited = {it.file for it in plan.items if it.op != "delete-file"}
    files: dict[str, str] = {}
    for name, data in raw.items():
        try:
            files[name] = data.decode("utf-8")
        except UnicodeDecodeError as err:
            if name in edited:
                raise ApplyError(
                    f"refused: {name} is not valid UTF-8 (byte 0x{data[err.start]:02x} at offset {err.start}): "
                    "rewriting it would lose those bytes; convert it to UTF-8"
                ) from None
            files[name] = data.decode("utf-8", "replace")  # deleted whole or untouched: never written
    try:
        new_texts = apply_to_texts(files, plan)
    except PlanError as err:
        raise ApplyError(f"refused: {err}") from None
    writes = {n: t.encode("utf-8") for n, t in new_texts.items() if t != files[n]}
    deletes = tuple(sorted(set(files) - set(new_texts)))
    return Change(writes, deletes, {n: sha256_bytes(raw[n]) for n in {*writes, *deletes}})


def recover(store: str | Path) -> bool:
    """Roll a store back after a crashed apply; True when a rollback was needed and done.

    Takes the store lock (refused with ``ApplyError`` while an apply runs); a journal that is not
    confined to the store raises :class:`UnsafeStore` before anything is touched.
    """
    with Transaction(store) as tx:
        return tx.recovered


def apply_plan(
    store: str | Path, plan: Plan, seen: dict[str, str], *, on_step: Callable[[str], None] | None = None
) -> Applied:
    """Apply one plan to ``store`` as one transaction (see the module docstring)."""
    hook = on_step or (lambda _name: None)
    try:
        hook("lock")
    except Exception as err:
        raise ApplyError(f"{store}: apply failed at lock: {type(err).__name__}: {err}") from err
    with Transaction(store) as tx:
        raw = {name: (tx.store / name).read_bytes() for name in md_names(tx.store)}
        try:
            change = plan_change(raw, plan)
        except ApplyError as err:
            raise ApplyError(f"{tx.store}: apply failed at plan: {err}") from None
        return tx.apply(change, seen, hook)
