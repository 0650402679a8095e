"""One wash through the whole pipeline, on copies of the committed stores and small real-shaped
stores: the LEAN stop, the quick tier, keeps, the human gate, the fidelity gate, the transactional
apply, the receipt, and the ``washexp wash`` command run as a user runs it."""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from washexp.hashing import sha256_bytes
from washexp.needles import norm
from washexp.wash.cli import wash as cli_wash
from washexp.wash.coalwash.files import joined, read_md
from washexp.wash.coalwash.gauge import load_gauge
from washexp.wash.coalwash.operators import ApproveAll, ApproveNone, Benchmark, Decision, Review
from washexp.wash.coalwash.pin_screen import PinnedPlan
from washexp.wash.pipeline import KEEPS, Receipt, wash
from washexp.wash.plan import Plan, PlanItem, split_lines
from washexp.wash.store.apply import SNAPSHOT_DIR, ApplyError
from washexp.wash.store.stores import load_expected
from washexp.wash.washer import Keep, Proposal, Washer, target_of
from washexp.wash.washers.coalwash import CoalWashWasher
from washexp.wash.washers.command import CommandWasher
from washexp.wash.washers.plain import PlainWasher
from washexp.wash.washers.reference import ReferenceWasher

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "wash"
OFF = load_gauge("off")
V1 = load_gauge("coalwash-1.0")

# --- stores --------------------------------------------------------------------------------------

# A session-end hook appended the same digest paragraph on every session: mechanical fat in the
# always-loaded index (530 ~tok, enough to arm CoalWash 1.0's gauge), plus a trailing space and a
# run of blank lines. The release log holds a version + date that is muscle.
DIGEST = (
    "Session digest: the nightly reconciliation reads the billing replica, never the primary.\n"
    "Session digest: invoice PDFs render through the `pdf-worker` queue; retries are capped at 5.\n"
    "Session digest: refunds over 500 EUR need a second approver in the finance console.\n"
)
BILLING = {
    "MEMORY.md": (
        "# Memory — billing service\n\n"
        "- [[releases]] — what shipped when  \n"
        "- [[oncall]] — pager rotation and escalation\n\n\n\n\n" + "\n".join([DIGEST] * 9)
    ),
    "releases.md": (
        "# Releases\n\n"
        "- v2.31.0 (2026-05-12): the ledger export moved to `exports/v2/`; old paths answer 404.\n"
        "- v2.30.2 (2026-04-28): hotfix for the rounding of VAT on credit notes.\n"
        "- It is perhaps worth saying, arguably, that both releases went out on a Tuesday.\n"
    ),
    "oncall.md": (
        "# On-call\n\n"
        "- Primary pages go to #billing-oncall; escalate after 15 minutes to the payments lead.\n"
        "- Never restart `ledger-writer` during the 23:00–00:30 UTC settlement window.\n"
    ),
}

# The v2.31.0 release line rewritten without its version and date (the export path stays).
UNVERSIONED = "- The ledger export moved to `exports/v2/`; old paths answer 404."

# A small store whose conventions file is pinned; both files carry a trailing space.
PINNED = {
    "MEMORY.md": "# Memory\n\n- [[conventions]] — house rules   \n",
    "conventions.md": "---\nname: conventions\npinned: true\n---\n# Conventions\n\nNever rebase a shared branch.  \n",
}


def write_store(root: Path, files: dict[str, str], name: str = "store") -> Path:
    store = root / name
    store.mkdir()
    for file, text in files.items():
        (store / file).write_bytes(text.encode("utf-8"))
    return store


def copy_store(name: str, root: Path) -> Path:
    return Path(shutil.copytree(FIXTURES / name, root / name))


def md_bytes(store: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(store.glob("*.md"))}


def tree(store: Path) -> dict[str, str]:
    """Every file under the folder, hidden ones included: what "untouched" means."""
    return {p.relative_to(store).as_posix(): sha256_bytes(p.read_bytes()) for p in store.rglob("*") if p.is_file()}


def line_of(store: Path, file: str, needle: str) -> int:
    """The 1-based line of ``file`` that holds ``needle`` (exactly one must)."""
    hits = [i for i, line in enumerate(split_lines((store / file).read_text("utf-8")), 1) if needle in line]
    assert len(hits) == 1, (file, needle, hits)
    return hits[0]


def delete(store: Path, file: str, needle: str, cls: str = "done-point-in-time") -> PlanItem:
    n = line_of(store, file, needle)
    return PlanItem(file, n, n, cls, "test washer", "delete")


def replace(store: Path, file: str, needle: str, text: str) -> PlanItem:
    n = line_of(store, file, needle)
    return PlanItem(file, n, n, "over-verbose", "test washer", "replace", text)


