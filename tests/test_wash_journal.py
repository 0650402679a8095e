"""The apply's journal, in process: what a crashed apply leaves is rolled back exactly, and a
journal or snapshot someone crafted is refused before anything is touched (``washexp.wash.store.apply``'s
module doc). Fast: a crash is a forked child that dies at a chosen step (``os._exit``, no exec), a
crafted journal is written by hand; no subprocess of the command.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tests.test_wash_apply import PLAN, STORE, assert_no_leftovers, make_store
from washexp.errors import FixtureError
from washexp.hashing import sha256_bytes
from washexp.wash.store.apply import (
    LEGACY_LOCK,
    PACK_NAME,
    SNAPSHOT_DIR,
    TEMP_PREFIX,
    WAL_NAME,
    WAL_VERSION,
    ApplyError,
    Change,
    Transaction,
    UnsafeStore,
    apply_plan,
    check_journal,
    digests,
    recover,
)


def crash_at(store: Path, step: str, change: Change | None = None) -> None:
    """Run an apply in a forked child that dies (no clean-up, no rollback) when it reaches ``step``:
    what a SIGKILL there leaves."""
    seen = digests(store)
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 3
        try:

            def die(name: str) -> None:
                if name == step:
                    os._exit(9)

            if change is None:
                apply_plan(store, PLAN, seen, on_step=die)
            else:
                with Transaction(store) as tx:
                    tx.apply(change, seen, die)
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 9, "the child did not reach the step"


def everything(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() if p.is_file() else b"<dir>" for p in folder.rglob("*")}


def journal(store: Path, *records: object, raw: bytes | None = None) -> Path:
    snap = store / SNAPSHOT_DIR
    snap.mkdir(exist_ok=True)
    wal = snap / WAL_NAME
    wal.write_bytes(raw if raw is not None else "".join(json.dumps(r) + "\n" for r in records).encode())
    return wal


def begin(files: dict | None = None, created: object = (), **extra: object) -> dict:
    lists = {"writes": [], "write_sha256": {}, "deletes": []}
    return {"event": "begin", "version": WAL_VERSION, "files": files or {}, "created": list(created), **lists, **extra}


def meta(data: bytes, mode: int = 0o644) -> dict:
    return {"sha256": sha256_bytes(data), "mode": mode, "uid": os.getuid(), "gid": os.getgid()}


def refused(store: Path, match: str) -> None:
    """``recover`` refuses the store in one line and touches nothing (the journal included)."""
    before = everything(store)
    with pytest.raises(UnsafeStore, match=match) as err:
        recover(store)
    assert "\n" not in str(err.value) and str(err.value).endswith("; refusing to touch the store")
    assert str(err.value).startswith(f"{store}: {SNAPSHOT_DIR}")
    assert everything(store) == before


# ------------------------------------------------------------------ a crash, rolled back exactly


@pytest.mark.parametrize("step", ["write:build-notes.md", "delete:scratch-2026-05.md", "commit"])
def test_a_crash_after_the_journal_is_rolled_back_to_the_bytes_before(tmp_path, step):
    store = make_store(tmp_path / "store")
    before = everything(store)
    crash_at(store, step)
    assert (store / SNAPSHOT_DIR / WAL_NAME).is_file()
    assert recover(store) is True
    assert everything(store) == before
    assert recover(store) is False  # nothing left to undo


def test_a_crash_leaves_a_journal_that_names_what_was_done(tmp_path):
    store = make_store(tmp_path / "store")
    crash_at(store, "commit")
    found = check_journal(store)
    assert found is not None and not found.committed
    assert sorted(found.files) == ["MEMORY.md", "build-notes.md", "release-notes.md", "scratch-2026-05.md"]
    assert found.files["MEMORY.md"]["sha256"] == sha256_bytes(STORE["MEMORY.md"].encode())
    assert set(found.written) == {"MEMORY.md", "build-notes.md", "release-notes.md"}
    assert found.written["build-notes.md"] == sha256_bytes((store / "build-notes.md").read_bytes())
    assert found.deleted == ("scratch-2026-05.md",) and found.created == ()
    assert everything(store) != {}  # check_journal reads only: the crash's state is still there
    assert (store / SNAPSHOT_DIR / WAL_NAME).is_file()


def test_a_file_the_crashed_apply_created_is_removed_and_one_it_did_not_reach_stays_absent(tmp_path):
    store = make_store(tmp_path / "store")
    before = everything(store)
    change = Change({"a-new.md": b"# New\n", "z-new.md": b"# Zed\n"}, (), {"a-new.md": None, "z-new.md": None})
    crash_at(store, "write:z-new.md", change)  # a-new.md written, z-new.md announced but never written
    assert (store / "a-new.md").read_bytes() == b"# New\n" and not (store / "z-new.md").exists()
    found = check_journal(store)
    assert found is not None and found.created == ("a-new.md", "z-new.md") and found.files == {}
    assert recover(store) is True
    assert everything(store) == before


def test_a_created_file_someone_then_changed_is_kept(tmp_path):
    store = make_store(tmp_path / "store")
    change = Change({"a-new.md": b"# New\n"}, (), {"a-new.md": None})
    crash_at(store, "commit", change)
    (store / "a-new.md").write_bytes(b"# New, and a sync client's line\n")
    recover(store)
    assert (store / "a-new.md").read_bytes() == b"# New, and a sync client's line\n"


def test_a_deleted_file_that_came_back_with_other_bytes_is_a_conflict_left_alone(tmp_path):
    store = make_store(tmp_path / "store")
    crash_at(store, "commit")
    (store / "scratch-2026-05.md").write_bytes(b"# Scratch, another writer's\n")
    with pytest.raises(ApplyError, match=r"^rollback: scratch-2026-05\.md changed since the interrupted apply"):
        recover(store)
    assert (store / "scratch-2026-05.md").read_bytes() == b"# Scratch, another writer's\n"
    # the rest is undone, the journal is kept for a human
    assert (store / "MEMORY.md").read_bytes() == STORE["MEMORY.md"].encode()
    assert (store / SNAPSHOT_DIR / WAL_NAME).is_file()


def test_a_conflict_names_every_file_that_changed(tmp_path):
    store = make_store(tmp_path / "store")
    crash_at(store, "commit")
    (store / "MEMORY.md").write_bytes(b"# theirs\n")
    (store / "build-notes.md").write_bytes(b"# theirs too\n")
    with pytest.raises(ApplyError) as err:
        recover(store)
    assert str(err.value).startswith("rollback: MEMORY.md, build-notes.md changed since the interrupted apply; ")
    assert str(err.value).endswith(f"the journal kept in {store / SNAPSHOT_DIR} for a human")


def test_a_file_the_crash_never_reached_is_left_as_it_is_now(tmp_path):
    """A file in the snapshot whose write never landed is not ours to undo, even if it changed."""
    store = make_store(tmp_path / "store")
    crash_at(store, "write:release-notes.md")  # MEMORY.md and build-notes.md written
    (store / "release-notes.md").write_bytes(b"# a sync client's release notes\n")
    assert recover(store) is True
    assert (store / "release-notes.md").read_bytes() == b"# a sync client's release notes\n"
    assert (store / "MEMORY.md").read_bytes() == STORE["MEMORY.md"].encode()
    assert (store / "build-notes.md").read_bytes() == STORE["build-notes.md"].encode()
    assert_no_leftovers(store)


def test_a_corrupt_snapshot_copy_stops_the_rollback_and_keeps_the_journal(tmp_path):
    store = make_store(tmp_path / "store")
    crash_at(store, "commit")
    pack = store / SNAPSHOT_DIR / PACK_NAME  # a written file's bytes: a slice of the one pack
    offset = json.loads((store / SNAPSHOT_DIR / WAL_NAME).read_text().splitlines()[0])["files"]["MEMORY.md"]["offset"]
    data = bytearray(pack.read_bytes())
    data[offset] ^= 1
    pack.write_bytes(bytes(data))
    half = everything(store)
    with pytest.raises(ApplyError, match=rf"^rollback: the snapshot copy of MEMORY\.md is corrupt; left in {store}"):
        recover(store)
    assert everything(store) == half


def test_a_deleted_file_comes_back_with_its_snapshot_copys_mode_without_set_id_bits(tmp_path):
    store = make_store(tmp_path / "store")
    (store / "scratch-2026-05.md").chmod(0o640)
    crash_at(store, "commit")
    (store / SNAPSHOT_DIR / "scratch-2026-05.md").chmod(0o2751)  # a copy someone gave a set-gid bit
    recover(store)
    assert stat.S_IMODE((store / "scratch-2026-05.md").stat().st_mode) == 0o751
    assert (store / "scratch-2026-05.md").read_bytes() == STORE["scratch-2026-05.md"].encode()


def test_a_written_file_is_restored_with_the_mode_it_has(tmp_path):
    store = make_store(tmp_path / "store")
    crash_at(store, "commit")
    (store / "MEMORY.md").chmod(0o604)
    (store / SNAPSHOT_DIR / PACK_NAME).chmod(0o600)  # its bytes come from the pack, never its mode
    recover(store)
    assert stat.S_IMODE((store / "MEMORY.md").stat().st_mode) == 0o604


def test_a_committed_journal_is_only_cleared(tmp_path):
    store = make_store(tmp_path / "store")
    (store / "MEMORY.md").write_bytes(b"# after\n")
    wal = journal(store, begin({"MEMORY.md": meta(b"# before\n")}), {"event": "write", "file": "MEMORY.md"})
    with open(wal, "a") as fh:
        fh.write(json.dumps({"event": "commit"}) + "\n")
    found = check_journal(store)
    assert found is not None and found.committed  # no snapshot copy needed: nothing to undo
    assert recover(store) is False
    assert (store / "MEMORY.md").read_bytes() == b"# after\n"
    assert_no_leftovers(store)


def test_a_torn_last_line_is_a_crash_mid_append(tmp_path):
    store = make_store(tmp_path / "store")
    before = everything(store)
    crash_at(store, "commit")
    wal = store / SNAPSHOT_DIR / WAL_NAME
    with open(wal, "a") as fh:
        fh.write('{"event": "comm')
    assert recover(store) is True
    assert everything(store) == before


def test_an_empty_journal_or_a_snapshot_without_one_means_nothing_was_written(tmp_path):
    store = make_store(tmp_path / "store")
    before = everything(store)
    journal(store, raw=b"")
    (store / SNAPSHOT_DIR / "MEMORY.md").write_bytes(b"a copy\n")
    found = check_journal(store)
    assert found is not None and (found.files, found.created, found.written, found.deleted) == ({}, (), {}, ())
    assert not found.committed
    assert recover(store) is False
    assert everything(store) == before
    (store / SNAPSHOT_DIR).mkdir()
    assert check_journal(store) == found
    assert recover(store) is False and everything(store) == before


def test_clean_up_removes_our_temp_files_and_an_empty_legacy_lock_only(tmp_path):
    store = make_store(tmp_path / "store")
    (store / f"{TEMP_PREFIX}abc").write_bytes(b"half a write")
    (store / f"{TEMP_PREFIX}dir").mkdir()
    (store / LEGACY_LOCK).write_bytes(b"")
    assert recover(store) is False
    assert not (store / f"{TEMP_PREFIX}abc").exists() and (store / f"{TEMP_PREFIX}dir").is_dir()
    assert not (store / LEGACY_LOCK).exists()
    (store / LEGACY_LOCK).write_bytes(b"not ours: it holds bytes")
    recover(store)
    assert (store / LEGACY_LOCK).read_bytes() == b"not ours: it holds bytes"


# ------------------------------------------------------------------ a crafted journal is refused


def test_a_snapshot_that_is_a_file_is_refused(tmp_path):
    store = make_store(tmp_path / "store")
    (store / SNAPSHOT_DIR).write_bytes(b"")
    refused(store, rf"^{store}: {SNAPSHOT_DIR} is not a folder \(a symlink or a file\); refusing")


@pytest.mark.parametrize(
    ("plant", "problem"),
    [
        (lambda snap: (snap / "sub").mkdir(), "sub is not a regular file"),
        (lambda snap: (snap / "x.md").symlink_to("/etc/passwd"), "x.md is a symlink"),
        (lambda snap: (snap / "bell\x07.md").write_bytes(b""), "holds a control character"),
    ],
)
def test_a_snapshot_entry_that_is_not_a_plain_file_is_refused(tmp_path, plant, problem):
    store = make_store(tmp_path / "store")
    (store / SNAPSHOT_DIR).mkdir()
    plant(store / SNAPSHOT_DIR)
    refused(store, problem)


@pytest.mark.parametrize(
    "records",
    [
        [begin(created=["../outside.md"])],
        [begin(created="../outside.md")],
        [begin(), {"event": "write", "file": "sub/x.md"}],
        [begin(writes=["/etc/passwd"])],
        [begin(deletes=["..x.md"])],
        [begin(files=["../outside.md"])],
        [begin(files={".hidden.md": meta(b"x")})],
        [begin(files=7)],
    ],
    ids=["created", "created-not-a-list", "write", "writes", "deletes", "files-not-a-dict", "files", "files-a-number"],
)
def test_a_name_outside_the_store_anywhere_in_the_journal_is_refused(tmp_path, records):
    store = make_store(tmp_path / "store")
    journal(store, *records)
    refused(store, f"/{WAL_NAME}: .* (names a path|is hidden or leaves the folder|is not a file name)")


def test_a_journal_naming_a_folder_of_the_store_is_refused(tmp_path):
    store = make_store(tmp_path / "store")
    (store / "notes.md").mkdir()
    journal(store, begin(created=["notes.md"]))
    refused(store, f"/{WAL_NAME}: notes.md is not a regular file")


@pytest.mark.parametrize(
    "records",
    [
        [begin(), {"event": "write", "file": 7}],
        [begin(), {"event": "delete"}],
        [{**begin(), "version": 1}],
        [{**begin(), "version": WAL_VERSION + 1}],
        [begin(writes=["MEMORY.md"])],
        [begin(writes=["MEMORY.md"], write_sha256={"MEMORY.md": 7})],
        [begin(deletes="MEMORY.md")],
        [{"event": "begin", "version": WAL_VERSION, "created": []}],
        [{**begin(), "created": "MEMORY.md"}],
        [begin(), {"event": "write"}],
        [begin({"MEMORY.md": "abc"})],
        [begin({"MEMORY.md": {**meta(b"x"), "sha256": 1}})],
        [begin({"MEMORY.md": {**meta(b"x"), "mode": "0644"}})],
        [begin({"MEMORY.md": {**meta(b"x"), "uid": True}})],
        [begin({"MEMORY.md": {k: v for k, v in meta(b"x").items() if k != "gid"}})],
    ],
    ids=[
        "write-file-not-a-name",
        "delete-without-file",
        "version-1",
        "newer-version",
        "v3-a-write-without-its-sha256",
        "v3-sha256-not-a-string",
        "v3-deletes-not-a-list",
        "no-files",
        "created-not-a-list",
        "write-without-file",
        "meta-not-an-object",
        "sha-not-a-string",
        "mode-a-string",
        "uid-a-bool",
        "no-gid",
    ],
)
def test_a_journal_of_another_shape_is_refused(tmp_path, records):
    store = make_store(tmp_path / "store")
    journal(store, *records)
    (store / SNAPSHOT_DIR / "MEMORY.md").write_bytes(b"x")
    refused(store, f"/{WAL_NAME}: (an unknown journal shape|7 is not a file name|None is not a file name)")


def test_the_journal_must_begin_with_a_begin_record_of_objects(tmp_path):
    store = make_store(tmp_path / "store")
    journal(store, {"event": "write", "file": "MEMORY.md"}, begin())
    refused(store, f"/{WAL_NAME}: not a washexp journal")
    (store / SNAPSHOT_DIR / WAL_NAME).write_text(json.dumps(begin()) + "\n[1]\n")
    refused(store, f"/{WAL_NAME}: not a washexp journal")


def test_a_journal_without_the_snapshot_copy_it_lists_is_refused(tmp_path):
    store = make_store(tmp_path / "store")
    journal(store, begin({"MEMORY.md": meta(b"# before\n")}), {"event": "write", "file": "MEMORY.md"})
    refused(store, f"/{WAL_NAME}: no snapshot copy of 'MEMORY.md'")


def test_a_killed_wash_leaves_one_pack_for_its_writes_and_a_copy_per_delete(tmp_path):
    store = make_store(tmp_path / "store")
    crash_at(store, "commit")
    snap = store / SNAPSHOT_DIR
    files = json.loads((snap / WAL_NAME).read_text().splitlines()[0])["files"]
    assert sorted(p.name for p in snap.iterdir()) == sorted([PACK_NAME, WAL_NAME, "scratch-2026-05.md"])
    assert "offset" not in files["scratch-2026-05.md"] and "offset" in files["MEMORY.md"]


@pytest.mark.parametrize("where", [{"offset": 10**6, "size": 1}, {"offset": 0, "size": 10**6}])
def test_a_journal_slice_outside_the_pack_is_refused(tmp_path, where):
    store = make_store(tmp_path / "store")
    journal(store, begin({"MEMORY.md": {**meta(b"# before\n"), **where}}), {"event": "write", "file": "MEMORY.md"})
    (store / SNAPSHOT_DIR / PACK_NAME).write_bytes(b"# before\n")
    refused(store, f"/{WAL_NAME}: no snapshot copy of 'MEMORY.md' \\(not within {PACK_NAME}\\)")


@pytest.mark.parametrize(
    "where", [{"offset": -1, "size": 1}, {"offset": 0, "size": True}, {"offset": "0", "size": 1}, {"size": 1}]
)
def test_a_journal_slice_that_is_not_two_counts_is_refused(tmp_path, where):
    store = make_store(tmp_path / "store")
    journal(store, begin({"MEMORY.md": {**meta(b"x"), **where}}))
    (store / SNAPSHOT_DIR / PACK_NAME).write_bytes(b"x")
    refused(store, f"/{WAL_NAME}: an unknown journal shape")


def test_a_version_3_journal_with_a_slice_is_refused(tmp_path):
    store = make_store(tmp_path / "store")
    journal(store, {**begin({"MEMORY.md": {**meta(b"x"), "offset": 0, "size": 1}}), "version": 3})
    (store / SNAPSHOT_DIR / PACK_NAME).write_bytes(b"x")
    refused(store, f"/{WAL_NAME}: an unknown journal shape")


def test_a_deleted_file_is_never_restored_from_the_pack(tmp_path):
    """A pack slice has no mode or owner of its own: a crafted journal that packs a delete cannot
    make the rollback create the file with the journal's mode and owner."""
    store = make_store(tmp_path / "store", {"a.md": "# A\n"})
    (store / "a.md").unlink()
    (store / SNAPSHOT_DIR).mkdir()
    (store / SNAPSHOT_DIR / PACK_NAME).write_bytes(b"# A\n")
    journal(
        store,
        begin({"a.md": {**meta(b"# A\n", 0o4777), "offset": 0, "size": 4}}, deletes=["a.md"]),
        {"event": "delete", "file": "a.md"},
    )
    with pytest.raises(ApplyError, match=r"^rollback: no snapshot copy of the deleted a\.md"):
        recover(store)
    assert not (store / "a.md").exists()


