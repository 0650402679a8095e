"""The CoalWash scorer (`washexp score`): score.mjs's output, byte for byte, on real files.

Expectations come from reading score.mjs; the JavaScript number rules are cross-checked against
node (our own snippet) when node is installed.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from washexp.needles import norm
from washexp.tokens import caliper_estimate
from washexp.wash.coalwash.score import (
    js_number_str,
    js_to_number,
    main,
    needles_present,
    pct,
    render_text,
    score,
    score_texts,
    size,
)

ROOT = Path(__file__).resolve().parent.parent
DAY = "2026-07-09"

BUILD = """# Build notes

- Node pinned at 22.4.1 after the 2026-03-14 regression in the test runner.
- CI cache key: `deps-v3-${lockfile-hash}`; bump the suffix when the lockfile format changes.
- Windows agents build from C:\\ci\\work\\washer (short path: MAX_PATH bites).
"""

RELEASE = """# Release notes

## v2.8.0 (2026-05-02)

Dropped the legacy `--fast` flag; see [[tooling]] for the replacement.

To restate the point already captured elsewhere in this store, the legacy flag is gone and the
replacement lives in the tooling notes, which is the same thing the line above says.

## v2.7.3 (2026-04-11)

Hotfix for the lockfile parser on CRLF checkouts.
"""

TOOLING = """# Tooling

Use `just wash --dry-run` before any real wash; it prints the plan and touches nothing.

It is perhaps worth pausing here to reflect that, in most cases and broadly speaking, a dry run
tends to be a sensible default, although of course circumstances may vary.

Formatter: ruff 0.6 with line length 120.
"""

INDEX = """# Memory index