class PlanWasher:
    """A washer that proposes a fixed plan and records what it was shown."""

    name = "test-plan"

    def __init__(
        self,
        items: tuple[PlanItem, ...] = (),
        approved_drops: tuple[dict, ...] = (),
        *,
        keeps: tuple[Keep, ...] = (),
        cost_tokens: int = 0,
        side_effect: Callable[[], None] | None = None,
    ):
        self.items, self.approved_drops, self.keeps = items, approved_drops, keeps
        self.cost_tokens, self.side_effect = cost_tokens, side_effect
        self.calls: list[tuple[dict[str, str], tuple[Keep, ...]]] = []

    def propose(self, files: dict[str, str], keeps: tuple[Keep, ...], scratch: Path) -> Proposal:
        self.calls.append((dict(files), keeps))
        assert scratch.is_dir()
        if self.side_effect:
            self.side_effect()
        plan = Plan(self.items, self.approved_drops, self.name, ("flagged by the test washer",))
        return Proposal(plan, self.cost_tokens, {"flags": "one line per item"}, self.keeps)


class Raising(PlanWasher):
    name = "raising"

    def propose(self, files, keeps, scratch):
        raise RuntimeError("model endpoint went away\n  File 'x.py', line 1, in <module>")


class Recording:
    """An operator that keeps every review it is shown and answers as ``inner`` does."""

    def __init__(self, inner):
        self.inner, self.name, self.reviews = inner, f"recording {inner.name}", []

    def review(self, review: Review) -> Decision:
        self.reviews.append(review)
        return self.inner.review(review)


def muscle_of(store: Path) -> tuple[tuple[str, str], ...]:
    return tuple((n.id, n.needle) for n in load_expected(store / "expected.json").muscle)


def kept_muscle(store: Path) -> set[str]:
    haystack = norm(joined(read_md(store)))
    return {mid for mid, needle in muscle_of(store) if norm(needle) in haystack}