def _old_snapshot(tmp_path: Path) -> tuple[Path, dict[str, bytes], dict]:
    """A store of a.md and b.md with a snapshot copy of each, as washexp wrote before the pack:
    the store, its files, the copies' manifest."""
    store = make_store(tmp_path / "store", {"a.md": "# A\n", "b.md": "# B\n"})
    before = everything(store)
    (store / SNAPSHOT_DIR).mkdir()
    for name in ("a.md", "b.md"):
        (store / SNAPSHOT_DIR / name).write_bytes((store / name).read_bytes())
    return store, before, {n: meta((store / n).read_bytes()) for n in ("a.md", "b.md")}


def test_a_version_3_journal_of_a_killed_wash_is_still_rolled_back(tmp_path):
    """A journal washexp 0.x left before the pack (version 3: a snapshot copy per file)."""
    store, before, files = _old_snapshot(tmp_path)
    (store / "a.md").write_bytes(b"# A2\n")
    (store / "b.md").unlink()
    journal(
        store,
        {**begin(files, writes=["a.md"], write_sha256={"a.md": sha256_bytes(b"# A2\n")}, deletes=["b.md"])}
        | {"version": 3},
        {"event": "write", "file": "a.md", "sha256": sha256_bytes(b"# A2\n")},
        {"event": "delete", "file": "b.md"},
    )
    assert recover(store) is True
    assert everything(store) == before


