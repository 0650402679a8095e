"""The wash plan (validation, JSON round-trip, byte-faithful in-memory edits) and the transactional apply."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest

from washexp.hashing import sha256_bytes
from washexp.wash.coalwash.files import md_names
from washexp.wash.plan import Plan, PlanError, PlanItem, apply_to_texts, split_lines
from washexp.wash.store import apply as apply_module
from washexp.wash.store.apply import (
    SNAPSHOT_DIR,
    TEMP_PREFIX,
    WAL_NAME,
    ApplyError,
    Change,
    Transaction,
    apply_plan,
    digests,
    recover,
)

ROOT = Path(__file__).resolve().parent.parent

# A small real-shaped memory store: an index, an LF topic file with fat, a CRLF file without a
# final newline (written on Windows), a done scratch file, and a pinned conventions file.
STORE = {
    "MEMORY.md": (
        "# Memory index\n\n"
        "- [Build notes](build-notes.md) — toolchain pins and CI\n"
        "- [Release notes](release-notes.md) — what shipped when\n"
        "- [[scratch-2026-05]] — May scratch\n"
        "- [Conventions](conventions.md) — house rules\n"
    ),
    "build-notes.md": (
        "# Build notes\n\n"
        "- Node pinned at 22.4.1 — the 22.5.x line broke the sandboxed fs tests.\n"
        "- To restate the point already captured elsewhere in this store, Node is pinned.\n"
        "- Build cache lives in .cache/turbo — safe to delete, always regenerated.\n"
        "- CI matrix: ubuntu + windows + macos, Node 22 + 24.\n"
    ),
    "release-notes.md": (
        "# Release notes\r\n\r\n"
        "v2.3.0 (2026-04-02): C:\\tools\\lint.exe replaced by ruff.\r\n"
        "It is perhaps worth noting, arguably, that the release went out on time.\r\n"
        "v2.4.0 (2026-05-19): the `retry_budget` key replaces `max_retries`."
    ),
    "scratch-2026-05.md": "# Scratch May\n\n- [x] bump Node (done 2026-05-03)\n- [x] rotate CI token (done)\n",
    "conventions.md": "---\nname: conventions\npinned: true\n---\n# Conventions\n\nNever rebase a shared branch.\n",
}

# Writes in two files and one delete: the multi-file plan every failure test runs.
PLAN = Plan(
    (
        PlanItem("build-notes.md", 4, 4, "duplicate", "restates the Node pin above", "delete"),
        PlanItem("release-notes.md", 4, 4, "over-verbose", "hedging filler", "delete"),
        PlanItem(
            "release-notes.md",
            3,
            3,
            "over-verbose",
            "shorter",
            "replace",
            "v2.3.0 (2026-04-02): ruff replaces C:\\tools\\lint.exe.",
        ),
        PlanItem("scratch-2026-05.md", 0, 0, "done-point-in-time", "every entry is done", "delete-file"),
        PlanItem("MEMORY.md", 5, 5, "done-point-in-time", "its file goes", "delete"),
    ),
    approved_drops=({"type": "wikilinks", "value": "scratch-2026-05"},),
    washer="reference",
)
STEPS = [
    "lock",
    "pinned",
    "external-writer",
    "snapshot",
    "stage",
    "wal",
    "write:MEMORY.md",
    "write:build-notes.md",
    "write:release-notes.md",
    "delete:scratch-2026-05.md",
    "commit",
]


def make_store(folder: Path, files: dict[str, str] = STORE) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_bytes(text.encode("utf-8"))  # bytes: no newline translation
    return folder


def state(folder: Path) -> dict[str, str]:
    """The store as the scorer sees it: every top-level .md file and its sha256."""
    return {name: sha256_bytes((folder / name).read_bytes()) for name in md_names(folder)}


def assert_no_leftovers(folder: Path) -> None:
    assert not (folder / SNAPSHOT_DIR).exists()
    assert not list(folder.glob(TEMP_PREFIX + "*"))


# --- the plan ---------------------------------------------------------------------------------


def test_plan_round_trips_through_json():
    plan = Plan(PLAN.items, PLAN.approved_drops, "reference", ("dead link [[ghost]] in MEMORY.md:9",))
    again = Plan.from_dict(json.loads(json.dumps(plan.to_dict())))
    assert again == plan
    assert again.items[2].text == "v2.3.0 (2026-04-02): ruff replaces C:\\tools\\lint.exe."


def _bad(**change) -> dict:
    item = {"file": "a.md", "start": 2, "end": 3, "cls": "duplicate", "reason": "why", "op": "delete", "text": None}
    good = dict(item, start=1, end=1)
    return {"items": [good, {**item, **change}]}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"start": 0}, "plan items[1].start: must be >= 1"),
        ({"start": 4}, "plan items[1].end: must be >= start 4, got 3"),
        ({"start": True}, "plan items[1].start: must be an integer, got True"),
        ({"file": "notes/a.md"}, "plan items[1].file: must be a bare file name without a path separator"),
        ({"file": "a.txt"}, "plan items[1].file: must end in .md"),
        ({"op": "merge"}, "plan items[1].op: must be one of delete, delete-file, replace, got 'merge'"),
        ({"cls": "hedging"}, "plan items[1].cls: must be one of"),
        ({"reason": " "}, "plan items[1].reason: must be a non-empty string"),
        ({"op": "replace"}, "plan items[1].text: replace needs a string text, got None"),
        ({"text": "x"}, "plan items[1].text: must be null for delete"),
        ({"lines": [2, 3]}, "plan items[1]: unknown field(s) 'lines'"),
    ],
)
def test_a_bad_item_is_one_line_naming_index_and_field(change, message):
    with pytest.raises(PlanError) as err:
        Plan.from_dict(_bad(**change))
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)
    assert isinstance(err.value, ValueError)


def test_a_missing_field_and_a_bad_plan_shape_are_named():
    data = _bad()
    del data["items"][1]["reason"]
    with pytest.raises(PlanError, match=r"^plan items\[1\]\.reason: is missing$"):
        Plan.from_dict(data)
    with pytest.raises(PlanError, match="^plan: items is missing$"):
        Plan.from_dict({"washer": "x"})
    with pytest.raises(PlanError, match=r"approved_drops\[0\] must be an object with a string type"):
        Plan.from_dict({"items": [], "approved_drops": ["scratch"]})


def test_delete_file_ignores_its_line_range():
    item = PlanItem("scratch.md", 0, 0, "done-point-in-time", "all done", "delete-file")
    assert apply_to_texts({"scratch.md": "x\n", "keep.md": "y\n"}, Plan((item,))) == {"keep.md": "y\n"}


# --- apply_to_texts ---------------------------------------------------------------------------


def test_the_multi_file_plan_in_memory():
    out = apply_to_texts(STORE, PLAN)
    assert set(out) == set(STORE) - {"scratch-2026-05.md"}
    assert "To restate" not in out["build-notes.md"]
    assert out["build-notes.md"].count("\n") == STORE["build-notes.md"].count("\n") - 1
    assert out["release-notes.md"] == (
        "# Release notes\r\n\r\nv2.3.0 (2026-04-02): ruff replaces C:\\tools\\lint.exe.\r\n"
        "v2.4.0 (2026-05-19): the `retry_budget` key replaces `max_retries`."
    )
    assert "[[scratch-2026-05]]" not in out["MEMORY.md"]
    assert out["conventions.md"] is STORE["conventions.md"]  # untouched: the very same text


def test_several_items_in_one_file_apply_bottom_up():
    text = "".join(f"line {n}\n" for n in range(1, 9))
    items = (
        PlanItem("a.md", 2, 3, "duplicate", "dup", "delete"),
        PlanItem("a.md", 7, 7, "over-verbose", "shorter", "replace", "seven\nseven-b"),
        PlanItem("a.md", 5, 5, "superseded", "gone", "delete"),
    )
    out = apply_to_texts({"a.md": text}, Plan(items))["a.md"]
    assert out == "line 1\nline 4\nline 6\nseven\nseven-b\nline 8\n"


def test_crlf_endings_survive_replace_and_delete():
    text = "# T\r\none\r\ntwo\r\nthree\r\n"
    items = (
        PlanItem("a.md", 2, 2, "over-verbose", "r", "replace", "uno\ndos"),
        PlanItem("a.md", 4, 4, "superseded", "d", "delete"),
    )
    assert apply_to_texts({"a.md": text}, Plan(items))["a.md"] == "# T\r\nuno\r\ndos\r\ntwo\r\n"


def test_replace_text_with_crlf_is_read_as_lf():
    item = PlanItem("a.md", 1, 1, "over-verbose", "r", "replace", "x\r\ny")
    assert apply_to_texts({"a.md": "a\nb\n"}, Plan((item,)))["a.md"] == "x\ny\nb\n"


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        (PlanItem("a.md", 3, 3, "over-verbose", "r", "replace", "gamma\ndelta"), "alpha\r\nbeta\r\ngamma\ndelta"),
        (PlanItem("a.md", 2, 3, "superseded", "d", "delete"), "alpha"),
        (PlanItem("a.md", 1, 3, "superseded", "d", "delete"), ""),
        (PlanItem("a.md", 1, 1, "superseded", "d", "delete"), "beta\r\ngamma"),
    ],
)
def test_a_file_without_final_newline_stays_without(item, expected):
    assert apply_to_texts({"a.md": "alpha\r\nbeta\r\ngamma"}, Plan((item,)))["a.md"] == expected


def test_split_lines_counts_as_a_reader_does():
    assert split_lines("a\r\nb\n") == ["a\r\n", "b\n"]
    assert split_lines("a\nb") == ["a\n", "b"]
    assert split_lines("") == []
    assert split_lines("a\rb\n") == ["a\rb\n"]  # a lone CR is not a line break


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (
            [PlanItem("a.md", 1, 2, "duplicate", "x", "delete"), PlanItem("a.md", 2, 3, "duplicate", "y", "delete")],
            r"plan items\[1\]\.start: lines 2-3 overlap items\[0\] lines 1-2",
        ),
        ([PlanItem("a.md", 3, 4, "duplicate", "x", "delete")], r"plan items\[0\]\.end: a\.md has 3 lines"),
        ([PlanItem("b.md", 1, 1, "duplicate", "x", "delete")], r"plan items\[0\]\.file: no file 'b\.md'"),
        (
            [
                PlanItem("a.md", 0, 0, "duplicate", "x", "delete-file"),
                PlanItem("a.md", 1, 1, "duplicate", "y", "delete"),
            ],
            r"plan items\[1\]: a\.md is deleted by another item",
        ),
    ],
)
def test_apply_to_texts_refuses_an_inconsistent_plan(items, message):
    with pytest.raises(PlanError, match=message):
        apply_to_texts({"a.md": "x\ny\nz\n"}, Plan(tuple(items)))


# --- the transactional apply ------------------------------------------------------------------


def test_apply_writes_the_plan_and_cleans_up(tmp_path):
    memdir = make_store(tmp_path / "store")
    seen = digests(memdir)
    steps: list[str] = []
    applied = apply_plan(memdir, PLAN, seen, on_step=steps.append)
    assert steps == STEPS
    expected = apply_to_texts(STORE, PLAN)
    assert {n: (memdir / n).read_bytes() for n in md_names(memdir)} == {n: t.encode() for n, t in expected.items()}
    assert applied.written == ("MEMORY.md", "build-notes.md", "release-notes.md")
    assert applied.deleted == ("scratch-2026-05.md",)
    assert applied.before == seen
    assert applied.after == state(memdir)
    assert_no_leftovers(memdir)
    assert sorted(p.name for p in memdir.iterdir()) == sorted(expected)  # no lock file, no journal, no temp file


@pytest.mark.parametrize("step", STEPS)
def test_a_failure_at_any_step_leaves_the_store_byte_identical(tmp_path, step):
    """The trap: a rollback that forgets a file already written, or a file already deleted."""
    memdir = make_store(tmp_path / "store")
    before = state(memdir)

    def fail_at(name: str) -> None:
        if name == step:
            raise OSError(28, "No space left on device (injected)")

    with pytest.raises(ApplyError) as err:
        apply_plan(memdir, PLAN, dict(before), on_step=fail_at)
    assert f"apply failed at {step}: OSError" in str(err.value)
    assert "\n" not in str(err.value)
    assert state(memdir) == before  # same file set, same bytes
    assert_no_leftovers(memdir)
    assert apply_plan(memdir, PLAN, before).deleted == ("scratch-2026-05.md",)  # the lock was released


def test_a_pinned_file_is_refused_before_anything_is_written(tmp_path):
    memdir = make_store(tmp_path / "store")
    before = state(memdir)
    pinned = Plan((*PLAN.items, PlanItem("conventions.md", 7, 7, "trivially-obvious", "obvious", "delete")))
    steps: list[str] = []
    with pytest.raises(ApplyError, match=r"apply failed at pinned: refused: conventions\.md is pinned"):
        apply_plan(memdir, pinned, before, on_step=steps.append)
    assert steps == ["lock", "pinned"]
    assert state(memdir) == before
    assert_no_leftovers(memdir)


def test_pinned_must_be_true_in_the_frontmatter(tmp_path):
    files = {
        "a.md": "---\npinned: false\n---\nkeep\nfat\n",
        "b.md": "# B\n\npinned: true\nfat\n",  # prose, not frontmatter
    }
    memdir = make_store(tmp_path / "store", files)
    plan = Plan(
        tuple(PlanItem(n, 5 if n == "a.md" else 4, 5 if n == "a.md" else 4, "duplicate", "x", "delete") for n in files)
    )
    assert apply_plan(memdir, plan, digests(memdir)).written == ("a.md", "b.md")


@pytest.mark.parametrize(
    ("writer", "named"),
    [
        (
            lambda d: (d / "build-notes.md").write_text(STORE["build-notes.md"] + "- new fact\n"),
            "changed build-notes.md",
        ),
        (lambda d: (d / "new-topic.md").write_text("# New\n"), "appeared new-topic.md"),
        (lambda d: (d / "conventions.md").unlink(), "vanished conventions.md"),
    ],
)
def test_an_external_writer_aborts_before_anything_is_written(tmp_path, writer, named):
    memdir = make_store(tmp_path / "store")
    seen = digests(memdir)
    writer(memdir)
    now = state(memdir)
    with pytest.raises(ApplyError, match=f"apply failed at external-writer: another writer .*{named}"):
        apply_plan(memdir, PLAN, seen)
    assert state(memdir) == now
    assert_no_leftovers(memdir)


def test_a_writer_during_the_apply_rolls_it_back(tmp_path):
    memdir = make_store(tmp_path / "store")
    before = state(memdir)

    def co_writer(name: str) -> None:
        if name == "write:release-notes.md":  # a sync client rewrites it between our writes
            (memdir / "release-notes.md").write_bytes(b"# Release notes\r\nsynced")

    with pytest.raises(
        ApplyError, match=r"at write:release-notes\.md: release-notes\.md was changed by another writer"
    ):
        apply_plan(memdir, PLAN, before, on_step=co_writer)
    # our writes are undone; the other writer's bytes are its own and stay
    assert state(memdir) == before | {"release-notes.md": sha256_bytes(b"# Release notes\r\nsynced")}
    assert_no_leftovers(memdir)


def test_a_second_concurrent_apply_is_refused_not_blocked(tmp_path):
    memdir = make_store(tmp_path / "store")
    seen = digests(memdir)
    refusals: list[str] = []

    def second_apply(name: str) -> None:
        if name == "snapshot":
            try:
                apply_plan(memdir, PLAN, seen)
            except ApplyError as err:
                refusals.append(str(err))

    applied = apply_plan(memdir, PLAN, seen, on_step=second_apply)
    assert len(refusals) == 1 and "another apply holds the store" in refusals[0]
    assert applied.deleted == ("scratch-2026-05.md",)  # the first apply went on untroubled
    # held by someone else: recover is refused as well
    with Transaction(memdir), pytest.raises(ApplyError, match="another apply holds"):
        recover(memdir)


def test_a_subprocess_another_thread_starts_never_makes_the_lock_look_held(tmp_path):
    """A forked child holds a copy of the lock until it execs: the lock just released in one round
    looked held in the next (a wash round refused as 'another apply', seen in a ceiling run)."""
    memdir = make_store(tmp_path / "store")
    stop = threading.Event()

    def spawn() -> None:
        while not stop.is_set():
            subprocess.run(["true"], check=True)

    spawner = threading.Thread(target=spawn, daemon=True)
    spawner.start()
    refused = 0
    try:
        for _ in range(3000):
            try:
                with Transaction(memdir):
                    pass
            except ApplyError:
                refused += 1
    finally:
        stop.set()
        spawner.join()
    assert refused == 0


def test_a_lock_another_process_holds_is_refused_after_the_wait(tmp_path, monkeypatch):
    memdir = make_store(tmp_path / "store")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(memdir)], stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline() == "held\n"
        monkeypatch.setattr(apply_module, "LOCK_WAIT_S", 0.3)
        t0 = time.monotonic()
        with pytest.raises(ApplyError, match="another apply holds the store"):
            Transaction(memdir).__enter__()
        assert time.monotonic() - t0 >= 0.3
    finally:
        holder.communicate("")
    with Transaction(memdir):  # released with the process: taken at once
        pass


HOLD = textwrap.dedent(
    """
    import fcntl, os, sys
    fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("held", flush=True)
    sys.stdin.read()
    """
)

CRASH = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    from washexp.wash.store.apply import apply_plan
    from washexp.wash.plan import Plan

    store, plan, crash_at = Path(sys.argv[1]), Plan.from_dict(json.loads(sys.argv[2])), sys.argv[4]
    seen = json.loads(sys.argv[3])

    def die(step):
        if step == crash_at:
            os._exit(9)  # the process dies: no except, no finally, no rollback

    apply_plan(store, plan, seen, on_step=die)
    """
)