def _signature(fn) -> list[tuple[str, object]]:
    """Names and kinds of the parameters (a washer may widen a type or give a default)."""
    return [(p.name, p.kind) for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("cls", [PlanWasher, ReferenceWasher, CoalWashWasher, PlainWasher, CommandWasher])
def test_each_washer_proposes_with_the_protocols_signature(cls):
    """``runtime_checkable`` checks names only: a ``propose`` taking other arguments would pass it."""
    assert isinstance(cls.name, str) and callable(cls.propose)
    assert _signature(cls.propose) == _signature(Washer.propose)


# --- LEAN is a hard stop -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["lean", "superseded", "mixed-script", "plump-real"])
def test_lean_band_is_a_hard_stop(tmp_path, name):
    store = copy_store(name, tmp_path)
    before = md_bytes(store)
    washer = PlanWasher((PlanItem("MEMORY.md", 1, 1, "over-verbose", "would rewrite", "replace", "# x"),))
    receipt = wash(store, washer, V1, ApproveAll())
    assert (receipt.band, receipt.stopped) == ("LEAN", "LEAN — nothing to clean")
    assert washer.calls == []  # the semantic layer is never reached
    assert receipt.steps == [] and receipt.proposed == 0 and receipt.applied == 0
    assert md_bytes(store) == before


def test_gauge_off_proceeds_on_a_lean_store(tmp_path):
    store = copy_store("lean", tmp_path)
    before = md_bytes(store)
    washer = PlanWasher()
    receipt = wash(store, washer, OFF, ApproveAll())
    assert (receipt.band, receipt.stopped) == ("OFF", None)
    assert len(washer.calls) == 1 and washer.calls[0][0] == read_md(store)
    assert [s.tier for s in receipt.steps] == ["quick", "full"]
    assert receipt.applied == 0 and md_bytes(store) == before  # a lean store: the quick tier has nothing


# --- the quick tier ------------------------------------------------------------------------------


def test_mechanical_fat_arms_the_gauge_and_the_quick_tier_cleans_it(tmp_path):
    store = write_store(tmp_path, BILLING)
    receipt = wash(store, None, V1, ApproveAll(), tier="quick")
    assert receipt.band in ("OBESE", "FULL") and receipt.stopped is None
    assert receipt.written == ["MEMORY.md"] and receipt.deleted == []
    index = (store / "MEMORY.md").read_text("utf-8")
    assert index.count("Session digest: refunds over 500 EUR") == 1
    assert "\n\n\n\n" not in index and "  \n" not in index  # at most 2 blank lines in a row
    assert md_bytes(store)["releases.md"] == BILLING["releases.md"].encode()
    # the same gauge now reads the cleaned store as LEAN
    assert wash(store, PlanWasher(), V1, ApproveAll()).stopped == "LEAN — nothing to clean"


def test_quick_tier_is_idempotent_through_the_pipeline(tmp_path):
    store = write_store(tmp_path, BILLING)
    first = wash(store, None, OFF, ApproveAll(), tier="quick")
    assert first.applied > 0
    after_first = md_bytes(store)
    second = wash(store, None, OFF, ApproveAll(), tier="quick")
    assert second.proposed == 0 and second.applied == 0 and second.written == []
    assert md_bytes(store) == after_first


def test_quick_tier_deletes_pass_the_human_gate(tmp_path):
    store = write_store(tmp_path, BILLING)
    receipt = wash(store, None, OFF, ApproveNone(), tier="quick")
    quick = receipt.steps[0]
    assert len(quick.refused) == 8 and all(r["op"] == "delete" for r in quick.refused)
    index = (store / "MEMORY.md").read_text("utf-8")
    assert index.count("Session digest: refunds over 500 EUR") == 9  # refused duplicates stay
    assert "\n\n\n\n" not in index and "  \n" not in index  # the rewrites still land


def test_quick_tier_leaves_a_pinned_file_alone(tmp_path):
    store = write_store(tmp_path, PINNED)
    receipt = wash(store, None, OFF, ApproveAll(), tier="quick")
    assert receipt.written == ["MEMORY.md"]
    assert (store / "conventions.md").read_bytes() == PINNED["conventions.md"].encode()
    assert "conventions.md is pinned: the quick tier leaves it alone" in receipt.steps[0].notes


# --- the fidelity gate ---------------------------------------------------------------------------


def test_gate_blocks_a_rewrite_that_drops_a_version_whoever_operates(tmp_path):
    store = write_store(tmp_path, BILLING)
    wash(store, None, OFF, ApproveAll(), tier="quick")  # settle the quick tier first
    before = md_bytes(store)
    lossy = replace(store, "releases.md", "v2.31.0", UNVERSIONED)
    receipt = wash(store, PlanWasher((lossy,)), OFF, ApproveAll())
    full = receipt.steps[1]
    assert {"type": "version-drop", "value": "v2.31.0", "count": 1, "before": 1, "after": 0} in full.blocked
    assert {"type": "date-drop", "value": "2026-05-12", "count": 1, "before": 1, "after": 0} in full.blocked
    assert full.approved_drops == [] and full.applied == [] and receipt.blocked == 2
    assert md_bytes(store) == before
    assert cli_wash.exit_code(receipt) == 1


def test_a_declared_drop_is_put_to_the_operator(tmp_path):
    store = write_store(tmp_path, BILLING)
    wash(store, None, OFF, ApproveAll(), tier="quick")
    before = md_bytes(store)
    lossy = replace(store, "releases.md", "v2.31.0", UNVERSIONED)
    declared = ({"type": "versions", "value": "v2.31.0"}, {"type": "dates", "value": "2026-05-12"})
    refused = wash(store, PlanWasher((lossy,), declared), OFF, ApproveNone())
    assert refused.blocked == 2 and md_bytes(store) == before
    approved = wash(store, PlanWasher((lossy,), declared), OFF, ApproveAll())
    assert approved.steps[1].approved_drops == ["date-drop:2026-05-12", "version-drop:v2.31.0"]
    assert approved.blocked == 0 and approved.written == ["releases.md"]
    assert "v2.31.0" not in (store / "releases.md").read_text("utf-8")


def test_gate_blocks_an_introduced_decomposed_sara_am_even_if_declared(tmp_path):
    store = copy_store("mixed-script", tmp_path)
    before = md_bytes(store)
    line = next(t for t in split_lines((store / "translation-notes.md").read_text("utf-8")) if "ขอย้ำ" in t)
    shorter = line.removeprefix("ขอย้ำอีกครั้งว่า ").rstrip("\n")
    assert "\u0e33" in shorter  # composed sara-am, as the store writes it
    decomposed = shorter.replace("\u0e33", "\u0e4d\u0e32")
    hazard = "U+0E4D+U+0E32 introduced (must stay U+0E33)"
    washer = PlanWasher(
        (replace(store, "translation-notes.md", "ขอย้ำ", decomposed),),
        ({"type": "thai-sara-am-decomposed", "value": hazard},),
    )
    receipt = wash(store, washer, OFF, ApproveAll())
    assert [(b["type"], b["value"]) for b in receipt.steps[1].blocked] == [("thai-sara-am-decomposed", hazard)]
    assert receipt.applied == 0 and md_bytes(store) == before
    # the same cut, composed: passes, and drops the fat needle
    composed = wash(store, PlanWasher((replace(store, "translation-notes.md", "ขอย้ำ", shorter),)), OFF, ApproveAll())
    assert composed.blocked == 0 and composed.written == ["translation-notes.md"]
    assert "ขอย้ำอีกครั้งว่า" not in joined(read_md(store))


# --- the human gate: deletes and the drops they entail -------------------------------------------


def scratch_plan(store: Path) -> tuple[PlanItem, ...]:
    return (
        PlanItem("scratch-2026-03.md", 1, 1, "done-point-in-time", "cutover scratch, copied out", "delete-file"),
        delete(store, "MEMORY.md", "[[scratch-2026-03]]"),
    )


def test_approved_scratch_delete_passes_with_its_index_link_drop(tmp_path):
    store = copy_store("superseded", tmp_path)
    receipt = wash(store, PlanWasher(scratch_plan(store)), OFF, ApproveAll())
    full = receipt.steps[1]
    assert "wikilink-drop:scratch-2026-03" in full.approved_drops
    assert len(full.applied) == 2 and receipt.blocked == 0
    assert receipt.deleted == ["scratch-2026-03.md"] and receipt.written == ["MEMORY.md"]
    assert not (store / "scratch-2026-03.md").exists()
    assert "[[scratch-2026-03]]" not in (store / "MEMORY.md").read_text("utf-8")
    assert kept_muscle(store) == {mid for mid, _ in muscle_of(store)}


def test_the_same_scratch_delete_is_refused_under_approve_none(tmp_path):
    store = copy_store("superseded", tmp_path)
    before = md_bytes(store)
    receipt = wash(store, PlanWasher(scratch_plan(store)), OFF, ApproveNone())
    full = receipt.steps[1]
    assert [r["op"] for r in full.refused] == ["delete-file", "delete"]
    assert all(r["why"] == "the operator approves no delete" for r in full.refused)
    assert receipt.refused == 2 and receipt.applied == 0 and receipt.blocked == 0
    assert md_bytes(store) == before


def test_benchmark_approves_the_scratch_delete_whose_link_copy_survives(tmp_path):
    # the scratch file holds a copy of [[migration-log]] (muscle m10) that the index keeps
    store = copy_store("superseded", tmp_path)
    receipt = wash(store, PlanWasher(scratch_plan(store)), OFF, Benchmark(muscle_of(store)))
    assert receipt.refused == 0 and receipt.blocked == 0 and receipt.deleted == ["scratch-2026-03.md"]
    assert "wikilink-drop:migration-log" in receipt.steps[1].approved_drops
    assert kept_muscle(store) == {mid for mid, _ in muscle_of(store)}


def test_benchmark_refuses_a_muscle_delete_and_approves_a_fat_only_one(tmp_path):
    store = copy_store("superseded", tmp_path)
    items = (
        delete(store, "migration-log.md", "advisory lock"),  # holds m03 and m04, their only copies
        delete(store, "migration-log.md", "happened as planned"),  # fat f02 only
    )
    receipt = wash(store, PlanWasher(items), OFF, Benchmark(muscle_of(store)))
    full = receipt.steps[1]
    assert [(r["start"], r["why"]) for r in full.refused] == [(items[0].start, "holds muscle m03, m04")]
    assert [a["start"] for a in full.applied] == [items[1].start]
    assert receipt.refused == 1 and receipt.applied == 1 and receipt.blocked == 0
    text = joined(read_md(store))
    assert "happened as planned" not in text and "double-posted 112 rows" in text
    assert kept_muscle(store) == {mid for mid, _ in muscle_of(store)}


# --- the transactional apply ---------------------------------------------------------------------


def test_a_pinned_file_is_refused_in_one_line_before_anything_is_written(tmp_path):
    store = write_store(tmp_path, PINNED)  # the quick tier has a trailing space to strip too
    before = md_bytes(store)
    edit = replace(store, "conventions.md", "Never rebase", "Never rebase shared branches.")
    with pytest.raises(PinnedPlan) as err:
        wash(store, PlanWasher((edit,)), OFF, ApproveAll())
    assert str(err.value) == "refused: the plan touches pinned files (pinned: true): conventions.md; nothing applied"
    assert md_bytes(store) == before


def test_a_pinned_committed_store_file_is_refused(tmp_path):
    store = copy_store("plump-real", tmp_path)
    before = md_bytes(store)
    with pytest.raises(PinnedPlan, match="pinned files .pinned: true.: runbook-ledger.md;") as err:
        wash(store, PlanWasher((delete(store, "runbook-ledger.md", "ledger-reader"),)), OFF, ApproveAll())
    assert "\n" not in str(err.value)
    assert md_bytes(store) == before


@pytest.mark.parametrize("files", [BILLING, None], ids=["quick-tier-meets-it", "full-tier-meets-it"])
def test_an_external_writer_between_plan_and_apply_aborts(tmp_path, files):
    store = write_store(tmp_path, files) if files else copy_store("superseded", tmp_path)
    before = md_bytes(store)
    target = "releases.md" if files else "versions.md"
    note = b"- 2026-07-01: a note another session wrote meanwhile.\n"

    def another_session_writes() -> None:
        with open(store / target, "ab") as fh:
            fh.write(note)

    item = delete(store, "MEMORY.md", "[[oncall]]" if files else "[[scratch-2026-03]]")
    with pytest.raises(ApplyError) as err:
        wash(store, PlanWasher((item,), side_effect=another_session_writes), OFF, ApproveAll())
    assert "another writer" in str(err.value) and target in str(err.value) and "\n" not in str(err.value)
    after = md_bytes(store)
    assert after[target] == before[target] + note  # the other writer's bytes stand
    assert {k: v for k, v in after.items() if k != target} == {k: v for k, v in before.items() if k != target}
    assert not (store / SNAPSHOT_DIR).exists()


def test_a_raising_washer_leaves_the_store_byte_identical_and_its_error_is_not_recast(tmp_path):
    """A washer's own failure is a WashexpError (a failed round); anything else it raises is a bug
    and propagates as itself, never recast as a failed round (a plugin's is: tests/test_byo_washer.py)."""
    store = write_store(tmp_path, BILLING)  # the quick tier would have edits to apply
    before = md_bytes(store)
    with pytest.raises(RuntimeError, match="model endpoint went away"):
        wash(store, Raising(), OFF, ApproveAll())
    assert md_bytes(store) == before and not (store / KEEPS).exists()


# --- the control arm -----------------------------------------------------------------------------


def test_control_arm_has_no_lean_stop_and_no_fidelity_gate(tmp_path):
    store = write_store(tmp_path, BILLING)
    wash(store, None, OFF, ApproveAll(), tier="quick")  # now LEAN under coalwash-1.0
    lossy = replace(store, "releases.md", "v2.31.0", "- The ledger export moved; old paths answer 404.")
    washer = PlanWasher((lossy,))
    receipt = wash(store, washer, V1, ApproveAll(), gates=False)
    assert receipt.band == "LEAN" and receipt.stopped is None and len(washer.calls) == 1
    assert receipt.blocked == 0 and receipt.written == ["releases.md"]
    assert "v2.31.0" not in (store / "releases.md").read_text("utf-8")


def test_control_arm_still_shows_whole_file_deletes_to_the_operator(tmp_path):
    store = copy_store("superseded", tmp_path)
    before = md_bytes(store)
    operator = Recording(ApproveNone())
    receipt = wash(store, PlanWasher(scratch_plan(store)), OFF, operator, gates=False)
    shown = operator.reviews[-1].deletes
    assert [(d.file, d.text) for d in shown][0] == ("scratch-2026-03.md", (store / "scratch-2026-03.md").read_text())
    assert receipt.refused == 2 and receipt.applied == 0 and md_bytes(store) == before


def test_control_arm_neither_reads_nor_writes_keeps(tmp_path):
    store = copy_store("superseded", tmp_path)
    item = delete(store, "migration-log.md", "happened as planned")
    target = target_of(item, read_md(store))
    (store / KEEPS).write_text(json.dumps([{"target": target, "reason": "keep", "date": "2026-07-01"}]))
    keeps_before = (store / KEEPS).read_bytes()
    new = Keep("versions.md#x", "load-bearing", "2026-07-02")
    washer = PlanWasher((item,), keeps=(new,))
    receipt = wash(store, washer, OFF, ApproveAll(), gates=False)
    assert washer.calls[0][1] == () and receipt.applied == 1
    assert (store / KEEPS).read_bytes() == keeps_before


# --- keeps ---------------------------------------------------------------------------------------


def test_keeps_exclude_their_targets_and_new_keeps_are_recorded(tmp_path):
    store = copy_store("superseded", tmp_path)
    kept = delete(store, "migration-log.md", "happened as planned")
    other = delete(store, "migration-log.md", "moved the wiki page")
    old_keep = {"target": target_of(kept, read_md(store)), "reason": "the sync is evidence", "date": "2026-07-01"}
    (store / KEEPS).write_text(json.dumps([old_keep]), encoding="utf-8")
    superseded = next(i for i, t in enumerate(split_lines((store / "versions.md").read_text()), 1) if "settled" in t)
    looked_at = PlanItem("versions.md", superseded, superseded, "superseded", "old target", "delete")
    new_keep = Keep(target_of(looked_at, read_md(store)), "the insider keeps it", "2026-07-02")
    washer = PlanWasher((kept, other), keeps=(new_keep, new_keep))
    receipt = wash(store, washer, OFF, ApproveAll())
    assert washer.calls[0][1] == (Keep(**old_keep),)  # the washer is shown the keeps
    full = receipt.steps[1]
    assert [p["start"] for p in full.proposed] == [other.start] and full.applied == full.proposed
    text = (store / "migration-log.md").read_text("utf-8")
    assert "happened as planned" in text and "moved the wiki page" not in text
    written = json.loads((store / KEEPS).read_text("utf-8"))
    assert written == {
        "v": 1,
        "keeps": [old_keep, {"target": new_keep.target, "reason": new_keep.reason, "date": new_keep.date}],
    }
    # the next wash leaves the newly kept item alone
    again = wash(store, PlanWasher((looked_at,)), OFF, ApproveAll())
    assert again.steps[1].proposed == [] and again.applied == 0
    assert "settled baseline" in (store / "versions.md").read_text("utf-8")


def test_a_keep_follows_its_lines_when_they_move(tmp_path):
    store = copy_store("superseded", tmp_path)
    item = delete(store, "migration-log.md", "happened as planned")
    keep = {"target": target_of(item, read_md(store)), "reason": "evidence", "date": "2026-07-01"}
    (store / KEEPS).write_text(json.dumps([keep]), encoding="utf-8")
    path = store / "migration-log.md"
    path.write_text(path.read_text("utf-8").replace("# Migration log\n", "# Migration log\n\nNewest first.\n"))
    moved = delete(store, "migration-log.md", "happened as planned")
    assert moved.start == item.start + 2
    receipt = wash(store, PlanWasher((moved,)), OFF, ApproveAll())
    assert receipt.steps[1].proposed == [] and "happened as planned" in path.read_text("utf-8")


# --- the receipt ---------------------------------------------------------------------------------


def test_receipt_is_json_and_names_every_outcome(tmp_path):
    store = write_store(tmp_path, BILLING)
    muscle = (("m01", "v2.31.0 (2026-05-12)"), ("m02", "23:00–00:30 UTC settlement window"))
    items = (
        delete(store, "oncall.md", "ledger-writer"),  # holds m02: refused
        replace(store, "releases.md", "v2.31.0", "- The ledger export moved; old paths answer 404."),  # blocked
    )
    receipt = wash(store, PlanWasher(items, cost_tokens=1234), OFF, Benchmark(muscle))
    data = json.loads(json.dumps(receipt.to_dict(), ensure_ascii=False))
    assert {"proposed", "refused", "blocked", "applied", "cost_tokens", "steps", "written", "deleted"} <= set(data)
    assert "artifacts" not in data and receipt.artifacts == {"flags": "one line per item"}
    assert data["cost_tokens"] == 1234
    assert data["proposed"] == len(data["steps"][0]["proposed"]) + 2
    assert data["refused"] == 1 and data["steps"][1]["refused"][0]["why"] == "holds muscle m02"
    blocked = {(b["type"], b["value"]) for b in data["steps"][1]["blocked"]}
    assert data["blocked"] == len(blocked) and ("version-drop", "v2.31.0") in blocked
    # a blocked full tier keeps the quick tier's clean-up
    assert data["applied"] == len(data["steps"][0]["applied"]) > 0 and data["written"] == ["MEMORY.md"]
    assert md_bytes(store)["releases.md"] == BILLING["releases.md"].encode()


def test_receipt_of_a_lean_stop_is_json_too():
    receipt = Receipt("s", "LEAN", "fat", stopped="LEAN — nothing to clean")
    data = json.loads(json.dumps(receipt.to_dict()))
    assert data["stopped"] == "LEAN — nothing to clean"
    assert (data["proposed"], data["refused"], data["blocked"], data["applied"], data["cost_tokens"]) == (0,) * 5


# --- washexp wash ------------------------------------------------------------------------------


def run_wash(args: list[str], cwd: Path, stdin=subprocess.DEVNULL) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "washexp.cli", "wash", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        stdin=stdin,
        timeout=300,
    )


