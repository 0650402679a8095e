"""keeps.json is CoalWash's file (``keeps.mjs`` v1.1.0, issue 36): ``{"v": 1, "keeps": [...]}``.

What CoalWash documents, in our words: the file holds a schema version and a list of keeps, each
``{target, reason, date}`` and optionally an ``anchor`` with its ``anchorFile``; a version newer
than the reader's is never rewritten; a keep with an anchor binds the file it names: an edit that
would lose the anchor from everything the plan writes is excluded, the rest applies.
"""

from __future__ import annotations

import json

from tests.test_wash_pipeline import OFF, PlanWasher, copy_store, delete, write_store
from washexp.wash.coalwash.files import read_md
from washexp.wash.coalwash.keeps import KEEPS, dump, read_keeps_file
from washexp.wash.coalwash.operators import ApproveAll
from washexp.wash.pipeline import wash
from washexp.wash.plan import PlanItem
from washexp.wash.washer import Keep, target_of


def coalwash_file(*keeps: dict, v: int = 1) -> str:
    return json.dumps({"v": v, "keeps": list(keeps)})  # what keeps.mjs writes: one compact line


def test_a_coalwash_keep_excludes_its_target(tmp_path):
    store = copy_store("superseded", tmp_path)
    kept = delete(store, "migration-log.md", "happened as planned")
    target = target_of(kept, read_md(store))
    keep = {"target": target, "reason": "", "date": "2026-07-01", "anchor": "x", "anchorFile": "/abs/x.md"}
    (store / KEEPS).write_text(coalwash_file(keep))
    washer = PlanWasher((kept,))
    receipt = wash(store, washer, OFF, ApproveAll())
    assert washer.calls[0][1] == (Keep(target, "", "2026-07-01", "x", "/abs/x.md"),)
    assert receipt.steps[1].proposed == [] and "happened as planned" in (store / "migration-log.md").read_text()


def test_what_washexp_writes_is_the_shape_coalwash_reads():
    """keeps.mjs reads an object (not a list) whose v is at most 1 and whose keeps entries carry a
    string target; anchors are written under CoalWash's own key names."""
    data = json.loads(dump((Keep("a.md#1", "r", "2026-07-01"), Keep("b.md", "", "", "anchor text", "/s/b.md"))))
    assert data == {
        "v": 1,
        "keeps": [
            {"target": "a.md#1", "reason": "r", "date": "2026-07-01"},
            {"target": "b.md", "reason": "", "date": "", "anchor": "anchor text", "anchorFile": "/s/b.md"},
        ],
    }


def test_a_keep_without_reason_or_date_is_read(tmp_path):
    (tmp_path / KEEPS).write_text(coalwash_file({"target": "a.md", "extra": 1}))
    assert read_keeps_file(tmp_path).keeps == (Keep("a.md", "", ""),)


def test_the_old_list_is_read_and_rewritten_in_coalwash_format(tmp_path):
    store = copy_store("superseded", tmp_path)
    (store / KEEPS).write_text(json.dumps([{"target": "versions.md#x", "reason": "r", "date": "2026-07-01"}]))
    wash(store, PlanWasher(keeps=(Keep("oncall.md#y", "new", "2026-07-02"),)), OFF, ApproveAll())
    assert json.loads((store / KEEPS).read_text())["v"] == 1
    assert [k["target"] for k in json.loads((store / KEEPS).read_text())["keeps"]] == ["versions.md#x", "oncall.md#y"]


def test_a_newer_version_is_honoured_and_never_rewritten(tmp_path):
    store = copy_store("superseded", tmp_path)
    kept = delete(store, "migration-log.md", "happened as planned")
    (store / KEEPS).write_text(coalwash_file({"target": target_of(kept, read_md(store))}, v=2))
    before = (store / KEEPS).read_bytes()
    receipt = wash(store, PlanWasher((kept,), keeps=(Keep("x.md#1", "new", "2026-07-02"),)), OFF, ApproveAll())
    assert (store / KEEPS).read_bytes() == before
    assert receipt.steps[1].proposed == []  # its keep still binds
    assert any("schema v2 (newer than 1): read-only" in n for n in receipt.steps[1].notes)


def test_an_anchored_keep_refuses_an_edit_that_loses_its_text(tmp_path):
    files = {"MEMORY.md": "# Memory\n\n- [[a]]\n", "a.md": "# A\n\n- Never deploy on Fridays.\n- Old chore done.\n"}
    store = write_store(tmp_path, files)
    keep = {"target": "a.md#k", "reason": "policy", "date": "2026-07-01"}
    (store / KEEPS).write_text(coalwash_file({**keep, "anchor": "Never deploy on Fridays.", "anchorFile": "/p/a.md"}))
    cut = PlanItem("a.md", 3, 3, "over-verbose", "t", "delete")
    receipt = wash(store, PlanWasher((cut,)), OFF, ApproveAll())
    assert (store / "a.md").read_text() == files["a.md"]
    assert receipt.steps[1].refused[0]["why"].startswith("refused: the keep 'Never deploy on Fridays.'")


def test_an_anchored_keep_lets_an_edit_that_keeps_its_text_through(tmp_path):
    files = {"MEMORY.md": "# Memory\n\n- [[a]]\n", "a.md": "# A\n\n- Never deploy on Fridays.\n- Old chore done.\n"}
    store = write_store(tmp_path, files)
    anchored = {
        "target": "a.md#k",
        "reason": "",
        "date": "",
        "anchor": "Never  deploy on Fridays.",
        "anchorFile": "a.md",
    }
    (store / KEEPS).write_text(coalwash_file(anchored))
    cut = PlanItem("a.md", 4, 4, "done-point-in-time", "t", "delete")
    wash(store, PlanWasher((cut,)), OFF, ApproveAll())
    assert (store / "a.md").read_text() == "# A\n\n- Never deploy on Fridays.\n"
