"""The quick tier on real-shaped memory stores: what it proposes, what it leaves, and that it settles."""

from __future__ import annotations

import pytest

from washexp.wash.coalwash.files import read_md
from washexp.wash.coalwash.quick import quick_plan
from washexp.wash.plan import apply_to_texts
from washexp.wash.store.apply import apply_plan, digests

# An index in the [Title](file.md) style with trailing spaces, an entry for a file that was
# removed, no entry for qa-linter.md, and a dead wikilink in its prose.
MEMORY = (
    "# Project memory\n\n"
    "- [Pipeline](pipeline.md) — stages, gates and their order  \n"
    "- [Old scratch](old-scratch.md) — June scratch notes\n"
    "- [Incidents](incidents.md) — what broke and the lesson\n\n"
    "Conventions live in [[house-rules]] (not yet written).\n"
)

PIPELINE = (
    "---\n"
    "name: pipeline\n"
    "description: build stages   \n"
    "---\n"
    "# Pipeline\n\n"
    "Stages run lint -> test -> package; package needs `DIST_KEY` from the vault.\n\n"
    "The gate blocks a release when coverage drops below 87.5%.\n\n\n\n\n"
    "## Notes\n\n"
    "Stages run lint -> test -> package; package needs `DIST_KEY` from the vault.\n\n"
    "```sh\n"
    "make lint   \n\n\n\n"
    "make test\n"
    "```\n\n"
    "## Notes\n\n"
    "Retry flaky tests once, never twice.   \n"
    "See [[incidents]].\n"
)

# Written on Windows: CRLF, a repeated paragraph, a trailing tab, no final newline.
INCIDENTS = (
    "# Incidents\r\n\r\n"
    "2026-03-14: the CI token expired; rotate it every 90 days.\r\n"
    "Lesson: alert 7 days before expiry.\r\n\r\n"
    "2026-04-02: disk full on runner-3 after cache growth.\t\r\n\r\n"
    "2026-03-14: the CI token expired; rotate it every 90 days.\r\n"
    "Lesson: alert 7 days before expiry."
)

QA = "# QA linter\n\nThe linter config is [[linter-rules]]; run it before [[pipeline]].\n"

MESSY = {"MEMORY.md": MEMORY, "incidents.md": INCIDENTS, "pipeline.md": PIPELINE, "qa-linter.md": QA}

LEAN = {
    "MEMORY.md": "# Memory\n\n- [[decisions]] — why we chose what we chose\n- [[glossary]] — terms\n",
    "decisions.md": "# Decisions\n\n## 2026-02-01\n\nPostgres 16 over MySQL: [[glossary]] has the terms.\n",
    "glossary.md": "# Glossary\n\n- **gate**: a check that can block a release.\n\n\n- **wash**: a cleaning round.",
}


def test_the_messy_store_is_cleaned_as_expected():
    plan = quick_plan(MESSY)
    assert plan.washer == "quick"
    assert {item.cls for item in plan.items} == {"quick"}
    assert {item.op for item in plan.items} <= {"delete", "replace"}  # never a whole file
    out = apply_to_texts(MESSY, plan)
    assert out["MEMORY.md"] == (
        "# Project memory\n\n"
        "- [Pipeline](pipeline.md) — stages, gates and their order\n"
        "- [Incidents](incidents.md) — what broke and the lesson\n"
        "- [QA linter](qa-linter.md)\n\n"
        "Conventions live in [[house-rules]] (not yet written).\n"
    )
    assert out["pipeline.md"] == (
        "---\n"
        "name: pipeline\n"
        "description: build stages   \n"  # frontmatter is verbatim
        "---\n"
        "# Pipeline\n\n"
        "Stages run lint -> test -> package; package needs `DIST_KEY` from the vault.\n\n"
        "The gate blocks a release when coverage drops below 87.5%.\n\n\n"
        "## Notes\n\n"
        "```sh\n"
        "make lint   \n\n\n\n"  # so is code
        "make test\n"
        "```\n\n"
        "## Notes\n\n"  # a repeated heading is structure, not a duplicate
        "Retry flaky tests once, never twice.\n"
        "See [[incidents]].\n"
    )
    assert out["incidents.md"] == (
        "# Incidents\r\n\r\n"
        "2026-03-14: the CI token expired; rotate it every 90 days.\r\n"
        "Lesson: alert 7 days before expiry.\r\n\r\n"
        "2026-04-02: disk full on runner-3 after cache growth."  # still no final newline
    )
    assert out["qa-linter.md"] is QA