def test_a_journal_that_is_not_utf8_is_named(tmp_path):
    store = make_store(tmp_path / "store")
    journal(store, raw=b'{"event": "begin"}\n\xff\xfe\n')
    with pytest.raises(FixtureError, match=f"{WAL_NAME}: not UTF-8"):
        recover(store)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b"[" * 100_000 + b"]" * 100_000 + b"\n", "not usable JSON: nested too deeply"),
        (
            b'{"event": "begin", "n": ' + b"9" * 5000 + b"}\n",
            "not usable JSON: Exceeds the limit (4300 digits) for integer string conversion: value has 5000 digits",
        ),
    ],
    ids=["deep", "long-integer"],
)
def test_a_journal_json_cannot_use_is_named_in_one_line(tmp_path, raw, problem):
    store = make_store(tmp_path / "store")
    journal(store, raw=raw)
    with pytest.raises(FixtureError) as err:
        recover(store)
    assert str(err.value) == f"{store / SNAPSHOT_DIR / WAL_NAME}: {problem}"  # the first clause, one line


def test_a_journal_without_a_created_list_creates_nothing(tmp_path):
    """``created`` may be absent (nothing was created); only a ``created`` that is not a list is refused."""
    store = make_store(tmp_path / "store")
    before = everything(store)
    journal(store, {"event": "begin", "version": WAL_VERSION, "files": {}})
    found = check_journal(store)
    assert found is not None and found.created == ()
    assert recover(store) is False
    assert everything(store) == before