def crash_apply(memdir: Path, seen: dict[str, str], crash_at: str) -> None:
    args = [sys.executable, "-c", CRASH, str(memdir), json.dumps(PLAN.to_dict()), json.dumps(seen), crash_at]
    proc = subprocess.run(args, cwd=ROOT, env={"PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 9, proc.stderr


def test_recover_rolls_back_a_crash_after_some_writes(tmp_path):
    memdir = make_store(tmp_path / "store")
    before = state(memdir)
    crash_apply(memdir, before, "delete:scratch-2026-05.md")
    half = state(memdir)
    assert half != before and set(half) == set(before)  # three files written, the delete never ran
    assert (memdir / SNAPSHOT_DIR / WAL_NAME).exists()
    assert recover(memdir) is True
    assert state(memdir) == before
    assert_no_leftovers(memdir)
    assert recover(memdir) is False


def test_a_crash_before_the_wal_needs_no_rollback(tmp_path):
    memdir = make_store(tmp_path / "store")
    before = state(memdir)
    crash_apply(memdir, before, "wal")  # the snapshot exists, no WAL: nothing was written
    assert (memdir / SNAPSHOT_DIR).exists()
    assert recover(memdir) is False
    assert state(memdir) == before
    assert_no_leftovers(memdir)


def test_the_next_apply_recovers_a_crashed_one_first(tmp_path):
    memdir = make_store(tmp_path / "store")
    before = state(memdir)
    crash_apply(memdir, before, "write:release-notes.md")
    assert state(memdir) != before
    applied = apply_plan(memdir, PLAN, before)  # the plan was made on the store before the crash
    assert applied.before == before
    assert_no_leftovers(memdir)


def test_an_interrupt_mid_apply_is_rolled_back_and_still_interrupts(tmp_path):
    memdir = make_store(tmp_path / "store")
    before = state(memdir)

    def ctrl_c(name: str) -> None:
        if name == "delete:scratch-2026-05.md":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        apply_plan(memdir, PLAN, before, on_step=ctrl_c)
    assert state(memdir) == before
    assert_no_leftovers(memdir)


def test_a_rollback_never_overwrites_a_file_another_writer_changed_meanwhile(tmp_path):
    """Mutant killed (issue 36): a rollback that restored every written file from its snapshot
    would overwrite what another writer put there after our write landed."""
    store = tmp_path / "store"
    store.mkdir()
    (store / "a.md").write_bytes(b"# A\n\nold line\n")
    (store / "b.md").write_bytes(b"# B\n")
    seen = digests(store)
    change = Change({"a.md": b"# A\n\nnew line\n", "b.md": b"# B, edited\n"}, ())

    def other_writer_then_crash(step: str) -> None:
        if step == "commit":
            (store / "a.md").write_bytes(b"# A\n\nanother session's line\n")
            raise RuntimeError("crash before the commit record")

    match = r"rollback: a\.md changed since the interrupted apply"
    with pytest.raises(ApplyError, match=match), Transaction(store) as tx:
        tx.apply(change, seen, other_writer_then_crash)
    assert (store / "a.md").read_bytes() == b"# A\n\nanother session's line\n"  # theirs stands
    assert (store / "b.md").read_bytes() == b"# B\n"  # ours is undone


# --- the change a plan makes, and the files' modes (issue 36: mutants of plan_change and write_atomic)


def test_a_plan_change_writes_only_what_changed_and_deletes_whole_files():
    from washexp.wash.store.apply import plan_change

    raw = {"a.md": b"# A\nfat\n", "same.md": b"# Same\n", "gone.md": b"# Gone\n"}
    plan = Plan(
        (
            PlanItem("a.md", 2, 2, "duplicate", "x", "delete"),
            PlanItem("gone.md", 0, 0, "done-point-in-time", "x", "delete-file"),
        )
    )
    change = plan_change(raw, plan)
    assert dict(change.writes) == {"a.md": b"# A\n"} and change.deletes == ("gone.md",)
    assert dict(change.base) == {"a.md": sha256_bytes(raw["a.md"]), "gone.md": sha256_bytes(raw["gone.md"])}


def test_only_a_file_the_plan_edits_must_be_utf8():
    """CoalWash's ``sniffUnrewritable``: an edited file that is not UTF-8 is refused, naming the byte;
    one the plan deletes whole, or does not touch, is never rewritten and may hold any bytes."""
    from washexp.wash.store.apply import plan_change

    raw = {"a.md": b"# A\nfat\n", "latin.md": b"# caf\xe9\nfat\n", "old.md": b"\xff\xfe# UTF-16\n"}
    kept = plan_change(raw, Plan((PlanItem("a.md", 2, 2, "duplicate", "x", "delete"),)))
    assert dict(kept.writes) == {"a.md": b"# A\n"} and kept.deletes == ()
    gone = plan_change(raw, Plan((PlanItem("old.md", 0, 0, "done-point-in-time", "x", "delete-file"),)))
    assert dict(gone.writes) == {} and gone.deletes == ("old.md",)
    with pytest.raises(ApplyError) as err:
        plan_change(raw, Plan((PlanItem("latin.md", 2, 2, "duplicate", "x", "delete"),)))
    assert str(err.value) == (
        "refused: latin.md is not valid UTF-8 (byte 0xe9 at offset 5): rewriting it would lose those bytes; "
        "convert it to UTF-8"
    )


def test_a_plan_that_does_not_fit_the_files_is_refused():
    from washexp.wash.store.apply import plan_change

    with pytest.raises(ApplyError, match=r"^refused: .*a\.md"):
        plan_change({"a.md": b"# A\n"}, Plan((PlanItem("a.md", 5, 5, "duplicate", "x", "delete"),)))


def test_a_plan_refused_in_the_store_names_the_step_and_touches_nothing(tmp_path):
    memdir = make_store(tmp_path / "store", {"a.md": "# A\nfat\n"})
    (memdir / "a.md").write_bytes(b"# caf\xe9\nfat\n")
    seen = digests(memdir)
    with pytest.raises(ApplyError) as err:
        apply_plan(memdir, Plan((PlanItem("a.md", 2, 2, "duplicate", "x", "delete"),)), seen)
    assert str(err.value).startswith(f"{memdir}: apply failed at plan: refused: a.md is not valid UTF-8")
    assert (memdir / "a.md").read_bytes() == b"# caf\xe9\nfat\n"
    assert_no_leftovers(memdir)


def test_a_file_an_apply_creates_gets_the_mode_the_umask_gives_and_a_written_one_keeps_its_own(tmp_path):
    memdir = make_store(tmp_path / "store", {"a.md": "# A\nfat\n"})
    (memdir / "a.md").chmod(0o604)
    old = os.umask(0o022)
    try:
        with Transaction(memdir) as tx:
            tx.apply(Change({"new.md": b"# New\n", "a.md": b"# A\n"}, (), {"new.md": None}), digests(memdir))
    finally:
        os.umask(old)
    assert stat.S_IMODE((memdir / "new.md").stat().st_mode) == 0o644  # 0o666 less the umask: never executable
    assert stat.S_IMODE((memdir / "a.md").stat().st_mode) == 0o604
    assert (memdir / "new.md").read_bytes() == b"# New\n" and (memdir / "a.md").read_bytes() == b"# A\n"


def test_applied_names_only_the_md_files_it_wrote_and_deleted(tmp_path):
    memdir = make_store(tmp_path / "store", {"a.md": "# A\n", "b.md": "# B\n"})
    (memdir / "notes.txt").write_bytes(b"not a store file\n")
    change = Change(
        {"a.md": b"# A2\n", "notes.txt": b"x\n"}, ("b.md",), {"notes.txt": sha256_bytes(b"not a store file\n")}
    )
    with Transaction(memdir) as tx:
        applied = tx.apply(change, digests(memdir))
    assert (applied.written, applied.deleted) == (("a.md",), ("b.md",))
    assert applied.after == {"a.md": sha256_bytes(b"# A2\n")}


def test_a_change_naming_a_path_or_a_symlink_is_refused_before_anything_is_written(tmp_path):
    memdir = make_store(tmp_path / "store", {"a.md": "# A\n"})
    (memdir / "link.md").symlink_to(tmp_path / "outside.md")
    seen = digests(memdir)
    for change, problem in [
        (Change({"../outside.md": b"x"}, ()), "'../outside.md' names a path"),
        (Change({}, ("link.md",)), "link.md is a symlink"),
    ]:
        with pytest.raises(ApplyError) as err, Transaction(memdir) as tx:
            tx.apply(change, seen)
        assert str(err.value).startswith(f"{memdir}: apply failed at pinned: refused: {problem}")
    assert not (tmp_path / "outside.md").exists() and (memdir / "a.md").read_bytes() == b"# A\n"


def test_a_file_moved_since_the_plan_is_named(tmp_path):
    """The change's base, not only ``seen``: a file the change was made on is the bytes it read."""
    memdir = make_store(tmp_path / "store", {"a.md": "# A\n", "b.md": "# B, made since\n"})
    seen = digests(memdir)
    change = Change({"a.md": b"# A2\n", "b.md": b"# B\n"}, (), {"a.md": sha256_bytes(b"# an older A\n"), "b.md": None})
    with pytest.raises(ApplyError) as err, Transaction(memdir) as tx:
        tx.apply(change, seen)
    assert str(err.value) == (
        f"{memdir}: apply failed at external-writer: another writer touched the store since the plan was made "
        "(changed a.md, b.md)"
    )
    assert (memdir / "a.md").read_bytes() == b"# A\n"


def test_a_rollback_that_fails_says_both_causes_and_keeps_the_journal(tmp_path):
    memdir = make_store(tmp_path / "store")
    seen = digests(memdir)

    def overwrite_then_fail(step: str) -> None:
        if step == "delete:scratch-2026-05.md":
            (memdir / "MEMORY.md").write_bytes(b"# another session's index\n")  # after our write landed
            raise OSError(28, "disk full")

    with pytest.raises(ApplyError) as err:
        apply_plan(memdir, PLAN, seen, on_step=overwrite_then_fail)
    assert str(err.value) == (
        f"{memdir}: apply failed at delete:scratch-2026-05.md (OSError: [Errno 28] disk full) and its rollback "
        f"failed (ApplyError: rollback: MEMORY.md changed since the interrupted apply; left as it is, the journal "
        f"kept in {memdir / SNAPSHOT_DIR} for a human); the journal is kept for the next start"
    )
    assert (memdir / SNAPSHOT_DIR / WAL_NAME).is_file()
    assert (memdir / "MEMORY.md").read_bytes() == b"# another session's index\n"


def test_a_rollback_removes_a_file_the_apply_created_and_restores_the_rest(tmp_path):
    """The apply's own rollback (in process): a file it created goes, one it wrote after it (in name
    order) is put back, a file it was to delete keeps its mode."""
    memdir = make_store(tmp_path / "store", {"b.md": "# B\n", "c.md": "# C\n"})
    (memdir / "c.md").chmod(0o640)
    before = {p.name: (p.read_bytes(), stat.S_IMODE(p.stat().st_mode)) for p in memdir.iterdir()}
    change = Change({"a-new.md": b"# New\n", "b.md": b"# B2\n"}, ("c.md",), {"a-new.md": None})

    def fail(step: str) -> None:
        if step == "commit":
            raise OSError(5, "injected")

    with pytest.raises(ApplyError, match="apply failed at commit: OSError"), Transaction(memdir) as tx:
        tx.apply(change, digests(memdir), fail)
    assert {p.name: (p.read_bytes(), stat.S_IMODE(p.stat().st_mode)) for p in memdir.iterdir()} == before


def test_a_kill_after_the_commit_record_keeps_the_change(tmp_path, monkeypatch):
    """Killed after the commit record, before the clean-up: the next start finds a committed journal
    and undoes nothing."""

    class Killed(BaseException):
        pass

    memdir = make_store(tmp_path / "store", {"a.md": "# A\n"})
    real_clear = apply_module._clear

    def killed_at_the_clean_up(folder: Path) -> None:
        if (folder / SNAPSHOT_DIR / WAL_NAME).exists():  # the clean-up after the commit record
            raise Killed
        real_clear(folder)  # the clean-up on entering

    monkeypatch.setattr(apply_module, "_clear", killed_at_the_clean_up)
    with pytest.raises(Killed), Transaction(memdir) as tx:
        tx.apply(Change({"a.md": b"# A2\n"}, ()), digests(memdir))
    monkeypatch.undo()
    assert (memdir / SNAPSHOT_DIR / WAL_NAME).is_file()
    assert recover(memdir) is False
    assert (memdir / "a.md").read_bytes() == b"# A2\n"
    assert_no_leftovers(memdir)


def test_every_pinned_file_of_a_change_is_named(tmp_path):
    pin = "---\npinned: true\n---\n# P\n"
    memdir = make_store(tmp_path / "store", {"a.md": pin, "b.md": pin, "c.md": "# C\n"})
    with pytest.raises(ApplyError) as err, Transaction(memdir) as tx:
        tx.apply(Change({"a.md": b"x", "c.md": b"y"}, ("b.md",)), digests(memdir))
    assert str(err.value) == f"{memdir}: apply failed at pinned: refused: a.md, b.md is pinned (frontmatter)"


def test_an_external_writer_is_named_file_by_file(tmp_path):
    memdir = make_store(tmp_path / "store", {"a.md": "# A\n", "b.md": "# B\n", "c.md": "# C\n"})
    seen = digests(memdir)
    (memdir / "a.md").write_bytes(b"# A!\n")
    (memdir / "b.md").write_bytes(b"# B!\n")
    (memdir / "d.md").write_bytes(b"# D\n")
    (memdir / "e.md").write_bytes(b"# E\n")
    with pytest.raises(ApplyError) as err, Transaction(memdir) as tx:
        tx.apply(Change({"c.md": b"# C2\n"}, ()), seen)
    assert str(err.value).endswith("(changed a.md, b.md; appeared d.md, e.md)")


def test_a_file_made_a_symlink_during_the_apply_is_refused_and_never_written_through(tmp_path):
    memdir = make_store(tmp_path / "store", {"a.md": "# A\n", "b.md": "# B\n"})
    outside = tmp_path / "outside.md"
    outside.write_bytes(b"# outside\n")

    def swap(step: str) -> None:
        if step == "write:b.md":
            (memdir / "b.md").unlink()
            (memdir / "b.md").symlink_to(outside)

    with pytest.raises(ApplyError) as err, Transaction(memdir) as tx:
        tx.apply(Change({"a.md": b"# A2\n", "b.md": b"# B2\n"}, ()), digests(memdir), swap)
    # the rollback, too, refuses a journal naming a symlink: nothing is written through it, the
    # journal is kept for a human
    assert str(err.value).startswith(
        f"{memdir}: apply failed at write:b.md (ApplyError: refused: b.md is a symlink) and its rollback failed "
        "(UnsafeStore: "
    )
    assert outside.read_bytes() == b"# outside\n" and (memdir / SNAPSHOT_DIR / WAL_NAME).is_file()


def test_two_stores_are_locked_apart_in_one_process(tmp_path):
    one, two = make_store(tmp_path / "one", {"a.md": "# A\n"}), make_store(tmp_path / "two", {"a.md": "# A\n"})
    with Transaction(one) as tx1, Transaction(two) as tx2:
        tx2.apply(Change({"a.md": b"# two\n"}, ()), digests(two))
        tx1.apply(Change({"a.md": b"# one\n"}, ()), digests(one))
    assert (one / "a.md").read_bytes() == b"# one\n" and (two / "a.md").read_bytes() == b"# two\n"


def test_a_failed_atomic_write_leaves_the_old_file_and_no_temp_file(tmp_path, monkeypatch):
    target = tmp_path / "a.md"
    target.write_bytes(b"old\n")

    def no_space(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(apply_module.os, "replace", no_space)
    with pytest.raises(OSError, match="No space left"):
        apply_module.write_atomic(target, b"new\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.md"] and target.read_bytes() == b"old\n"


def test_a_write_cut_short_leaves_its_temp_file_in_the_store_and_the_next_start_removes_it(tmp_path):
    """The temp file is made in the store folder (so ``os.replace`` is one rename) under our prefix,
    which is how the clean-up knows it: a kill just before the rename leaves it there."""
    memdir = make_store(tmp_path / "store", {"a.md": "# A\n"})
    with Transaction(memdir) as tx:  # a write that finishes leaves no temp file
        tx.apply(Change({"a.md": b"# A1\n"}, ()), digests(memdir))
    assert sorted(p.name for p in memdir.iterdir()) == ["a.md"]
    (memdir / "a.md").write_bytes(b"# A\n")
    seen = digests(memdir)
    pid = os.fork()
    if pid == 0:
        try:
            apply_module.os.replace = lambda src, dst: os._exit(9)
            with Transaction(memdir) as tx:
                tx.apply(Change({"a.md": b"# A2\n"}, ()), seen)
        finally:
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 9
    assert [p.name.startswith(TEMP_PREFIX) for p in memdir.iterdir() if p.is_file()].count(True) == 1
    recover(memdir)
    assert sorted(p.name for p in memdir.iterdir()) == ["a.md"] and (memdir / "a.md").read_bytes() == b"# A\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="only root may give a file to another owner")
def test_a_written_and_a_restored_file_keep_their_owner(tmp_path):
    memdir = make_store(tmp_path / "store", {"a.md": "# A\n", "b.md": "# B\n"})
    for p in memdir.iterdir():
        os.chown(p, 4321, 4322)

    def fail(step: str) -> None:
        if step == "commit":
            raise OSError(5, "injected")

    with pytest.raises(ApplyError), Transaction(memdir) as tx:
        tx.apply(Change({"a.md": b"# A2\n"}, ("b.md",)), digests(memdir), fail)
    with Transaction(memdir) as tx:
        tx.apply(Change({"a.md": b"# A3\n"}, ()), digests(memdir))
    assert {p.name: (p.stat().st_uid, p.stat().st_gid) for p in memdir.iterdir()} == dict.fromkeys(
        ["a.md", "b.md"], (4321, 4322)
    )


def test_a_second_transaction_on_a_store_this_process_holds_is_refused_without_waiting(tmp_path, monkeypatch):
    memdir = make_store(tmp_path / "store", {"a.md": "# A\n"})

    def no_wait(fd: int, seconds: float) -> bool:
        raise AssertionError("waited for a lock this process holds")

    with Transaction(memdir):
        monkeypatch.setattr(apply_module, "_flock_within", no_wait)
        with pytest.raises(ApplyError, match="another apply holds the store"), Transaction(memdir):
            pass


def test_the_journal_announces_the_writes_and_deletes_before_the_first_write(tmp_path):
    memdir = make_store(tmp_path / "store", {"a.md": "# A\n", "b.md": "# B\n"})
    begins = []

    def read_journal(step: str) -> None:
        if step == "write:b.md":
            begins.append(json.loads((memdir / SNAPSHOT_DIR / WAL_NAME).read_text().splitlines()[0]))

    with Transaction(memdir) as tx:
        tx.apply(
            Change({"b.md": b"# B2\n", "c.md": b"# C\n"}, ("a.md",), {"c.md": None}), digests(memdir), read_journal
        )
    (first,) = begins
    assert (first["event"], first["writes"], first["deletes"], first["created"]) == (
        "begin",
        ["b.md", "c.md"],
        ["a.md"],
        ["c.md"],
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
def test_a_user_who_may_not_give_a_file_away_still_writes_and_rolls_back(request):
    """A file of another owner in a folder the user may write: the owner cannot be kept
    (``fchown`` is refused), the write still lands, and a rollback still restores it."""
    shared = Path(tempfile.mkdtemp(prefix="washexp-test-"))  # pytest's own folders are root's alone
    shared.chmod(0o755)
    request.addfinalizer(lambda: shutil.rmtree(shared))
    memdir = make_store(shared / "store", {"a.md": "# A\n", "b.md": "# B\n"})
    with Transaction(memdir) as tx:  # as root first: the owner is kept
        tx.apply(Change({"a.md": b"# A0\n"}, ()), digests(memdir))
    memdir.chmod(0o777)
    for p in memdir.iterdir():
        p.chmod(0o666)  # root's files, which anyone may write
    seen = digests(memdir)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgid(65534)
            os.setuid(65534)

            def fail(step: str) -> None:
                if step == "commit":
                    raise OSError(5, "injected")

            with contextlib.suppress(ApplyError), Transaction(memdir) as tx:
                tx.apply(Change({"a.md": b"# A2\n"}, ("b.md",)), seen, fail)  # snapshot, write, roll back
            with Transaction(memdir) as tx:
                tx.apply(Change({"a.md": b"# A3\n"}, ()), seen)
            code = 0
        except BaseException as err:
            print(f"child: {type(err).__name__}: {err}", file=sys.stderr)
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert (memdir / "a.md").read_bytes() == b"# A3\n" and (memdir / "b.md").read_bytes() == b"# B\n"
