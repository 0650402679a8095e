"""The caliper: CoalWash's measureEntries figures and mechFatFromText, on hand-computed stores.

Expected numbers are worked out by hand in the comments (est = round(ascii/4 + other/1.5) over
UTF-16 units, halves up; recall files = round(bytes/4)). They were also checked against
CoalWash's own caliper.mjs run under Node on the same folders.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import washexp_cli
from washexp.errors import WashexpError
from washexp.wash.coalwash.caliper import READ_BUDGET_BYTES, measure, mech_fat, mech_fat_split
from washexp.wash.coalwash.gauge import STATE_NAME

ROOT = Path(__file__).resolve().parent.parent

L23 = "- Node pinned at 22.4.1"  # 23 chars: structure-sized, a repeat is never fat
L24 = "- Node pinned at 22.4.1."  # 24 chars: substance, a repeat costs round(24/4) = 6


# --------------------------------------------------------------------------- mech_fat


def test_a_repeated_line_of_23_chars_is_structure_and_24_is_fat():
    assert len(L23) == 23 and len(L24) == 24
    assert mech_fat(f"{L23}\n{L23}\n{L23}\n") == 0
    assert mech_fat(f"{L24}\n{L24}\n") == 6
    assert mech_fat(f"{L24}\n{L24}\n{L24}\n") == 12  # every occurrence after the first


def test_a_repeat_differing_only_in_outer_spaces_counts_priced_by_the_untrimmed_line():
    # "  " + L24 + "   " is 29 chars: round(29/4) = round(7.25) = 7
    assert mech_fat(f"{L24}\n  {L24}   \n") == 7
    # the first occurrence is never priced, whichever form it has
    assert mech_fat(f"  {L24}   \n{L24}\n") == 6


def test_duplicates_are_counted_within_one_text_only_and_case_sensitively():
    assert mech_fat(f"{L24}\n{L24.upper()}\n") == 0


def test_blank_runs_of_three_and_four_cost_one_and_two():
    assert mech_fat("a\n\nb") == 0  # one blank line
    assert mech_fat("a\n\n\nb") == 0  # two in a row: allowed
    assert mech_fat("a\n\n\n\nb") == 1  # three: one beyond two
    assert mech_fat("a\n\n\n\n\nb") == 2  # four: two beyond two
    assert mech_fat("a\n \t\n\u00a0\n\u3000\nb") == 1  # whitespace-only lines are blank (JS trim)
    assert mech_fat_split("a\n\n\n\nb\n\n\n\nc") == (0, 2)


def test_a_trailing_newline_is_one_more_blank_line():
    # "a\n\n\n" splits as a, "", "", "": a run of three
    assert mech_fat("a\n\n\n") == 1
    assert mech_fat("a\n\n") == 0


def test_blank_uses_the_javascript_trim_set_not_pythons():
    # U+001C is whitespace to Python's strip but not to JavaScript's trim: the run is broken
    assert mech_fat("a\n\n\n\x1c\nb") == 0
    # U+FEFF is trimmed by JavaScript: "\ufeff" + L24 repeats L24, priced raw: round(6 + 1/1.5) = 7
    assert mech_fat(f"{L24}\n\ufeff{L24}\n") == 7


def test_non_ascii_lines_count_utf16_units_not_bytes():
    thai12 = "ภาษาไทยสิบสอ"  # 12 Thai units (36 UTF-8 bytes): too short to be substance
    assert len(thai12) == 12
    assert mech_fat(f"{thai12}\n{thai12}\n") == 0
    thai24 = thai12 * 2  # 24 units: substance, priced round(24/1.5) = 16
    assert mech_fat(f"{thai24}\n{thai24}\n") == 16


def test_an_astral_character_is_two_units():
    # 12 emoji are 12 code points but 24 UTF-16 units, so JavaScript's length says substance;
    # priced round(24/1.5) = 16
    emoji = "\U0001f600" * 12
    assert len(emoji) == 12
    assert mech_fat(f"{emoji}\n{emoji}\n") == 16


def test_crlf_lines_split_like_lf_and_a_lone_cr_stays_in_its_line():
    assert mech_fat(f"{L24}\r\n{L24}\r\n") == 6
    # "L24\rL24" is one 49-char line, seen once: no duplicate
    assert mech_fat(f"{L24}\r{L24}\n") == 0


# --------------------------------------------------------------------------- measure

INDEX = """# Memory index