def test_the_begin_record_lists_the_files_written_deleted_and_created(tmp_path):
    store = make_store(tmp_path / "store", {"a.md": "# A\n", "b.md": "# B\n"})
    change = Change({"b.md": b"# B2\n", "c.md": b"# C\n"}, ("a.md",), {"c.md": None})
    crash_at(store, "wal", change)  # the snapshot is made: no journal yet
    assert not (store / SNAPSHOT_DIR / WAL_NAME).exists()
    recover(store)
    crash_at(store, "write:b.md", change)
    first = json.loads((store / SNAPSHOT_DIR / WAL_NAME).read_text().splitlines()[0])
    assert (first["event"], first["version"]) == ("begin", WAL_VERSION)
    assert (first["writes"], first["deletes"], first["created"]) == (["b.md", "c.md"], ["a.md"], ["c.md"])
    assert sorted(first["files"]) == ["a.md", "b.md"]


def test_a_file_deleted_after_the_crashed_apply_wrote_it_is_a_conflict_not_brought_back(tmp_path):
    store = make_store(tmp_path / "store")
    crash_at(store, "commit")
    (store / "MEMORY.md").unlink()  # someone removed the file our apply had rewritten
    with pytest.raises(ApplyError, match=r"^rollback: MEMORY\.md changed since the interrupted apply"):
        recover(store)
    assert not (store / "MEMORY.md").exists()


