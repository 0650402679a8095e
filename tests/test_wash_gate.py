"""The fidelity gate: each inventory class blocks a drop, the multiset and precision layers,
introduced hazards, approvals, the store-level view, and ``washexp gate`` exit codes.

Expected drops marked "real gate" were recorded by running CoalWash v1.1.0 ``checkFidelity``
on the same two texts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from washexp.wash.coalwash.gate import Drop, check, check_store, drops_between, main, parse_approval
from washexp.wash.coalwash.inventory import inventory

ROOT = Path(__file__).resolve().parent.parent

BUILD_NOTES = """\
---
title: Build notes
pinned: true
tags: [build, ci]
---
# Build notes

- Node pinned at v2.31.0 since 2026-05-14 (see [[toolchain|the toolchain page]]).
- CI moved to the new runner on 3-Jun-2026; logs at https://ci.example.org/runs/4411.
- Run `npm ci --ignore-scripts` before `node score.mjs`.
- The lead said \u201cnever wash a fixture in place\u201d.
- Median step time 12.50 s; the cache hit rate was 64.6% over 44,192 jobs.

```bash
npm ci --ignore-scripts
node score.mjs fixtures/f01 /tmp/scratch
```
"""


def keys(result) -> list[str]:
    return [d.key for d in result.drops]


def edit(old: str, new: str, text: str = BUILD_NOTES) -> str:
    assert old in text, f"fixture lacks {old!r}"
    return text.replace(old, new)


def test_untouched_and_reworded_prose_passes():
    after = edit("Build notes\n\n- Node", "Build notes (kept short)\n\n- Node")
    result = check(BUILD_NOTES, after)
    assert result.passed and result.drops == [] and result.introduced == []


# --- one test per inventory class ---------------------------------------------------------------


def test_dropped_version_blocks():
    result = check(BUILD_NOTES, edit("Node pinned at v2.31.0 since", "Node pinned since"))
    assert not result.passed
    assert keys(result) == ["version-drop:v2.31.0"]


def test_dropped_wikilink_blocks_but_a_label_edit_does_not():
    assert keys(check(BUILD_NOTES, edit("[[toolchain|the toolchain page]]", "the toolchain page"))) == [
        "wikilink-drop:toolchain"
    ]
    assert check(BUILD_NOTES, edit("[[toolchain|the toolchain page]]", "[[toolchain]]")).passed


def test_dropped_iso_date_blocks():
    assert keys(check(BUILD_NOTES, edit(" since 2026-05-14", ""))) == ["date-drop:2026-05-14"]


def test_dropped_dmy_date_blocks_and_reformatting_the_same_day_does_not():
    assert keys(check(BUILD_NOTES, edit(" on 3-Jun-2026", ""))) == ["date-drop:2026-06-03"]
    assert check(BUILD_NOTES, edit("3-Jun-2026", "2026-06-03")).passed
    assert check(BUILD_NOTES, edit("2026-05-14", "14-May-2026")).passed


def test_dropped_url_blocks_in_each_form():
    # a bare URL runs to the next space or bracket, so it keeps the sentence's full stop (as in the real gate)
    assert keys(check(BUILD_NOTES, edit("; logs at https://ci.example.org/runs/4411", ""))) == [
        "link-drop:https://ci.example.org/runs/4411."
    ]
    before = "See [the protocol](docs/protocol.md) and <https://thecolliery.org/coalwash>."
    assert keys(check(before, "See the protocol and <https://thecolliery.org/coalwash>.")) == [
        "link-drop:docs/protocol.md"
    ]
    assert keys(check(before, "See [the protocol](docs/protocol.md).")) == [
        "link-drop:https://thecolliery.org/coalwash"
    ]


def test_dropped_frontmatter_key_blocks_but_a_value_edit_does_not():
    assert keys(check(BUILD_NOTES, edit("pinned: true\n", ""))) == ["frontmatter-key-drop:pinned"]
    assert check(BUILD_NOTES, edit("title: Build notes", "title: Build and CI notes")).passed


def test_dropped_code_span_blocks():
    assert keys(check(BUILD_NOTES, edit(" before `node score.mjs`", ""))) == ["codespan-drop:node score.mjs"]


def test_dropped_fenced_line_blocks_but_a_reindent_does_not():
    after = edit("node score.mjs fixtures/f01 /tmp/scratch\n```", "```")
    assert keys(check(BUILD_NOTES, after)) == ["fenced-line-drop:node score.mjs fixtures/f01 /tmp/scratch"]
    assert check(BUILD_NOTES, edit("node score.mjs fixtures/f01", "    node  score.mjs   fixtures/f01")).passed


def test_dropped_quote_blocks_but_a_curly_to_straight_restyle_does_not():
    assert keys(check(BUILD_NOTES, edit("\u201cnever wash a fixture in place\u201d", "not to wash in place"))) == [
        "quote-drop:never wash a fixture in place"
    ]
    assert check(
        BUILD_NOTES, edit("\u201cnever wash a fixture in place\u201d", '"never wash a fixture in place"')
    ).passed


@pytest.mark.parametrize(
    ("exact", "rounded"),
    [("12.50", "12.5"), ("3.14159", "3.14"), ("64.6%", "65%"), ("44,192", "44k")],
)
def test_number_losing_precision_is_a_named_drop(exact, rounded):
    before = f"Measured: {exact} on the pinned runner."
    result = check(before, f"Measured: {rounded} on the pinned runner.")
    assert not result.passed
    assert [(d.type, d.value, d.survivor) for d in result.drops] == [
        ("number-precision", exact.replace(",", ""), rounded)
    ]


def test_number_vanishing_without_a_rounded_survivor_is_a_plain_drop():
    result = check("Queue depth 878 at peak.", "Queue depth high at peak.")
    assert keys(result) == ["number-drop:878"]


def test_a_regrouped_number_is_the_same_value():
    assert check("We scored 44,192 jobs.", "We scored 44192 jobs.").passed


# --- multiset layer ---------------------------------------------------------------------------


def test_value_on_three_lines_surviving_on_two_is_one_drop():
    before = "- f01 kept 878 rows\n- f02 kept 878 rows after dedupe\n- f05 kept 878 rows twice\n"
    after = "- f01 kept 878 rows\n- f02 kept 878 rows after dedupe\n- f05 kept the rows twice\n"
    result = check(before, after)
    assert not result.passed
    assert [(d.key, d.count, d.before, d.after) for d in result.drops] == [("number-drop:878", 1, 3, 2)]


def test_cutting_an_exact_duplicate_line_is_free():
    line = "- Node pinned at v2.31.0 since 2026-05-14\n"
    assert check(line + "other\n" + line, line + "other\n").passed


# --- introduced hazards ---------------------------------------------------------------------------

THAI = "\u0e19\u0e49\u0e33\u0e21\u0e31\u0e19 \u0e17\u0e33\u0e07\u0e32\u0e19"  # "oil", "work": composed sara-am U+0E33


def test_decomposed_sara_am_introduced_blocks_and_composed_is_fine():
    decomposed = THAI.replace("\u0e33", "\u0e4d\u0e32")
    result = check(f"note: {THAI}\n", f"note: {decomposed}\n")
    assert not result.passed and result.drops == []
    assert result.introduced == ["thai-sara-am-decomposed:U+0E4D+U+0E32 introduced (must stay U+0E33)"]
    assert check(f"note: {THAI}\n", f"note (Thai): {THAI}\n").passed
    inherited = check(f"a {decomposed}\n", f"b {decomposed}\n")
    assert inherited.passed and inherited.warnings


@pytest.mark.parametrize(
    ("after", "named"),
    [
        ("\ufeff# Build notes\n", "bom-introduced:U+FEFF at file start"),
        ("# Build\ufeff notes\n", "bom-introduced:U+FEFF mid-string (zero-width no-break space)"),
        ("# Build\u200b notes\n", "zwsp-introduced:U+200B zero-width space"),
        ("# Build\u200d notes\n", "bidi-control-introduced:U+200D ZWJ (Trojan-Source bidi/zero-width) introduced"),
        ("# Build\u202e notes\n", "bidi-control-introduced:U+202E RLO (Trojan-Source bidi/zero-width) introduced"),
        ("# Build\u2067 notes\n", "bidi-control-introduced:U+2067 RLI (Trojan-Source bidi/zero-width) introduced"),
    ],
)
def test_introduced_invisible_character_blocks(after, named):
    result = check("# Build notes\n", after)
    assert not result.passed and result.introduced == [named]
    assert check(after, after + "more\n").passed  # inherited, not introduced


# --- approvals -------------------------------------------------------------------------------------


def test_an_approved_drop_passes_while_an_unapproved_one_in_the_same_edit_blocks():
    after = edit("(see [[toolchain|the toolchain page]])", "").replace(" before `node score.mjs`", "")
    both = ["wikilink-drop:toolchain", "codespan-drop:node score.mjs"]
    assert keys(check(BUILD_NOTES, after)) == both
    one = check(BUILD_NOTES, after, approved_drops=[{"type": "wikilink-drop", "value": "toolchain"}])
    assert not one.passed
    assert keys(one) == ["codespan-drop:node score.mjs"]
    assert [d.key for d in one.approved] == ["wikilink-drop:toolchain"]
    assert check(BUILD_NOTES, after, approved_drops=both).passed  # the real gate's "type:value" strings


def test_approval_by_class_name_and_value_only_approves_that_value():
    result = check(
        "Queue 878, budget 12.50", "Queue, budget 12.5", approved_drops=[{"type": "numbers", "value": "12.50"}]
    )
    assert keys(result) == ["number-drop:878"] and [d.key for d in result.approved] == ["number-precision:12.50"]


def test_approval_entries_must_name_type_and_value():
    assert parse_approval("wikilink-drop:a:b") == ("wikilink-drop", "a:b")
    assert parse_approval(Drop("quote-drop", "x")) == ("quote-drop", "x")
    for bad in ("no-colon", ":value", {"type": "quote-drop"}, 42):
        with pytest.raises(ValueError):
            parse_approval(bad)


# --- the blind spot ----------------------------------------------------------------------------


def test_values_swapping_places_passes_the_real_gates_known_blind_spot():
    # Documented limit of the real gate: a positionless inventory cannot see re-pairing.
    result = check("f05 suite: pass 878 / fail 12\n", "f05 suite: pass 12 / fail 878\n")
    assert result.passed


# --- a whole store -----------------------------------------------------------------------------

STORE = {
    "MEMORY.md": "# Memory index\n\n- [[build-notes]] Node v2.31.0, CI runner\n- [[scratch-2026-05]] scratch pad\n",
    "build-notes.md": BUILD_NOTES,
    "scratch-2026-05.md": "# Scratch\n\n- tried `--no-cache`: 41% slower on 3-Jun-2026\n- done: migrated (#2014)\n",
}


def test_a_value_moved_to_another_file_is_not_a_drop():
    after = dict(STORE)
    after["build-notes.md"] = edit(" before `node score.mjs`", "")
    after["MEMORY.md"] = STORE["MEMORY.md"] + "- run `node score.mjs` to score\n"
    assert check_store(STORE, after).passed
    assert not check(STORE["build-notes.md"], after["build-notes.md"]).passed  # per file it would block


def test_a_deleted_files_values_are_drops_and_can_be_approved():
    after = {k: v for k, v in STORE.items() if k != "scratch-2026-05.md"}
    after["MEMORY.md"] = STORE["MEMORY.md"].replace("- [[scratch-2026-05]] scratch pad\n", "")
    planned = drops_between(STORE, after)
    # the f02 shape: deleting the scratch file entails dropping its index link (digits inside a wikilink are
    # numbers too, as in the real gate); 3-Jun-2026 survives in build-notes.md but on one line instead of two
    assert [d.key for d in planned] == [
        "wikilink-drop:scratch-2026-05",
        "codespan-drop:--no-cache",
        "number-drop:2026",
        "number-drop:05",
        "number-drop:41%",
        "number-drop:2014",
        "date-drop:2026-06-03",
    ]
    assert (planned[-1].before, planned[-1].after) == (2, 1)
    result = check_store(STORE, after)
    assert not result.passed and result.drops == planned
    assert check_store(STORE, after, approved_drops=[d.key for d in planned]).passed


def test_a_hazard_in_one_file_of_a_store_is_named_with_the_file():
    after = dict(STORE, **{"build-notes.md": "\ufeff" + BUILD_NOTES})
    result = check_store(STORE, after)
    assert result.introduced == ["bom-introduced:U+FEFF at file start"]  # the real gate's wording
    assert [h.to_dict() for h in result.hazards] == [
        {"type": "bom-introduced", "value": "U+FEFF at file start", "count": 1, "file": "build-notes.md"}
    ]


def test_inventory_counts_each_value_per_distinct_line():
    inv = inventory("- 878 rows on v2.31.0\n- 878 rows again\n- 878 rows on v2.31.0\n")
    assert inv["numbers"]["878"] == 2  # the third line repeats the first exactly
    assert inv["versions"]["v2.31.0"] == 1
    assert set(inv) >= {"wikilinks", "dates", "versions", "links", "frontmatter", "codespans", "quotes", "numbers"}


# --- cross-checked verdicts of the real gate ---------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        # digits inside a wikilink are not masked from the number scan (real gate)
        (
            "Pinned v2.31.0 on 2026-05-14, see [[scratch-2026-05]] and 12.50 and 878\n878 again\nalso 878",
            "Pinned on 14-May-2026, 12.5 and 878",
            [
                "wikilink-drop:scratch-2026-05",
                "version-drop:v2.31.0",
                "number-precision:12.50",
                "number-drop:2026",
                "number-drop:05",
                "number-drop:878",
            ],
        ),
        ("-43% and -44,192", "43% and 44,192", ["number-drop:-44192", "number-drop:-43%"]),
        ("v1.2 and 1.2.3 and 1.2.3.4", "v1.2.3.4", ["version-drop:1.2.3", "version-drop:1.2.3.4", "version-drop:v1.2"]),
        (
            "64.0% vs 44000 vs 44192",
            "64% vs 44k",
            ["number-precision:64.0%", "number-drop:44000", "number-precision:44192"],
        ),
        (
            "delivery proven 100% twice (c19e528b) see #2014 and notes.md",
            "delivery proven 100% twice",
            [
                "number-drop:2014",
                "evidence-anchor-drop:#2014",
                "evidence-anchor-drop:c19e528b",
                "evidence-anchor-drop:notes.md",
            ],
        ),
        ("\ufeff\ufeff---\na: 1\n---\n", "plain", ["frontmatter-inventory-incomplete:orig"]),
        ("---\r\nkey: 1\r\nother:2\r\na:b: c\r\n---\r\n", "---\r\nkey: 1\r\n---\r\n", ["frontmatter-key-drop:a:b"]),
        ("range 15-20 items", "range 15 - 20 items", []),
        ("plain", "pla\u200cin\u2060", []),  # ZWNJ and word joiner are not tripwires in the real gate
        # JavaScript semantics: \d is ASCII, so Thai digits are not numbers (the f04 trap) ...
        ("\u0e23\u0e32\u0e04\u0e32 \u0e51\u0e52 \u0e1a\u0e32\u0e17", "\u0e23\u0e32\u0e04\u0e32 \u0e1a\u0e32\u0e17", []),
        # ... and trim strips NBSP but not U+001C, which Python's str.strip would
        ("[[ scratch\u00a0]]", "[[scratch]]", []),
        ("[[scratch\x1c]]", "[[scratch]]", ["wikilink-drop:scratch\x1c"]),
    ],
)
def test_verdicts_match_the_real_gate(before, after, expected):
    result = check(before, after)
    assert [d.key for d in result.drops + result.hazards] == expected
    assert result.passed is (expected == [])


# --- the command line --------------------------------------------------------------------------


def gate_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "washexp.cli", "gate", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)


@pytest.fixture
def texts(tmp_path: Path) -> tuple[Path, Path, Path]:
    before, kept, cut = tmp_path / "before.md", tmp_path / "kept.md", tmp_path / "cut.md"
    before.write_text(BUILD_NOTES, encoding="utf-8")
    kept.write_text(BUILD_NOTES.replace("# Build notes", "# Build and CI notes"), encoding="utf-8")
    cut.write_text(edit("Node pinned at v2.31.0 since", "Node\u200b pinned since"), encoding="utf-8")
    return before, kept, cut


def test_cli_exit_0_on_pass(texts):
    before, kept, _ = texts
    proc = gate_cli(str(before), str(kept))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("fidelity gate: PASS")


def test_cli_exit_1_names_each_drop_and_hazard(texts):
    before, _, cut = texts
    proc = gate_cli(str(before), str(cut))
    assert proc.returncode == 1, proc.stderr
    assert "BLOCKED" in proc.stdout
    assert "version-drop:v2.31.0" in proc.stdout
    assert "zwsp-introduced:U+200B zero-width space" in proc.stdout


def test_cli_approvals_and_json(texts):
    before, _, cut = texts
    proc = gate_cli(str(before), str(cut), "--json", "--approve", "version-drop:v2.31.0")
    assert proc.returncode == 1  # the hazard is still unapproved
    verdict = json.loads(proc.stdout)
    assert verdict["drops"] == [] and verdict["approved"][0]["value"] == "v2.31.0"
    assert verdict["introduced"] == ["zwsp-introduced:U+200B zero-width space"]
    proc = gate_cli(
        str(before),
        str(cut),
        "--approve",
        "version-drop:v2.31.0",
        "--approve",
        "zwsp-introduced:U+200B zero-width space",
    )
    assert proc.returncode == 0, proc.stdout


def test_cli_compares_two_store_folders(tmp_path: Path):
    for side, store in (("a", STORE), ("b", {k: v for k, v in STORE.items() if k != "scratch-2026-05.md"})):
        (tmp_path / side).mkdir()
        for name, text in store.items():
            (tmp_path / side / name).write_text(text, encoding="utf-8")
    proc = gate_cli(str(tmp_path / "a"), str(tmp_path / "b"))
    assert proc.returncode == 1 and "codespan-drop:--no-cache" in proc.stdout


@pytest.mark.parametrize("problem", ["missing", "not-utf8", "bad-approve", "no-after", "file-vs-folder"])
def test_cli_exit_2_is_one_line_naming_the_problem(texts, tmp_path, problem):
    before, kept, _ = texts
    bad = tmp_path / "other" / "latin1.md"
    bad.parent.mkdir()
    bad.write_bytes("caf\xe9 v2.31.0".encode("latin-1"))
    args = {
        "missing": ([str(before), str(tmp_path / "nope.md")], "nope.md"),
        "not-utf8": ([str(bad), str(kept)], "latin1.md: not UTF-8"),
        "bad-approve": ([str(before), str(kept), "--approve", "v2.31.0"], "TYPE:VALUE"),
        "no-after": ([str(before)], "after"),
        "file-vs-folder": ([str(before), str(before.parent)], "two files or two store folders"),
    }[problem]
    proc = gate_cli(*args[0])
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and args[1] in proc.stderr
    assert "Traceback" not in proc.stderr


def test_main_returns_the_exit_code_in_process(texts, capsys):
    before, kept, cut = texts
    assert main([str(before), str(kept)]) == 0
    assert main([str(before), str(cut)]) == 1
    assert main([str(before), str(before.with_name("absent.md"))]) == 2
    assert "absent.md" in capsys.readouterr().err