- [[build-runner]]: Node pinned at 22.4.1, pnpm 9.12.0
- [[deploy-window]]: releases go out Tuesdays 09:00 UTC
- [[deploy-window]]: releases go out Tuesdays 09:00 UTC



- [[thai-notes]]: ผู้ใช้ชอบคำตอบสั้น
"""


def _store(tmp_path: Path, files: dict[str, str | bytes]) -> Path:
    store = tmp_path / "store"
    store.mkdir()
    for name, text in files.items():
        data = text if isinstance(text, bytes) else text.encode("utf-8")
        (store / name).write_bytes(data)
    return store


def test_measure_a_small_store_by_hand(tmp_path):
    topic = "# Build runner\n\nNode pinned at 22.4.1 on the runner host.\n" * 3  # recall: never read
    claude = "# Rules\n\nAnswer in English; ใช้ภาษาไทยเมื่อถูกถาม\n"
    store = _store(tmp_path, {"MEMORY.md": INDEX, "CLAUDE.md": claude, "build-runner.md": topic})
    (store / "expected.json").write_text("{}")  # not a *.md: ignored

    m = measure(store)

    index_bytes = len(INDEX.encode())
    assert m.files == 3
    assert m.total_bytes == index_bytes + len(claude.encode()) + len(topic.encode())
    assert m.always_loaded == ("CLAUDE.md", "MEMORY.md")
    assert m.index_bytes == index_bytes
    assert m.index_lines == 10  # 9 newline-terminated lines + the empty piece after the last
    # index: the repeated deploy line (55 ASCII chars: round(13.75) = 14) + one blank beyond two
    assert (m.mech_fat_dup_tokens, m.mech_fat_blank_tokens) == (14, 1)
    # CLAUDE.md: "# Rules\n\n" (9) + "Answer in English; " (19) + "\n" (1) = 29 ASCII, 21 Thai units
    ascii_c = sum(1 for ch in claude if ord(ch) < 128)
    assert (ascii_c, len(claude) - ascii_c) == (29, 21)
    claude_est = 21  # round(29/4 + 21/1.5) = round(7.25 + 14) = round(21.25)
    index_ascii = sum(1 for ch in INDEX if ord(ch) < 128)
    assert (index_ascii, len(INDEX) - index_ascii) == (205, 18)  # the Thai line holds 18 units
    index_est = 63  # round(205/4 + 18/1.5) = round(51.25 + 12) = round(63.25)
    assert m.always_loaded_tokens_est == claude_est + index_est
    assert m.always_loaded_bytes == len(claude.encode()) + index_bytes
    # the topic file is recall: estimated from its bytes only, 3 x 58 = 174: round(43.5) = 44
    assert len(topic.encode()) == 174
    assert m.total_tokens_est == claude_est + index_est + 44


def test_fat_in_recall_files_is_not_counted(tmp_path):
    dup_topic = f"{L24}\n" * 50 + "\n" * 10
    store = _store(tmp_path, {"MEMORY.md": "# Memory\n- [[notes]]\n", "notes.md": dup_topic})
    assert measure(store).mech_fat_tokens == 0
    assert mech_fat(dup_topic) > 0  # the same text, were it always-loaded, would be fat


def test_duplicates_across_files_are_not_fat(tmp_path):
    store = _store(tmp_path, {"MEMORY.md": f"{L24}\n", "CLAUDE.md": f"{L24}\n"})
    assert measure(store).mech_fat_tokens == 0


def test_governance_files_count_as_always_loaded(tmp_path):
    agents = "# Agents\n" + f"{L24}\n" * 3  # 9 + 75 = 84 ASCII chars: 21 tok, fat 12
    store = _store(tmp_path, {"MEMORY.md": "# Memory\n", "AGENTS.md": agents, "topic.md": "x" * 400})
    m = measure(store)
    assert m.always_loaded == ("AGENTS.md", "MEMORY.md")
    assert m.always_loaded_tokens_est == 21 + 2  # "# Memory\n" is 9 chars: round(2.25) = 2
    assert m.mech_fat_tokens == 12
    assert m.total_tokens_est == 21 + 2 + 100


def test_a_bom_is_kept_and_counted_as_one_non_ascii_unit(tmp_path):
    store = _store(tmp_path, {"MEMORY.md": "\ufeff" + "a" * 8})  # round(8/4 + 1/1.5) = round(2.667) = 3
    assert measure(store).always_loaded_tokens_est == 3


def test_a_store_without_an_index_has_no_index_figures(tmp_path):
    store = _store(tmp_path, {"CLAUDE.md": "# Rules\n", "topic.md": "abcd" * 10})
    m = measure(store)
    assert (m.index_bytes, m.index_lines) == (0, 0)
    assert m.always_loaded == ("CLAUDE.md",)
    assert m.total_tokens_est == 2 + 10


def test_the_read_budget_cut_off(tmp_path):
    """Governance is read first; an index that no longer fits is sized from bytes, with no lines and no fat."""
    thai_line = "ผู้ใช้ชอบคำตอบสั้น ๆ และตรงประเด็นเสมอ\n"  # 37 Thai/space units + newline
    index = thai_line * 3000 + "\n\n\n\n"  # ~330 KB alone: over the budget after CLAUDE.md
    claude = "# Rules\n" + "a" * (100 * 1024)
    store = _store(tmp_path, {"MEMORY.md": index, "CLAUDE.md": claude})
    index_bytes = len(index.encode())
    assert index_bytes + len(claude) > READ_BUDGET_BYTES > len(claude)

    m = measure(store)

    assert m.unread == ("MEMORY.md",)
    assert m.index_bytes == index_bytes
    assert m.index_lines == 0
    assert m.mech_fat_tokens == 0  # the index's duplicates and blank run are not seen
    claude_est = int(len(claude) / 4 + 0.5)
    assert m.always_loaded_tokens_est == claude_est + int(index_bytes / 4 + 0.5)


def test_the_budget_includes_its_last_byte_and_is_not_a_stop(tmp_path):
    # CLAUDE.md alone is over budget (unread); MEMORY.md of exactly the budget is still read
    claude = "b" * (READ_BUDGET_BYTES + 1)
    index = (f"{L24}\n" * 2).ljust(READ_BUDGET_BYTES, "c")
    assert len(index) == READ_BUDGET_BYTES
    store = _store(tmp_path, {"MEMORY.md": index, "CLAUDE.md": claude})
    m = measure(store)
    assert m.unread == ("CLAUDE.md",)
    assert m.index_lines == 3
    assert m.mech_fat_tokens == 6
    # one byte more and the index is not read
    (store / "MEMORY.md").write_text(index + "c")
    m = measure(store)
    assert m.unread == ("CLAUDE.md", "MEMORY.md")
    assert m.mech_fat_tokens == 0


def test_index_lines_and_bytes(tmp_path):
    store = _store(tmp_path, {"MEMORY.md": "- [[a]]\n- [[b]]\n"})
    m = measure(store)
    assert (m.index_bytes, m.index_lines) == (16, 3)  # JavaScript's split('\n') counts the empty tail
    (store / "MEMORY.md").write_text("- [[a]]\n- [[b]]")
    assert measure(store).index_lines == 2


def test_to_dict_has_the_measure_entries_shape(tmp_path):
    store = _store(tmp_path, {"MEMORY.md": INDEX})
    d = measure(store).to_dict()
    # measureEntries' keys in its order (gzipRatio null: withGzip is off by default), after our store name
    assert list(d) == [
        "store",
        "files",
        "totalBytes",
        "totalTokensEst",
        "alwaysLoaded",
        "index",
        "mechFat",
        "gzipRatio",
        "est",
    ]
    assert d["gzipRatio"] is None
    assert d["mechFat"] == {"tokensEst": 15, "dupTokens": 14, "blankTokens": 1}
    assert d["index"] == {"bytes": len(INDEX.encode()), "lines": 10}
    assert d["est"] is True


def test_a_missing_store_is_an_error_naming_it(tmp_path):
    with pytest.raises(WashexpError, match="no-such-store"):
        measure(tmp_path / "no-such-store")


# --------------------------------------------------------------------------- the command


def _caliper(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return washexp_cli("caliper", *args, cwd=cwd)


def test_cli_one_line(tmp_path):
    store = _store(tmp_path, {"MEMORY.md": INDEX})
    r = _caliper(str(store), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "[washexp] LEAN — always-loaded ~63 tok/session (~est) · fat ~15 tok\n"  # see the by-hand test
    assert r.stderr == ""
    assert not (store / STATE_NAME).exists()  # a LEAN, unarmed reading changes no state: no file


def test_cli_json_is_the_full_measurement_and_verdict(tmp_path):
    store = _store(tmp_path, {"MEMORY.md": INDEX, "topic.md": "abcd" * 25})
    r = _caliper(str(store), "--json", "--gauge", "off", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["files"] == 2 and out["totalTokensEst"] == measure(store).total_tokens_est
    assert out["mechFat"]["tokensEst"] == 15
    assert out["gauge"] == "off"
    assert out["verdict"]["band"] == "OFF" and out["verdict"]["fires"] is True
    assert out["verdict"]["breakEven"]["fat_tokens"] == 15


def test_cli_armed_writes_its_state_beside_the_store_never_as_md(tmp_path):
    fat_index = "# Memory\n" + f"{L24}\n" * 90  # 89 repeats x 6 = 534 tok of fat: arms
    store = _store(tmp_path, {"MEMORY.md": fat_index})
    r = _caliper(str(store), "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["verdict"]["band"] in {"OBESE", "FULL"}
    assert sorted(p.name for p in store.iterdir()) == [STATE_NAME, "MEMORY.md"]
    assert json.loads((store / STATE_NAME).read_text())["armed"] is True


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda t: t / "absent", "absent: no such store folder"),
        (lambda t: (t / "a-file.md").write_text("x") and t / "a-file.md", "a-file.md: a file, not a store folder"),
        (lambda t: (t / "empty").mkdir() or t / "empty", "empty: not a store"),
    ],
    ids=["missing", "a-file", "no-md"],
)
def test_cli_bad_store_is_exit_2_one_line(tmp_path, make, needle):
    r = _caliper(str(make(tmp_path)), cwd=tmp_path)
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1 and needle in r.stderr
    assert "Traceback" not in r.stderr


def test_cli_usage_errors_are_exit_2_one_line(tmp_path):
    store = _store(tmp_path, {"MEMORY.md": INDEX})
    r = _caliper(str(store), "--gauge", "coalwash-1", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr.count("\n") == 1 and "did you mean 'coalwash-1.0'" in r.stderr
    r = _caliper(str(store), "--bogus", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr.count("\n") == 1 and "--bogus" in r.stderr
    r = _caliper(cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1


def test_cli_refuses_a_md_state_file_and_a_corrupt_one(tmp_path):
    store = _store(tmp_path, {"MEMORY.md": "# Memory\n" + f"{L24}\n" * 90})
    r = _caliper(str(store), "--state", str(store / "gauge.md"), cwd=tmp_path)
    assert r.returncode == 2 and "must not be a *.md" in r.stderr and r.stderr.count("\n") == 1
    assert sorted(p.name for p in store.iterdir()) == ["MEMORY.md"]  # nothing written
    bad = tmp_path / "state.json"
    bad.write_text("{not json")
    r = _caliper(str(store), "--state", str(bad), cwd=tmp_path)
    assert r.returncode == 2 and "state.json: not valid JSON" in r.stderr and r.stdout == ""
    assert bad.read_text() == "{not json"


def test_cli_exit_1_when_the_state_cannot_be_written(tmp_path):
    store = _store(tmp_path, {"MEMORY.md": "# Memory\n" + f"{L24}\n" * 90})
    r = _caliper(str(store), "--state", str(tmp_path / "no-dir" / "state.json"), cwd=tmp_path)
    assert r.returncode == 1
    assert r.stdout == "" and r.stderr.count("\n") == 1 and "cannot write the gauge state" in r.stderr


def test_every_committed_store_is_measured_and_the_near_wall_store_reports_the_wall():
    root = Path(__file__).resolve().parent.parent
    for store in sorted((root / "fixtures" / "wash").iterdir()):
        if not store.is_dir():
            continue
        r = subprocess.run(
            [sys.executable, "-m", "washexp.cli", "caliper", str(store)], capture_output=True, text=True, cwd=root
        )
        assert r.returncode == 0 and r.stdout.startswith("[washexp] "), (store.name, r.stderr)
        assert ("wall:" in r.stdout) == (store.name == "near-wall"), r.stdout
