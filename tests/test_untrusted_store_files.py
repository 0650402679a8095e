"""Every file a store hands us is untrusted (issue 37): each test plants one in a real store and
runs ``washexp wash`` on it. The gauge's state, ``expected.json``, ``keeps.json`` and the journal
are read only when they are regular files of the store (no FIFO, device, symlink or hard link to
a file outside), up to a size cap; a name that is not UTF-8, a 5,000-digit integer or JSON nested
100,000 deep is one line and exit 2, never a hang, a MemoryError or a traceback.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from tests.test_store_safety import crash, run
from tests.test_wash_apply import make_store
from tests.test_wash_washers import copy_store
from washexp.errors import FixtureError
from washexp.inputs import load_yaml
from washexp.wash.store.apply import SNAPSHOT_DIR, WAL_NAME, recover

GAUGE = ".washexp-gauge.json"
OUTSIDE_STATE = '{"v": 1, "last_wash_tokens": 5, "history": []}\n'


def wash(store: Path, tmp_path: Path, *extra: str):
    return run(["wash", str(store), "--operator", "approve-none", *extra], cwd=tmp_path)  # 120 s at most


def one_line_exit_2(done, *words: str) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-2000:]
    assert all(w in lines[0] for w in words), lines[0]
    return lines[0]


def _fifo(path: Path, outside: Path) -> None:
    os.mkfifo(path)


def _dev_zero(path: Path, outside: Path) -> None:
    path.symlink_to("/dev/zero")


def _symlink_out(path: Path, outside: Path) -> None:
    path.symlink_to(outside)


def _hard_link_out(path: Path, outside: Path) -> None:
    os.link(outside, path)


def _huge(path: Path, outside: Path) -> None:
    with path.open("wb") as fh:
        fh.truncate(64 << 20)  # 64 MiB of NULs, sparse


def _long_integer(path: Path, outside: Path) -> None:
    path.write_text('{"v": ' + "9" * 5000 + "}")


def _deep(path: Path, outside: Path) -> None:
    path.write_text("[" * 100_000 + "]" * 100_000)


PLANTS = [_fifo, _dev_zero, _symlink_out, _hard_link_out, _huge, _long_integer, _deep]
WHY = {
    _fifo: "not a regular file",
    _dev_zero: "symlink",
    _symlink_out: "symlink",
    _hard_link_out: "hard link",
    _huge: "larger than",
    _long_integer: "digits",
    _deep: "nested too deeply",
}


@pytest.mark.parametrize("plant", PLANTS, ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("name", [GAUGE, "keeps.json", ".washexp-snapshot/wal.jsonl"])
def test_a_hostile_state_file_is_one_line_exit_2(name, plant, tmp_path):
    """The trap: a FIFO at the gauge's path hung the wash; ``/dev/zero`` linked there was a
    MemoryError; a file outside linked there was read; a 5,000-digit integer or deep nesting
    was a traceback."""
    store = copy_store("superseded", tmp_path)
    outside = tmp_path / "outside.json"
    outside.write_text(OUTSIDE_STATE)
    target = store / name
    target.parent.mkdir(exist_ok=True)
    plant(target, outside)
    before = outside.read_bytes()
    done = wash(store, tmp_path)
    one_line_exit_2(done, WHY[plant])
    assert outside.read_bytes() == before


@pytest.mark.parametrize(
    "plant", [_symlink_out, _fifo, _huge, _long_integer, _deep], ids=lambda f: f.__name__.strip("_")
)
def test_a_hostile_expected_json_is_one_line_exit_2(plant, tmp_path):
    """The trap: ``expected.json`` as a symlink out of the store was followed."""
    store = copy_store("superseded", tmp_path)
    outside = tmp_path / "outside.json"
    outside.write_bytes((store / "expected.json").read_bytes())
    (store / "expected.json").unlink()
    plant(store / "expected.json", outside)
    done = wash(store, tmp_path, "--operator", "benchmark")
    one_line_exit_2(done, "expected.json", WHY[plant])


def test_a_file_name_that_is_not_utf8_is_one_line_exit_2(tmp_path):
    """The trap: a store file named with a byte that is not UTF-8 was a traceback."""
    store = copy_store("superseded", tmp_path)
    with open(os.path.join(os.fsencode(store), b"caf\xe9.md"), "wb") as fh:
        fh.write(b"# x\n")
    done = wash(store, tmp_path)
    one_line_exit_2(done, "UTF-8")


@pytest.mark.parametrize("tier", ["quick", "full"])
def test_a_200_mb_store_is_refused_in_one_line_before_any_work(tier, tmp_path):
    """The trap: the full tier on a 200 MB store grew to 5.9 GB, then a MemoryError. The store's
    size is read from its directory entries (a sparse file: no byte of it is read) and refused."""
    store = copy_store("superseded", tmp_path)
    with open(store / "huge.md", "wb") as fh:
        fh.truncate(200 << 20)
    before = sorted(os.listdir(store))
    done = wash(store, tmp_path, "--tier", tier)
    one_line_exit_2(done, "200.0 MiB", "over the 16 MiB")
    assert sorted(os.listdir(store)) == before  # no snapshot, no journal, no gauge state


def test_a_store_file_that_grows_after_it_was_measured_is_still_capped(tmp_path, monkeypatch):
    from washexp.wash.coalwash import files

    store = copy_store("superseded", tmp_path)
    monkeypatch.setattr(files, "MAX_STORE_BYTES", 100)  # what the store's entries said fitted
    monkeypatch.setattr(files.os, "lstat", lambda _path: os.stat_result((0,) * 10))  # each measured empty
    with pytest.raises(FixtureError, match="over the 0 MiB"):
        files.read_md_bytes(store)


def test_a_journal_restores_only_the_modes_and_owners_the_files_had(tmp_path):
    """The trap: a crafted journal naming mode 0777 and another owner for a file had them
    applied by the rollback. A rollback restores a written file with the mode and owner it has
    (the ones it had before: the apply keeps them) and a deleted one with its snapshot copy's (made
    with the original's); a journal's own figures are never applied."""
    memdir = make_store(tmp_path / "store")
    for path in memdir.iterdir():
        path.chmod(0o640)
    before = {p.name: (p.stat().st_mode, p.stat().st_uid, p.stat().st_gid) for p in memdir.iterdir()}
    assert crash(memdir, "commit", "kill").returncode == -signal.SIGKILL  # every write and the delete done
    wal = memdir / SNAPSHOT_DIR / WAL_NAME
    records = [json.loads(line) for line in wal.read_text().splitlines()]
    for meta in records[0]["files"].values():
        meta.update(mode=0o4777, uid=1234, gid=1234)
    wal.write_text("".join(json.dumps(r) + "\n" for r in records))
    recover(memdir)
    after = {p.name: (p.stat().st_mode, p.stat().st_uid, p.stat().st_gid) for p in memdir.iterdir()}
    assert after == before


def test_a_killed_gauge_write_leaves_nothing_and_the_gauge_keeps_its_mode(tmp_path):
    """The trap: a gauge write killed midway left its temporary file in the store, and every
    write reset the gauge file to 0600 (``mkstemp``'s mode). A kill's leftover is planted as it
    would be left (``..washexp-gauge.json.<random>.tmp``); the next wash removes it."""
    store = copy_store("superseded", tmp_path)
    assert wash(store, tmp_path).returncode == 0  # the first verdict writes the gauge's state
    gauge = store / GAUGE
    gauge.chmod(0o664)
    leftover = store / f".{GAUGE}.k1ll3d.tmp"
    leftover.write_text('{"half": ')
    done = wash(store, tmp_path)
    assert done.returncode == 0, done.stderr
    assert not leftover.exists() and not list(store.glob(f".{GAUGE}.*"))
    assert gauge.stat().st_mode & 0o777 == 0o664


BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(9)
)


@pytest.mark.parametrize("text", [BOMB, "a: &a [*a]\n"], ids=["nine-of-nine", "self"])
def test_a_yaml_alias_bomb_is_refused_in_one_line(text, tmp_path):
    """The trap: a few lines of aliases that expand to billions of values hung whatever walked the
    loaded config (a feed's sessions, a task's fields); an alias to itself, without end."""
    path = tmp_path / "feed.yaml"
    path.write_text(text)
    with pytest.raises(FixtureError) as info:
        load_yaml(path)
    assert "aliases expand to more than" in str(info.value) and "\n" not in str(info.value)


def test_yaml_with_a_few_aliases_still_loads(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("base: &b {k: 1}\none: *b\ntwo: *b\n")
    assert load_yaml(path) == {"base": {"k": 1}, "one": {"k": 1}, "two": {"k": 1}}
