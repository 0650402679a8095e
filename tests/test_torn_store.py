"""A store an interrupted wash left torn is never read as if whole (issue 48, item 13).

A wash killed after its journal is written leaves some files written and some not. The next
``washexp wash`` rolls it back first; every command that only reads a store refuses it in one line
naming the journal and the command that rolls it back (rolling back is a write). The torn state
is made deterministically: a forked apply that dies at a chosen step (``crash_at``), no timing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.test_wash_apply import make_store
from tests.test_wash_journal import crash_at, everything
from washexp.cli import main
from washexp.errors import FixtureError
from washexp.wash.store.apply import SNAPSHOT_DIR, WAL_NAME, pending_journal
from washexp.wash.store.stores import store_files


@pytest.fixture
def torn(tmp_path) -> tuple[Path, Path]:
    """(a store torn by a wash killed before its last delete, a copy of it as it was before)."""
    whole = make_store(tmp_path / "whole")
    store = tmp_path / "store"
    shutil.copytree(whole, store)
    crash_at(store, "delete:scratch-2026-05.md")
    assert {n: b for n, b in everything(store).items() if n.endswith(".md")} != everything(whole)  # torn
    return store, whole


def test_every_reading_command_refuses_a_torn_store_naming_its_journal(torn, capsys):
    """The trap: ``caliper`` and ``score`` measured a torn store, exit 0, the journal unnamed."""
    store, whole = torn
    before = everything(store)
    commands = {
        "score": (["score", str(whole), str(store)], 1),  # score.mjs's own error code
        "score --size": (["score", "--size", str(store)], 1),
        "caliper": (["caliper", str(store)], 2),
        "gate": (["gate", str(whole), str(store)], 2),
        "recall": (["recall", str(whole), str(store)], 2),
        "wash --dry-run": (["wash", str(store), "--dry-run", "--operator", "approve-all"], 2),
    }
    wal = store / SNAPSHOT_DIR / WAL_NAME
    for what, (argv, code) in commands.items():
        assert main(argv) == code, what
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1, (what, err)
        assert f"{store}: a wash's journal is pending ({wal}" in err, (what, err)
        assert f"`washexp wash {store} --recover` rolls an interrupted one back" in err, (what, err)
    assert everything(store) == before  # read-only: nothing rolled back, nothing written
    with pytest.raises(FixtureError, match="journal is pending"):
        store_files(store)  # what the benchmark and a wash read a store with: an input error, exit 2


def test_recover_rolls_it_back_and_then_it_reads_as_whole(torn, capsys):
    store, whole = torn
    assert main(["wash", str(store), "--recover"]) == 0
    wal = store / SNAPSHOT_DIR / WAL_NAME
    assert capsys.readouterr().err == (
        f"washexp wash: {store}: rolled back the interrupted wash its journal {wal} named\n"
    )
    assert everything(store) == everything(whole) and pending_journal(store) is None
    assert main(["caliper", str(store)]) == 0
    assert main(["wash", str(store), "--recover"]) == 0
    assert capsys.readouterr().err.endswith(f"{store}: no interrupted wash to roll back\n")


def test_the_next_wash_rolls_it_back_before_it_reads_a_byte(torn, capsys):
    """The wash's own checks (and the benchmark operator's ground truth) read the store whole."""
    store, whole = torn
    assert main(["wash", str(store), "--operator", "approve-none", "--gauge", "off"]) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"washexp wash: {store}: rolled back the interrupted wash"), err
    assert pending_journal(store) is None