def test_a_removed_index_entry_is_named_and_dead_links_are_only_flagged():
    plan = quick_plan(MESSY)
    assert plan.approved_drops == ({"type": "links", "value": "old-scratch.md"},)
    assert plan.notes == (
        "dead link [[house-rules]] in MEMORY.md:7 (flagged, not edited)",
        "dead link [[linter-rules]] in qa-linter.md:3 (flagged, not edited)",
    )
    assert not any(item.file == "qa-linter.md" for item in plan.items)


def test_every_removed_line_survives_elsewhere_in_its_file():
    """The quick tier deletes copies, never the last copy of a line (dead index entries aside)."""
    plan = quick_plan(MESSY)
    out = apply_to_texts(MESSY, plan)
    for item in plan.items:
        if item.op != "delete" or item.file == "MEMORY.md":
            continue
        removed = MESSY[item.file].splitlines()[item.start - 1 : item.end]
        kept = out[item.file].splitlines()
        assert all(line in kept for line in removed if line.strip()), item


def test_the_quick_tier_is_idempotent():
    once = apply_to_texts(MESSY, quick_plan(MESSY))
    again = quick_plan(once)
    assert again.items == ()
    assert again.approved_drops == ()
    assert again.notes == quick_plan(MESSY).notes  # flags stay flags: the links are never edited


def test_a_clean_lean_store_gets_nothing():
    plan = quick_plan(LEAN)
    assert (plan.items, plan.approved_drops, plan.notes) == ((), (), ())


def test_a_store_without_an_index_gets_no_index():
    files = {name: text for name, text in LEAN.items() if name != "MEMORY.md"}
    assert quick_plan(files).items == ()


@pytest.mark.parametrize(
    ("index", "expected"),
    [
        ("# Memory\n\n* [[decisions]]\n", "# Memory\n\n* [[decisions]]\n* [[glossary]]\n"),
        ("# Memory\n\n- [[gone]] — removed\n", "# Memory\n\n- [[decisions]]\n- [[glossary]]\n"),
        ("# Memory\n\nNothing indexed yet.", "# Memory\n\nNothing indexed yet.\n\n- [[decisions]]\n- [[glossary]]"),
    ],
)
def test_the_index_is_rebuilt_in_its_own_style(index, expected):
    files = {**LEAN, "MEMORY.md": index}
    plan = quick_plan(files)
    assert apply_to_texts(files, plan)["MEMORY.md"] == expected
    assert quick_plan(apply_to_texts(files, plan)).items == ()


def test_an_entry_in_another_case_is_not_dead():
    files = {**LEAN, "MEMORY.md": "# Memory\n\n- [[Decisions]]\n- [Glossary](Glossary.md)\n"}
    assert quick_plan(files).items == ()


def test_the_quick_plan_lands_through_the_transactional_apply(tmp_path):
    for name, text in MESSY.items():
        (tmp_path / name).write_bytes(text.encode("utf-8"))
    plan = quick_plan(read_md(tmp_path))
    applied = apply_plan(tmp_path, plan, digests(tmp_path))
    assert applied.deleted == ()
    assert set(applied.written) == {"MEMORY.md", "incidents.md", "pipeline.md"}
    assert read_md(tmp_path) == apply_to_texts(MESSY, plan)
    assert quick_plan(read_md(tmp_path)).items == ()


def test_copies_that_differ_only_in_trailing_spaces_go_in_the_first_run():
    """The trap: strip first, find the duplicate only on the next run, and never settle."""
    line = "Deploys go out on Tuesdays after the freeze."
    files = {"deploys.md": f"# Deploys\n\n{line}  \n\n{line}\n"}
    once = apply_to_texts(files, quick_plan(files))
    assert once["deploys.md"] == f"# Deploys\n\n{line}\n"
    assert quick_plan(once).items == ()