- [[build-notes]]: toolchain pins and CI keys
- [[release-notes]]: shipped versions
- [[tooling]]: commands and formatter settings
"""

EXPECTED = {
    "fixture": "t01-dup-heavy",
    "description": "cross-file restatement and a hedge, planted for the scorer tests",
    "expectNoOp": False,
    "muscle": [
        {"id": "m01", "needle": "Node pinned at 22.4.1", "note": "toolchain pin"},
        {"id": "m02", "needle": "deps-v3-${lockfile-hash}", "note": "cache key"},
        {"id": "m03", "needle": "C:\\ci\\work\\washer", "note": "Windows path"},
        {"id": "m04", "needle": "v2.8.0 (2026-05-02)", "note": "version + date"},
        {"id": "m05", "needle": "[[tooling]]", "note": "wikilink"},
        {"id": "m06", "needle": "just wash --dry-run", "note": "command"},
        {"id": "m07", "needle": "ruff 0.6 with line length 120", "note": "config"},
        {"id": "m08", "needle": "lockfile parser on CRLF checkouts", "note": "lesson kernel"},
    ],
    "fat": [
        {
            "id": "f01",
            "needle": "To restate the point already captured elsewhere in this store",
            "class": "duplicate",
            "note": "restates the v2.8.0 line",
        },
        {"id": "f02", "needle": "worth pausing here to reflect", "class": "hedging", "note": "padding"},
    ],
}


def write_store(folder: Path, files: dict[str, str], expected: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_bytes(text.encode("utf-8"))
    if expected is not None:
        (folder / "expected.json").write_text(json.dumps(expected, ensure_ascii=False, indent=2), encoding="utf-8")
    return folder


@pytest.fixture
def fixture(tmp_path: Path) -> Path:
    files = {"MEMORY.md": INDEX, "build-notes.md": BUILD, "release-notes.md": RELEASE, "tooling.md": TOOLING}
    return write_store(tmp_path / "t01-dup-heavy", files, EXPECTED)


def copy_store(fixture: Path, dest: Path) -> Path:
    dest.mkdir()
    for p in fixture.glob("*.md"):
        shutil.copyfile(p, dest / p.name)
    return dest


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def run_json(capsys, *argv: str) -> dict:
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


# ---- score.test.mjs's four cases -------------------------------------------------------------


def test_pristine_copy_keeps_all_muscle_removes_no_fat_and_is_a_no_op(fixture, tmp_path, capsys):
    store = copy_store(fixture, tmp_path / "store")
    r = run_json(capsys, str(fixture), str(store))
    assert r["muscle"] == {"total": 8, "kept": 8, "lost": [], "lossPct": "0.0"}
    assert r["fat"] == {"total": 2, "removed": 0, "remaining": ["f01", "f02"], "removalPct": "0.0"}
    assert r["noOp"] == {"expected": False, "actual": True, "changed": []}


def test_perfect_clean_removes_fat_keeps_muscle_and_reports_the_changes(fixture, tmp_path, capsys):
    store = copy_store(fixture, tmp_path / "store")
    for name in ("release-notes.md", "tooling.md"):
        blocks = (store / name).read_text(encoding="utf-8").split("\n\n")
        kept = [b for b in blocks if "To restate the point" not in b and "worth pausing here" not in b]
        (store / name).write_text("\n\n".join(kept), encoding="utf-8")
    r = run_json(capsys, str(fixture), str(store))
    assert r["muscle"]["lost"] == [] and r["muscle"]["kept"] == 8
    assert r["fat"] == {"total": 2, "removed": 2, "remaining": [], "removalPct": "100.0"}
    assert r["noOp"] == {
        "expected": False,
        "actual": False,
        "changed": ["release-notes.md (modified)", "tooling.md (modified)"],
    }


def test_botched_clean_names_the_lost_fact_and_labels_the_round(fixture, tmp_path, capsys):
    store = copy_store(fixture, tmp_path / "store")
    notes = store / "build-notes.md"
    notes.write_text(notes.read_text(encoding="utf-8").replace(BUILD.splitlines()[2] + "\n", ""), encoding="utf-8")
    code, out, _ = run(capsys, str(fixture), str(store), "--round", "3", "--phase", "fat-exhausted", "--json")
    assert code == 0  # a loss is a result, not a failure
    assert '\n  "round": 3,\n' in out  # a JSON number, as Number("3") gives it
    r = json.loads(out)
    assert r["round"] == 3 and type(r["round"]) is int
    assert r["phase"] == "fat-exhausted"
    assert r["muscle"]["lost"] == ["m01"] and r["muscle"]["lossPct"] == "12.5"


def test_lean_fixture_passes_untouched_and_fails_on_any_edit(tmp_path, capsys):
    lean = {
        "fixture": "t03-lean",
        "expectNoOp": True,
        "muscle": [{"id": "m01", "needle": "tabs for Makefiles"}, {"id": "m02", "needle": "[[conventions]]"}],
        "fat": [],
    }
    files = {"MEMORY.md": "- [[conventions]]: house rules\n", "conventions.md": "Use tabs for Makefiles.\n"}
    fx = write_store(tmp_path / "t03-lean", files, lean)
    store = copy_store(fx, tmp_path / "store")
    args = (str(fx), str(store), "--date", DAY)
    assert run(capsys, *args)[1].splitlines()[2:4] == [
        "fat: 0/0 removed (n/a)",
        "no-op: PASS (store untouched, as a lean store must be)",
    ]
    with (store / "conventions.md").open("a", encoding="utf-8") as f:
        f.write("\ncompacted.\n")
    assert run(capsys, *args)[1].splitlines()[3] == (
        "no-op: FAIL — expected untouched, changed: conventions.md (modified)"
    )


# ---- the no-op check -----------------------------------------------------------------------------


def test_no_op_lists_deleted_and_modified_in_fixture_order_then_added(fixture, tmp_path, capsys):
    store = copy_store(fixture, tmp_path / "store")
    (store / "MEMORY.md").unlink()
    (store / "tooling.md").write_text(TOOLING + " ", encoding="utf-8")  # one trailing space is a change
    (store / "archive.md").write_text("# Archive\n", encoding="utf-8")
    (store / "build-notes.md").write_bytes("\ufeff".encode() + BUILD.encode())  # a BOM is content too
    r = run_json(capsys, str(fixture), str(store))
    assert r["noOp"]["changed"] == [
        "MEMORY.md (deleted)",
        "build-notes.md (modified)",
        "tooling.md (modified)",
        "archive.md (added)",
    ]


# ---- what counts as the store ---------------------------------------------------------------------


def test_non_md_files_and_subfolders_are_not_store_content(fixture, tmp_path, capsys):
    store = copy_store(fixture, tmp_path / "store")
    for name in ("release-notes.md", "tooling.md"):
        (store / name).rename(store / (name + ".bak"))  # the fat now lives only in non-.md files
    (store / "sub").mkdir()
    (store / "sub" / "tooling.md").write_text(TOOLING, encoding="utf-8")
    (store / "folder.md").mkdir()  # a directory named like a store file
    (store / "folder.md" / "x.md").write_text(RELEASE, encoding="utf-8")
    r = run_json(capsys, str(fixture), str(store))
    assert r["fat"]["remaining"] == []
    assert r["muscle"]["lost"] == ["m04", "m06", "m07", "m08"]  # m05's [[tooling]] is also in MEMORY.md
    assert r["noOp"]["changed"] == ["release-notes.md (deleted)", "tooling.md (deleted)"]
    assert size(store) == (2, len((INDEX + BUILD).encode()), caliper_estimate(INDEX) + caliper_estimate(BUILD))


def test_a_needle_can_match_across_two_files(tmp_path, capsys):
    exp = {"fixture": "t-bound", "muscle": [{"id": "m01", "needle": "ends here starts here"}], "fat": []}
    fx = write_store(tmp_path / "fx", {"a.md": "it ends here", "b.md": "starts here too"}, exp)
    r = run_json(capsys, str(fx), str(fx))
    assert r["muscle"]["lost"] == []  # the files are joined with "\n", which norm makes a space
    store = copy_store(fx, tmp_path / "store")
    (store / "b.md").write_text("so it starts here", encoding="utf-8")
    assert run_json(capsys, str(fx), str(store))["muscle"]["lost"] == ["m01"]


# ---- whitespace and Unicode -------------------------------------------------------------------


def test_js_whitespace_includes_nbsp_and_bom_but_not_u001c(tmp_path, capsys):
    exp = {
        "fixture": "t-ws",
        "muscle": [
            {"id": "m01", "needle": "port 8443 is reserved"},
            {"id": "m02", "needle": "retry budget is 3"},
            {"id": "m03", "needle": "key rotation monthly"},
            {"id": "m04", "needle": "log level   debug"},
        ],
        "fat": [],
    }
    text = (
        "port\u00a08443 is\u3000reserved\n"
        "retry\ufeffbudget is 3\n"
        "key\u001crotation monthly\n"  # U+001C: Python's isspace says yes, JavaScript's \s says no
        "log level\t\u2028debug\n"
    )
    fx = write_store(tmp_path / "fx", {"notes.md": "\n".join(m["needle"] for m in exp["muscle"])}, exp)
    store = write_store(tmp_path / "store", {"notes.md": text})
    assert run_json(capsys, str(fx), str(store))["muscle"]["lost"] == ["m03"]


def test_decomposed_sara_am_is_a_lost_fact(tmp_path, capsys):
    composed = "\u0e19\u0e49\u0e33\u0e2b\u0e19\u0e31\u0e01"  # น้ำหนัก with U+0E33
    exp = {"fixture": "t-thai", "muscle": [{"id": "m01", "needle": f"“{composed}” 42 kg"}], "fat": []}
    fx = write_store(tmp_path / "fx", {"th.md": f"จดไว้: “{composed}” 42 kg\n"}, exp)
    assert run_json(capsys, str(fx), str(fx))["muscle"]["lost"] == []
    decomposed = composed.replace("\u0e33", "\u0e4d\u0e32")
    store = write_store(tmp_path / "store", {"th.md": f"จดไว้: “{decomposed}” 42 kg\n"})
    r = run_json(capsys, str(fx), str(store))
    assert r["muscle"]["lost"] == ["m01"] and r["muscle"]["lossPct"] == "100.0"


def test_invalid_utf8_reads_as_replacement_characters_not_an_error(tmp_path, capsys):
    exp = {"fixture": "t-bytes", "muscle": [{"id": "m01", "needle": "a\ufffd\ufffdb"}], "fat": []}
    fx = write_store(tmp_path / "fx", {}, exp)
    (fx / "x.md").write_bytes(b"a\xff\xc3b")  # two invalid sequences, as node decodes them
    store = write_store(tmp_path / "store", {})
    (store / "x.md").write_bytes(b"a\xfe\xc2b")  # different bytes, the same decoded text
    r = run_json(capsys, str(fx), str(store))
    assert r["muscle"]["lost"] == [] and r["noOp"]["actual"] is True


def test_a_lone_surrogate_needle_matches_half_an_astral_character(tmp_path, capsys):
    # JSON "\ud83d" is a lone high surrogate; JavaScript compares UTF-16 code units.
    fx = tmp_path / "fx"
    fx.mkdir()
    (fx / "expected.json").write_text(
        '{"muscle": [{"id": "m01", "needle": "ok \\ud83d"}, {"id": "m02", "needle": "\\ude00 ok"}]}', encoding="utf-8"
    )
    (fx / "e.md").write_text("ok 😀 ok", encoding="utf-8")
    assert run_json(capsys, str(fx), str(fx))["muscle"]["lost"] == []


# ---- --size -------------------------------------------------------------------------------------


def test_size_counts_utf16_units_rounds_half_up_per_file(tmp_path, capsys):
    store = write_store(tmp_path / "s", {"a.md": "ab", "b.md": "ok", "c.md": "😀", "notes.txt": "ignored"})
    # "ab": 2/4 = 0.5 -> 1 (JS rounds half up; Python's round would give 0), twice;
    # "😀": 2 UTF-16 units, non-ASCII: 2/1.5 = 1.33 -> 1; its UTF-8 is 4 bytes.
    assert size(store) == (3, 8, 3)
    code, out, err = run(capsys, "--size", str(store))
    assert (code, err) == (0, "")
    assert out == f"{store} · 3 file(s) · 8 bytes · ~3 tok (~est)\n"


def test_size_needs_a_dir_and_must_come_first(fixture, tmp_path, capsys):
    code, out, err = run(capsys, "--size")
    assert (code, out, err) == (1, "", "score: --size needs a dir\n")
    store = copy_store(fixture, tmp_path / "store")
    # not first: score mode, with --size ignored as an unknown flag
    code, out, _ = run(capsys, str(fixture), "--size", str(store), "--date", DAY)
    assert code == 0 and out.startswith(f"CoalWash score · t01-dup-heavy · {DAY}\n")


# ---- output formats -----------------------------------------------------------------------------


def test_text_lines_are_byte_exact(fixture, tmp_path, capsysbinary):
    store = copy_store(fixture, tmp_path / "store")
    (store / "build-notes.md").write_text(BUILD.replace("Node pinned at 22.4.1", "Node pinned"), encoding="utf-8")
    (store / "tooling.md").unlink()
    argv = (str(fixture), str(store), "--model", "qwen3.8-max", "--round", "2", "--phase", "has-fat", "--date", DAY)
    code = main(list(argv))
    out, err = capsysbinary.readouterr()
    assert (code, err) == (0, b"")
    assert (
        out
        == (
            f"CoalWash score · t01-dup-heavy · qwen3.8-max · round 2 · has-fat · {DAY}\n"
            "muscle: 5/8 kept · fact-loss 37.5% · LOST: m01, m06, m07\n"
            "fat: 1/2 removed (50.0%) · remaining: f01\n"
            "changed files: build-notes.md (modified), tooling.md (deleted)\n"
            "fidelity: 3 FACT(S) LOST\n"
        ).encode()
    )


def test_json_keys_come_in_score_mjs_order_and_unset_labels_are_omitted(fixture, capsys):
    code, out, _ = run(capsys, str(fixture), str(fixture), "--json", "--model", "m", "--date", DAY)
    assert code == 0
    r = json.loads(out)
    assert list(r) == ["fixture", "model", "date", "muscle", "fat", "noOp"]
    assert list(r["muscle"]) == ["total", "kept", "lost", "lossPct"]
    assert list(r["fat"]) == ["total", "removed", "remaining", "removalPct"]
    assert list(r["noOp"]) == ["expected", "actual", "changed"]
    assert out.startswith('{\n  "fixture": "t01-dup-heavy",\n  "model": "m",\n  "date": "2026-07-09",\n')
    full = score(fixture, fixture, round=1, model="m", phase="has-fat", date=DAY)
    assert list(full)[:5] == ["fixture", "round", "model", "phase", "date"]


def test_fixture_name_falls_back_to_the_folder_name(tmp_path, capsys):
    fx = write_store(tmp_path / "t09-nameless", {"a.md": "x"}, {"fixture": "", "muscle": [], "fat": []})
    r = run_json(capsys, str(fx) + "/", str(fx))  # node's basename ignores the trailing slash
    assert r["fixture"] == "t09-nameless"
    assert r["muscle"]["lossPct"] == "n/a" and r["fat"]["removalPct"] == "n/a"


def test_odd_manifest_values_print_as_javascript_prints_them(tmp_path, capsys):
    exp = {
        "fixture": "t-odd",
        "muscle": [
            {"id": 7.0, "needle": 2.50},  # String(2.5) is "2.5": present
            {"id": 8.0, "needle": 3.0},  # String(3) is "3": absent; the id prints as 8
            {"needle": "absent"},  # no id: null in JSON, empty in the text list
            {"id": "m04"},  # no needle: the string "undefined", absent here
            "not an object",
        ],
        "fat": [],
    }
    fx = write_store(tmp_path / "fx", {"a.md": "v2.5 3 absent undefined"}, exp)  # a fixture holds every needle
    st = write_store(tmp_path / "st", {"a.md": "v2.5 was fine"})
    code, out, _ = run(capsys, str(fx), str(st), "--json", "--round", "0x10")
    assert '"round": 16,' in out and "\n      8,\n      null,\n" in out
    assert json.loads(out)["muscle"]["lost"] == [8, None, "m04", None]
    code, out, _ = run(capsys, str(fx), str(st), "--round", "1e21", "--date", DAY)
    assert out.splitlines()[:2] == [
        f"CoalWash score · t-odd · round 1e+21 · {DAY}",
        "muscle: 1/5 kept · fact-loss 80.0% · LOST: 8, , m04, ",
    ]
    (st / "a.md").write_text("v2.5 was undefined", encoding="utf-8")
    assert run_json(capsys, str(fx), str(st))["muscle"]["lost"] == [8, None]


def test_a_non_number_round_prints_nan_and_json_null_as_score_mjs_does(fixture, capsys):
    code, out, _ = run(capsys, str(fixture), str(fixture), "--round", "three", "--json")
    assert code == 0 and '"round": null,' in out
    code, out, _ = run(capsys, str(fixture), str(fixture), "--round", "three", "--date", DAY)
    assert out.splitlines()[0] == f"CoalWash score · t01-dup-heavy · round NaN · {DAY}"
    code, out, _ = run(capsys, str(fixture), str(fixture), "--round", "0", "--date", DAY)
    assert out.splitlines()[0] == f"CoalWash score · t01-dup-heavy · round 0 · {DAY}"  # 0 != null in JS
    code, out, _ = run(capsys, str(fixture), str(fixture), "--round", "", "--model", "", "--date", DAY, "--json")
    assert list(json.loads(out))[:3] == ["fixture", "model", "date"]  # an empty round is dropped, a model kept


# ---- percentages and JavaScript numbers ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "d", "text"),
    [
        (1, 8, "12.5"),
        (2, 3, "66.7"),
        (1, 16, "6.3"),  # 6.25 is an exact double: JS rounds the tie up (Python's format gives 6.2)
        (1, 400, "0.3"),  # 0.25 likewise
        (23, 80, "28.7"),  # 28.749999999999996 as a double: below the tie, so down
        (0, 5, "0.0"),
        (5, 5, "100.0"),
        (0, 0, "n/a"),
    ],
)
def test_pct_is_to_fixed_on_the_binary_double(n, d, text):
    assert pct(n, d) == text


def test_js_number_rules():
    assert [js_number_str(x) for x in (3, 3.0, -0.0, 0.1, 1e21, 1e-7, 123e-9, 1.5e300, 2**53 + 1)] == [
        "3",
        "3",
        "0",
        "0.1",
        "1e+21",
        "1e-7",
        "1.23e-7",
        "1.5e+300",
        "9007199254740992",
    ]
    assert [js_to_number(s) for s in (" 7 ", "0b101", ".5", "5.", "-Infinity")] == [7, 5, 0.5, 5, float("-inf")]
    for s in ("1_000", "inf", "-0x10", "0x", "nan", "1e"):
        assert js_to_number(s) != js_to_number(s)  # NaN


NODE = shutil.which("node")


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_js_rules_agree_with_node():
    fractions = [[n, d] for d in range(1, 161) for n in range(d + 1)]
    words = [" 7 ", "0x1f", "0o17", "0b101", ".5", "5.", "1e21", "-0", "Infinity", "1_0", "\u00a012\ufeff", "abc"]
    units = ["ab", "abcdef", "😀", "é" * 3, "x" * 6 + "é" * 3, "\u0e33" * 9]
    snippet = (
        "const [fr, ws, us] = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "const est = (t) => { let a = 0, n = 0; for (let i = 0; i < t.length; i++) "
        "(t.charCodeAt(i) < 128 ? a++ : n++); return Math.round(a / 4 + n / 1.5); };"
        "console.log(JSON.stringify([fr.map(([n, d]) => ((n / d) * 100).toFixed(1)),"
        " ws.map((w) => String(Number(w))), us.map(est)]));"
    )
    proc = subprocess.run(
        [NODE, "-e", snippet], input=json.dumps([fractions, words, units]), capture_output=True, text=True, check=True
    )
    fixed, numbers, estimates = json.loads(proc.stdout)
    assert [pct(n, d) for n, d in fractions] == fixed
    assert [js_number_str(js_to_number(w)) for w in words] == numbers
    assert [caliper_estimate(u) for u in units] == estimates


# ---- the one-pass match ---------------------------------------------------------------------------


def test_needles_present_handles_empty_duplicate_nested_and_overlapping_needles():
    hay = "abc  abcd\tbcde"
    needles = ["", "abc", "abc ", "abc\u00a0", "bcd", "abcd bcde", "cd b", "xyz", "abcde", "a", "d\u2028bc"]
    assert needles_present(needles, hay) == [True, True, True, True, True, True, True, False, False, True, True]


def test_needles_present_equals_a_plain_scan_on_random_texts():
    rng = random.Random(20260709)
    alphabet = "aab  c\t\n\u00a0\u0e33\u0e4d\u0e32é😀\u001c"
    for _ in range(200):
        hay = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        needles = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 7))) for _ in range(30)]
        assert needles_present(needles, hay) == [norm(n) in norm(hay) for n in needles]


def test_score_texts_gives_what_score_gives(fixture, tmp_path):
    store = copy_store(fixture, tmp_path / "store")
    (store / "tooling.md").write_text("Formatter: ruff 0.6 with line length 120.\n", encoding="utf-8")
    texts = {p.name: p.read_text(encoding="utf-8") for p in fixture.glob("*.md")}
    after = {p.name: p.read_text(encoding="utf-8") for p in store.glob("*.md")}
    in_memory = score_texts(EXPECTED, texts, after, "t01-dup-heavy", round=4, model="m", date=DAY)
    assert in_memory == score(fixture, store, round=4, model="m", date=DAY)
    assert render_text(in_memory).splitlines()[1] == "muscle: 7/8 kept · fact-loss 12.5% · LOST: m06"


# ---- errors and the command line ----------------------------------------------------------------------


def test_missing_store_dir_is_exit_1_with_one_line(fixture, tmp_path, capsys):
    missing = tmp_path / "nope"
    code, out, err = run(capsys, str(fixture), str(missing))
    assert (code, out) == (1, "")
    assert err == f"score: cannot read {missing}: ENOENT: no such file or directory, scandir '{missing}'\n"


def test_a_washed_store_given_first_is_refused_not_scored(fixture, tmp_path, capsys):
    """The trap: the arguments swapped (a washed copy that kept its expected.json, then the
    fixture) printed "fat: 0/2 removed" and the fixture's text as "added", exit 0."""
    store = copy_store(fixture, tmp_path / "store")
    for name in ("release-notes.md", "tooling.md"):  # the perfect clean: both fat needles gone
        blocks = (store / name).read_text(encoding="utf-8").split("\n\n")
        kept = [b for b in blocks if "To restate the point" not in b and "worth pausing here" not in b]
        (store / name).write_text("\n\n".join(kept), encoding="utf-8")
    shutil.copyfile(fixture / "expected.json", store / "expected.json")  # a copy may keep it: proves nothing
    code, out, err = run(capsys, str(store), str(fixture))
    assert (code, out) == (1, "")  # score.mjs's error code, nothing scored
    assert err == (
        f"score: {store} is not a fixture: it lacks 2 of the 10 needles its expected.json plants (f01, f02); "
        "a washed store goes second (washexp score FIXTURE STORE)\n"
    )
    assert run(capsys, str(fixture), str(store))[0] == 0  # the order score.mjs takes still scores