def test_a_rollback_goes_on_past_a_file_the_crash_never_touched(tmp_path):
    """The files are undone in name order; one still as it was (``a.md``, whose delete never ran)
    does not end the rollback before ``b.md``, which was written."""
    store = make_store(tmp_path / "store", {"a.md": "# A\n", "b.md": "# B\n"})
    before = everything(store)
    crash_at(store, "delete:a.md", Change({"b.md": b"# B2\n"}, ("a.md",)))
    assert (store / "b.md").read_bytes() == b"# B2\n"
    assert recover(store) is True
    assert everything(store) == before


# ------------------------------------------------------------------ the batched flush (issue 37)


def test_the_staged_files_of_a_crash_before_the_journal_are_removed(tmp_path):
    """A kill at ``wal``: the snapshot and every new file's temp file exist, flushed; no journal,
    so nothing of the store changed, and the next start removes them all."""
    store = make_store(tmp_path / "store")
    before = everything(store)
    crash_at(store, "wal")
    assert len(list(store.glob(TEMP_PREFIX + "*"))) == 3  # MEMORY.md, build-notes.md, release-notes.md
    assert recover(store) is False
    assert everything(store) == before


def test_a_kill_midway_through_staging_leaves_a_store_the_next_start_cleans(tmp_path, monkeypatch):
    """The window the stage step opens: some temp files written, others not, nothing flushed."""
    import washexp.wash.store.apply as apply_module

    store = make_store(tmp_path / "store")
    before = everything(store)
    real, calls = apply_module._stage, []

    def die_at_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            os._exit(9)
        return real(*args, **kwargs)

    monkeypatch.setattr(apply_module, "_stage", die_at_second)  # in the forked child, as in the parent
    crash_at(store, "never")
    assert len(list(store.glob(TEMP_PREFIX + "*"))) == 1
    assert recover(store) is False
    assert everything(store) == before


