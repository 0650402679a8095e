"""A washer's plan meets CoalWash's two pin tiers (``apply.mjs`` v1.1.0, issue 36).

CoalWash's documented behaviour, in our words: a plan that touches a file the user marked
``pinned`` is malformed and refused whole, naming the pinned files, with nothing applied; a file
whose pin cannot be proved absent (an unclosed block, one that does not close inside the 64 KiB
pin window) is refused alone and the rest of the plan goes on, except a rewrite that absorbs the
refused file's text (a merge is two actions; leaving both halves would keep two copies). A file
that is not UTF-8 is never rewritten.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_wash_pipeline import OFF, PlanWasher, delete, md_bytes, write_store
from washexp.wash import cli_wash
from washexp.wash.apply import ApplyError, apply_plan, digests
from washexp.wash.operators import ApproveAll
from washexp.wash.pin_screen import PinnedPlan
from washexp.wash.pins import PIN_READ_BYTES
from washexp.wash.pipeline import wash
from washexp.wash.plan import Plan, PlanItem

INDEX = "# Memory\n\n- [[rules]] — house rules\n- [[notes]] — notes\n- [[old]] — old\n"
RULES = "---\nname: rules\npinned: true\n---\n# Rules\n\n- Never rebase a shared branch.\n- Tag v4.2.0 on 2026-05-01.\n"
NOTES = "# Notes\n\n- The deploy moved to Fridays.\n- A finished chore, done last week.\n"
UNCLOSED = "---\ncritical: true\nnever closes\nSee [[keep-me]] and the 42 open issues.\n"


def store_of(tmp_path: Path, **extra: str) -> Path:
    return write_store(tmp_path, {"MEMORY.md": INDEX, "rules.md": RULES, "notes.md": NOTES, **extra})


def whole(file: str, store: Path) -> PlanItem:
    return PlanItem(file, 1, 1, "superseded", "test washer", "delete-file")


def test_a_plan_touching_a_pinned_file_is_refused_whole_and_names_it(tmp_path):
    store = store_of(tmp_path, **{"other.md": "---\nPinned: yes\n---\nx\n"})
    before = md_bytes(store)
    items = (whole("rules.md", store), delete(store, "notes.md", "A finished chore"), whole("other.md", store))
    with pytest.raises(PinnedPlan) as err:
        wash(store, PlanWasher(items), OFF, ApproveAll())
    assert err.value.files == ["other.md", "rules.md"]
    assert str(err.value) == (
        "refused: the plan touches pinned files (pinned: true): other.md, rules.md; nothing applied"
    )
    assert md_bytes(store) == before  # the unpinned delete did not land either


def test_the_pin_refusal_comes_before_the_fidelity_gate(tmp_path):
    """Deleting rules.md drops v4.2.0 and 2026-05-01: the gate alone would block that item and let
    the other delete land. The pin check runs first, so nothing lands."""
    store = store_of(tmp_path)
    before = md_bytes(store)
    items = (whole("rules.md", store), delete(store, "notes.md", "A finished chore"))
    with pytest.raises(PinnedPlan, match="rules.md"):
        wash(store, PlanWasher(items), OFF, ApproveAll())
    assert md_bytes(store) == before


def test_the_cli_exits_1_naming_the_pinned_file(tmp_path, monkeypatch, capsys):
    store = store_of(tmp_path)
    before = md_bytes(store)
    washer = PlanWasher((whole("rules.md", store), delete(store, "notes.md", "A finished chore")))
    monkeypatch.setattr(cli_wash, "_washer", lambda _args: washer)
    code = cli_wash.main([str(store), "--tier", "full", "--operator", "approve-all", "--gauge", "off"])
    err = capsys.readouterr().err.strip()
    assert code == 1
    assert err == "washexp wash: refused: the plan touches pinned files (pinned: true): rules.md; nothing applied"
    assert md_bytes(store) == before


def test_an_unprovable_file_is_refused_alone_with_its_merge_pair(tmp_path):
    store = store_of(tmp_path, **{"a.md": UNCLOSED, "b.md": "Base B.\n"})
    merge = PlanItem("b.md", 1, 1, "duplicate", "merge a into b", "replace", "Base B, merged.\n" + UNCLOSED)
    chore = delete(store, "notes.md", "A finished chore")
    receipt = wash(store, PlanWasher((whole("a.md", store), merge, chore)), OFF, ApproveAll())
    assert (store / "a.md").read_text() == UNCLOSED  # the source survives
    assert (store / "b.md").read_text() == "Base B.\n"  # and is not copied into b.md
    assert "A finished chore" not in (store / "notes.md").read_text()  # the rest of the plan lands
    why = {r["file"]: r["why"] for r in receipt.steps[-1].refused}
    assert why["a.md"].startswith("refused: a.md cannot be proved unpinned")
    assert "merge pair" in why["b.md"]


def test_an_unrelated_rewrite_beside_an_unprovable_delete_still_lands(tmp_path):
    store = store_of(tmp_path, **{"a.md": UNCLOSED, "b.md": "Base B.\n"})
    edit = PlanItem("b.md", 1, 1, "over-verbose", "unrelated", "replace", "Base B, edited.")
    wash(store, PlanWasher((whole("a.md", store), edit)), OFF, ApproveAll())
    assert (store / "a.md").exists()
    assert (store / "b.md").read_text() == "Base B, edited.\n"


def test_a_block_closing_past_the_64k_window_is_not_deleted(tmp_path):
    long = "---\n" + "k: v\n" * (PIN_READ_BYTES // 5) + "pinned: false\n---\nbody\n"
    store = store_of(tmp_path, **{"long.md": long})
    receipt = wash(store, PlanWasher((whole("long.md", store),)), OFF, ApproveAll())
    assert (store / "long.md").read_text() == long
    assert receipt.deleted == []
    assert receipt.steps[-1].refused[0]["file"] == "long.md"


def test_a_rewrite_of_a_file_that_is_not_utf8_is_refused_by_name(tmp_path):
    store = store_of(tmp_path)
    (store / "latin.md").write_bytes(b"# Notes\n\ncaf\xe9 opens at 8.\nsecond line\n")
    before = md_bytes(store)
    plan = Plan((PlanItem("latin.md", 4, 4, "over-verbose", "t", "delete"),))
    with pytest.raises(ApplyError, match=r"latin.md is not valid UTF-8 \(byte 0xe9 at offset 12\)"):
        apply_plan(store, plan, digests(store))
    assert md_bytes(store) == before


def test_an_untouched_file_that_is_not_utf8_does_not_stop_the_plan(tmp_path):
    store = store_of(tmp_path)
    (store / "latin.md").write_bytes(b"caf\xe9\n")
    plan = Plan((PlanItem("notes.md", 4, 4, "done-point-in-time", "t", "delete"),))
    applied = apply_plan(store, plan, digests(store))
    assert applied.written == ("notes.md",)
    assert (store / "latin.md").read_bytes() == b"caf\xe9\n"