def test_usage_errors_are_exit_1(fixture, capsys):
    code, out, err = run(capsys, str(fixture))
    assert (code, out) == (1, "") and err.startswith("score: usage: ") and err.count("\n") == 1
    # flags before the folders: their values become the positionals, as in score.mjs
    code, _, err = run(capsys, "--round", "3", str(fixture), str(fixture))
    assert code == 1 and err.startswith("score: cannot read expected.json in 3: ENOENT")
    code, _, err = run(capsys, str(fixture), str(fixture), "--date", "09/07/2026")
    assert (code, err) == (1, "score: --date needs a date YYYY-MM-DD, got '09/07/2026'\n")


def test_bad_manifest_is_exit_1(tmp_path, capsys):
    fx = write_store(tmp_path / "fx", {"a.md": "x"})
    (fx / "expected.json").write_text('{"muscle": [NaN]}', encoding="utf-8")
    code, out, err = run(capsys, str(fx), str(fx))
    assert code == 1 and out == "" and err.startswith(f"score: cannot read expected.json in {fx}: ")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    "manifest, named",
    [
        ('{"muscle": "m01"}', "muscle is not a list"),
        ('{"fat": {"id": "f01"}}', "fat is not a list"),
        ('{"muscle": [{"id": "m01", "needle": "x"}, null]}', "muscle[1] is null"),
        ("null", "null has no muscle or fat"),
    ],
)
def test_a_manifest_score_mjs_would_throw_on_is_one_line_exit_1(tmp_path, capsys, manifest, named):
    # score.mjs throws a TypeError here (`.map` of a non-list, `null.needle`): exit 1 with a stack
    # trace. Ours is the same exit code with one line naming the field (docs/coalwash-departures.md).
    fx = write_store(tmp_path / "fx", {"a.md": "x"})
    (fx / "expected.json").write_text(manifest, encoding="utf-8")
    code, out, err = run(capsys, str(fx), str(fx))
    assert (code, out) == (1, "") and err.count("\n") == 1
    assert err.startswith("score: expected.json of fx: ") and named in err


def test_the_washexp_command_runs_the_scorer(fixture, tmp_path):
    store = copy_store(fixture, tmp_path / "store")
    (store / "tooling.md").unlink()
    proc = subprocess.run(
        [sys.executable, "-m", "washexp.cli", "score", str(fixture), str(store), "--json", "--round", "3"],
        cwd=ROOT,
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout.decode("utf-8"))
    assert r["round"] == 3 and r["muscle"]["lost"] == ["m06", "m07"] and r["fat"]["remaining"] == ["f01"]
    proc = subprocess.run(
        [sys.executable, "-m", "washexp.cli", "score", str(fixture), str(tmp_path / "gone")],
        cwd=ROOT,
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == 1 and proc.stdout == b""
    assert proc.stderr.decode().count("\n") == 1 and proc.stderr.startswith(b"score: cannot read ")