def test_a_power_cut_that_lost_the_per_file_records_is_still_rolled_back(tmp_path):
    """The write and delete records are not fsynced: a power cut may keep the renames (made durable
    by the store folder's fsync) and lose them. The begin record, fsynced before any rename, names
    each write's sha256 and each delete, which is enough to undo them."""
    store = make_store(tmp_path / "store")
    before = everything(store)
    crash_at(store, "commit")
    wal = store / SNAPSHOT_DIR / WAL_NAME
    wal.write_text(wal.read_text().splitlines()[0] + "\n")  # the begin record alone survived
    assert recover(store) is True
    assert everything(store) == before


def test_a_version_2_journal_is_still_rolled_back(tmp_path):
    """A journal an earlier washexp left (version 2: each write announced in its own record, no
    sha256 map in the begin record) is read as it was: only recorded writes are undone."""
    store, before, files = _old_snapshot(tmp_path)
    (store / "a.md").write_bytes(b"# A2\n")
    (store / "b.md").write_bytes(b"# B, a sync client's\n")  # announced in begin, never recorded
    journal(
        store,
        {"event": "begin", "version": 2, "files": files, "created": [], "writes": ["a.md", "b.md"], "deletes": []},
        {"event": "write", "file": "a.md", "sha256": sha256_bytes(b"# A2\n")},
    )
    assert recover(store) is True
    assert (store / "a.md").read_bytes() == b"# A\n"
    assert (store / "b.md").read_bytes() == b"# B, a sync client's\n"
    del before["b.md"]
    assert {k: v for k, v in everything(store).items() if k != "b.md"} == before


