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
from washexp.wash.cli import wash as cli_wash
from washexp.wash.coalwash.operators import ApproveAll
from washexp.wash.coalwash.pin_screen import PinnedPlan
from washexp.wash.coalwash.pins import PIN_READ_BYTES
from washexp.wash.pipeline import wash
from washexp.wash.plan import Plan, PlanItem
from washexp.wash.store.apply import ApplyError, apply_plan, digests

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


# ---- screen() in memory: the two views of a file, line-range merge pairs, what passes through

from washexp.wash.coalwash.pin_screen import screen  # noqa: E402

PINNED = "---\npinned: true\n---\nbody\n"
OPEN_BLOCK = "---\ntitle: x\nline two\r\nline three\r\nline four\n"  # never closes: an incapacity pin


def _item(file, start, end, op, text=None):
    return PlanItem(file, start, end, "duplicate", "r", op, text)


@pytest.mark.parametrize(
    "disk, seen", [(PINNED, "body\n"), ("body\n", PINNED), (OPEN_BLOCK, PINNED), (PINNED, OPEN_BLOCK)]
)
def test_a_pin_on_disk_or_in_the_planned_text_refuses_the_plan(disk, seen):
    # the quick tier may have changed the text the washer saw: either view's marker pin refuses
    # the whole plan, even when the other view is only unprovable
    plan = Plan((_item("a.md", 1, 1, "delete"),))
    with pytest.raises(PinnedPlan) as err:
        screen(plan, {"a.md": seen}, {"a.md": disk.encode()})
    assert err.value.files == ["a.md"]


def test_a_file_the_plan_alone_knows_is_judged_on_its_planned_text():
    plan = Plan((_item("a.md", 1, 1, "delete"),))
    with pytest.raises(PinnedPlan):
        screen(plan, {"a.md": PINNED}, {})
    assert screen(plan, {"a.md": "body\n"}, {}).refused == ()


def test_an_unpinned_plan_passes_through_unchanged():
    plan = Plan((_item("a.md", 1, 1, "delete"),), washer="w", notes=("n",))
    out = screen(plan, {"a.md": "body\n"}, {"a.md": b"body\n"})
    assert out.plan is plan and out.refused == ()


def test_a_line_range_delete_pairs_with_the_rewrite_that_holds_exactly_its_lines():
    files = {"a.md": OPEN_BLOCK, "b.md": "B\n"}
    raw = {k: v.encode() for k, v in files.items()}
    holds = _item("b.md", 1, 1, "replace", "B\nline two\nline three, merged")  # CRLF lines, read as LF
    other = _item("b.md", 1, 1, "replace", "B\ntitle: x\nline two\n")  # not the deleted range
    for rewrite, paired in ((holds, True), (other, False)):
        plan = Plan((_item("a.md", 3, 4, "delete"), rewrite), notes=("kept note",))
        out = screen(plan, files, raw)
        why = dict((it.file, w) for it, w in out.refused)
        assert (
            why["a.md"]
            == "refused: a.md cannot be proved unpinned (frontmatter unverifiable inside the pin read window)"
        )
        if paired:
            assert why["b.md"] == "refused: a merge pair: this rewrite holds the text of a delete refused for its pin"
            assert out.plan.items == ()
        else:
            assert "b.md" not in why and out.plan.items == (other,)
        assert out.plan.notes == ("kept note",)
    # a rewrite of the unprovable file itself removes no text another item could hold
    plan = Plan((_item("a.md", 1, 1, "replace", "x"), _item("b.md", 1, 1, "replace", "B\n")))
    assert [it.file for it in screen(plan, files, raw).plan.items] == ["b.md"]