def test_cli_dry_run_leaves_every_byte_and_prints_the_receipt(tmp_path):
    store = write_store(tmp_path, BILLING)
    before = tree(store)
    proc = run_wash([str(store), "--operator", "approve-all", "--dry-run", "--json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["dry_run"] is True and data["applied"] > 0 and data["written"] == ["MEMORY.md"]
    assert data["band"] in ("OBESE", "FULL")
    assert tree(store) == before  # no gauge state, no lock, no keeps: nothing


def test_cli_approve_all_applies_the_quick_tier_on_a_copy(tmp_path):
    store = write_store(tmp_path, BILLING)
    proc = run_wash([str(store), "--operator", "approve-all"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"washexp wash {store}: ") and "tier quick · operator approve-all" in lines[0]
    assert lines[1].startswith("proposed ") and " · blocked 0 · applied " in lines[1]
    assert lines[2] == "written: MEMORY.md"
    assert (store / "MEMORY.md").read_text("utf-8").count("Session digest: refunds") == 1
    again = run_wash([str(store), "--operator", "approve-all"], tmp_path)
    assert again.returncode == 0 and again.stdout.splitlines()[1] == "LEAN — nothing to clean"


def test_cli_benchmark_reads_the_stores_expected_json(tmp_path):
    store = copy_store("lean", tmp_path)
    before = tree(store)
    proc = run_wash([str(store), "--operator", "benchmark", "--gauge", "off", "--json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["applied"] == 0
    assert {k: v for k, v in tree(store).items() if k.endswith(".md")} == {
        k: v for k, v in before.items() if k.endswith(".md")
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{missing}"], "no such store folder"),
        (["{store}/MEMORY.md"], "MEMORY.md: a file, not a store folder"),  # it said "no such store folder"
        (["{empty}"], "not a store (no top-level *.md files)"),
        (["{store}", "--operator", "aprove-all"], "did you mean 'approve-all'"),
        (["{store}", "--gauge", "coalwash-9"], "unknown gauge 'coalwash-9'"),
        (["{store}", "--tier", "fast"], "invalid choice: 'fast'"),
        (["{store}"], "--operator interactive needs a terminal on stdin"),
        (["{store}", "--operator", "approve-all", "--expected", "{store}/expected.json"], "benchmark only"),
        (["{store}", "--operator", "benchmark", "--expected", "{store}/nope.json"], "nope.json: missing"),
        (["{store}", "--operator", "approve-all", "--washer-arg", "model=x"], "for --tier full only"),
        (["{store}", "--tier", "full", "--operator", "approve-all", "--washer-arg", "novalue"], "KEY=VALUE"),
    ],
)
def test_cli_usage_and_input_errors_are_one_line_and_exit_2(tmp_path, args, message):
    store = write_store(tmp_path, BILLING)
    (tmp_path / "empty").mkdir()
    before = tree(store)
    paths = {"missing": tmp_path / "missing", "empty": tmp_path / "empty", "store": store}
    proc = run_wash([a.format(**paths) for a in args], tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stdout == "" and len(proc.stderr.splitlines()) == 1 and message in proc.stderr
    assert proc.stderr.startswith("washexp wash: ") and "Traceback" not in proc.stderr
    assert tree(store) == before


def test_cli_checks_the_store_as_the_benchmark_does_before_any_work(tmp_path):
    no_index = write_store(tmp_path, {k: v for k, v in BILLING.items() if k != "MEMORY.md"}, "no-index")
    latin1 = write_store(tmp_path, BILLING, "latin1")
    (latin1 / "oncall.md").write_bytes("# On-call\n- caf\u00e9\n".encode("latin-1"))
    for store, message in [
        (no_index, f"{no_index}/MEMORY.md: missing: every store has a MEMORY.md index"),
        (latin1, f"{latin1}/oncall.md: not UTF-8 (byte 0xe9 at offset 15)"),
    ]:
        before = tree(store)
        proc = run_wash([str(store), "--operator", "approve-all"], tmp_path)
        assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", f"washexp wash: {message}\n")
        assert tree(store) == before


def test_cli_benchmark_says_a_needle_is_missing_before_the_wash_instead_of_blaming_the_plan(tmp_path):
    """The trap: a store whose ground truth no longer holds (here the [[versions]] index link is
    gone, as in a store copied without its index) was washed, and the absent needle counted as
    lost by the plan, which was then refused. Now nothing is washed and the line says why."""
    store = copy_store("superseded", tmp_path)
    memory = (store / "MEMORY.md").read_text("utf-8")
    (store / "MEMORY.md").write_text(memory.replace("[[versions]]", "versions"), "utf-8")
    muscle = [n for n in load_expected(store / "expected.json").muscle if n.needle == "[[versions]]"]
    assert muscle and "[[versions]]" not in joined(read_md(store))
    before = tree(store)
    args = [str(store), "--tier", "full", "--washer", "reference", "--operator", "benchmark", "--gauge", "off"]
    proc = run_wash(args, tmp_path)
    assert proc.returncode == 2 and proc.stdout == "", (proc.stdout, proc.stderr)
    i = [n.id for n in load_expected(store / "expected.json").muscle].index(muscle[0].id)
    assert proc.stderr == (
        "washexp wash: the ground truth does not hold before the wash (nothing was washed): "
        f"{store}/expected.json: muscle[{i}].needle: '[[versions]]' is not in the store's .md files "
        "(whitespace-normalized)\n"
    )
    assert tree(store) == before
    elsewhere = tmp_path / "truth.json"  # --expected names its own file
    elsewhere.write_bytes((store / "expected.json").read_bytes())
    proc = run_wash([*args, "--expected", str(elsewhere)], tmp_path)
    assert proc.returncode == 2 and f": {elsewhere}: muscle[{i}].needle: " in proc.stderr


def test_cli_a_corrupt_gauge_state_is_one_line_and_exit_2_before_any_work(tmp_path):
    """Found during the run (exit 1) until issue 37: the gauge's state is now read with the store's
    other files, before any work."""
    store = write_store(tmp_path, BILLING)
    (store / ".washexp-gauge.json").write_text("{not json")
    before = tree(store)
    proc = run_wash([str(store), "--operator", "approve-all"], tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1 and "not valid JSON" in proc.stderr
    assert tree(store) == before


HAVE_WASHERS = importlib.util.find_spec("washexp.wash.washers") is not None


@pytest.mark.skipif(HAVE_WASHERS, reason="the washers package is installed: the full tier is tested below")
def test_cli_full_tier_without_the_washers_package_is_a_usage_error(tmp_path):
    store = write_store(tmp_path, BILLING)
    proc = run_wash([str(store), "--tier", "full", "--operator", "approve-all"], tmp_path)
    assert proc.returncode == 2 and "needs the washexp.wash.washers package" in proc.stderr
    assert len(proc.stderr.splitlines()) == 1


@pytest.mark.skipif(not HAVE_WASHERS, reason="washexp.wash.washers lands from another branch; not on this one yet")
def test_cli_full_tier_reference_washer_dry_run(tmp_path):
    store = copy_store("superseded", tmp_path)
    before = tree(store)
    args = [str(store), "--tier", "full", "--washer", "reference", "--operator", "benchmark", "--gauge", "off"]
    proc = run_wash([*args, "--dry-run", "--json"], tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    data = json.loads(proc.stdout)
    assert [s["tier"] for s in data["steps"]] == ["quick", "full"]
    assert proc.returncode == (1 if data["blocked"] else 0)
    assert tree(store) == before


def test_summary_names_what_was_blocked_and_refused(tmp_path):
    store = write_store(tmp_path, BILLING)
    muscle = (("m02", "23:00–00:30 UTC settlement window"),)
    items = (
        delete(store, "oncall.md", "ledger-writer"),
        replace(store, "releases.md", "v2.31.0", "- The ledger export moved; old paths answer 404."),
    )
    receipt = wash(store, PlanWasher(items), OFF, Benchmark(muscle))
    args = cli_wash._parser().parse_args([str(store), "--tier", "full", "--operator", "benchmark"])
    text = cli_wash.summary(receipt, args)
    assert "  blocked (full): version-drop:v2.31.0" in text
    assert f"  refused (full): oncall.md:{items[0].start}-{items[0].start} delete (holds muscle m02)" in text
    assert "  note (full): flagged by the test washer" in text
    assert cli_wash.exit_code(receipt) == 1


def test_washer_args_parse_key_value_pairs():
    assert cli_wash.washer_args(["model=qwen", "cmd=a=b", "empty="]) == {"model": "qwen", "cmd": "a=b", "empty": ""}


# --- committed fixtures are never washed in place by accident -------------------------------------


def test_cli_refuses_a_store_under_fixtures_and_leaves_it(tmp_path):
    (tmp_path / "fixtures").mkdir()
    store = copy_store("superseded", tmp_path / "fixtures")  # the shape of a committed fixture
    before = tree(store)
    proc = run_wash([str(store), "--operator", "approve-all"], tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "under a fixtures/ folder" in proc.stderr and "--dry-run" in proc.stderr
    assert tree(store) == before
    dry = run_wash([str(store), "--operator", "approve-all", "--dry-run"], tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert tree(store) == before


def test_cli_in_place_fixture_names_the_changed_fixture_and_how_to_restore_it(tmp_path):
    root = tmp_path / "fixtures"
    root.mkdir()
    store = write_store(root, BILLING)
    proc = run_wash([str(store), "--operator", "approve-all", "--in-place-fixture"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == (
        f"washexp wash: changed the fixture {store} in place; restore it with: git checkout -- {store}"
    )
    assert (store / "MEMORY.md").read_text("utf-8").count("Session digest: refunds") == 1