def test_a_file_another_writer_deletes_before_our_delete_is_not_brought_back(tmp_path):
    """In process the apply knows which files it reached: a delete announced in the begin record
    that its re-check then refused (someone else removed the file) is not ours to undo."""
    store = make_store(tmp_path / "store")
    before = everything(store)

    def co_writer(step: str) -> None:
        if step == "delete:scratch-2026-05.md":
            (store / "scratch-2026-05.md").unlink()

    with pytest.raises(ApplyError, match="scratch-2026-05.md was changed by another writer"):
        apply_plan(store, PLAN, digests(store), on_step=co_writer)
    del before["scratch-2026-05.md"]
    assert everything(store) == before


def _count_flushes(monkeypatch, syncfs: bool) -> dict[str, int]:
    import washexp.wash.store.apply as apply_module

    counts = {"fsync": 0, "syncfs": 0}
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        counts["fsync"] += 1
        real_fsync(fd)

    def fake_syncfs(fd: int) -> int:
        counts["syncfs"] += 1
        real_fsync(fd)  # the test's stand-in: this folder, not the whole filesystem
        return 0

    monkeypatch.setattr(apply_module.os, "fsync", fsync)
    monkeypatch.setattr(apply_module, "_syncfs", fake_syncfs if syncfs else None)
    return counts


@pytest.mark.parametrize("syncfs", [True, False], ids=["syncfs", "no-syncfs"])
def test_a_wash_costs_a_fixed_number_of_flushes_whatever_its_size(tmp_path, monkeypatch, syncfs):
    """39 s for a store of 2,001 notes: four fsyncs per file written (its snapshot copy, its
    journal record, the file, its folder). Now: the copies and the new files are flushed together
    (one ``syncfs``, or one fsync each where there is none), the journal and the folders a fixed
    number of times."""
    flushes = {}
    for files in (2, 40):
        store = tmp_path / f"store-{files}"
        make_store(store, {f"n{i:03d}.md": f"# N{i}\n" for i in range(files)})
        change = Change({f"n{i:03d}.md": b"# edited\n" for i in range(1, files)}, ("n000.md",))
        counts = _count_flushes(monkeypatch, syncfs)
        with Transaction(store) as tx:
            tx.apply(change, digests(store))
        flushes[files] = dict(counts)
        assert_no_leftovers(store)
    if syncfs:
        assert flushes[2] == flushes[40] and flushes[40]["syncfs"] == 1
    else:  # one fsync per new file: 38 more (the snapshot of the writes is one pack whatever its size)
        assert flushes[40]["fsync"] - flushes[2]["fsync"] == 38
