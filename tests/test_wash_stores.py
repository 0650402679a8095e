"""The wash stores: every committed store validates and carries its probe; every loader rule is
shown by a store that breaks exactly that rule, with the exact one-line message."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from washexp.errors import ConfigError, FixtureError
from washexp.needles import norm
from washexp.wash.coalwash.files import joined, read_md
from washexp.wash.store.stores import FAT_CLASSES, load_store, load_stores

ROOT = Path(__file__).resolve().parent.parent
STORES = ROOT / "fixtures" / "wash"
NAMES = ["dup-heavy", "governed", "lean", "mixed-script", "near-wall", "plump-real", "superseded"]


# --- the committed stores -----------------------------------------------------------------------


def test_all_stores_load():
    stores = load_stores(STORES)
    assert [s.name for s in stores] == NAMES
    for s in stores:
        assert s.expected.fixture == s.name
        assert len(s.digest) == 64


def test_fat_classes_are_all_planted_somewhere():
    classes = {n.cls for s in load_stores(STORES) for n in s.expected.fat}
    assert classes == set(FAT_CLASSES)


def test_lean_store_is_a_no_op_store():
    lean = load_store(STORES / "lean")
    assert lean.expected.expect_no_op and not lean.expected.fat and len(lean.expected.muscle) >= 10
    others = [s for s in load_stores(STORES) if s.name != "lean"]
    assert not any(s.expected.expect_no_op for s in others) and all(s.expected.fat for s in others)


def test_mixed_script_needles_carry_the_hard_characters():
    needles = [n.needle for n in load_store(STORES / "mixed-script").expected.muscle]
    text = "".join(needles)
    assert "\u0e33" in text  # composed sara-am
    assert "\u201c" in text and "\u2019" in text  # curly double and single quotes
    assert "\U0001f4a1" in text  # an astral character (two UTF-16 units)
    assert "配達完了" in text and "签收" in text
    fat = [n.needle for n in load_store(STORES / "mixed-script").expected.fat]
    assert any("\u0e33" in f for f in fat)
    store_text = joined(read_md(STORES / "mixed-script"))
    assert "\u0e4d\u0e32" not in store_text  # no decomposed sara-am anywhere


def test_a_decomposed_sara_am_does_not_match():
    """The scorer's rule, which the loader shares: decomposition is a lost fact, not a near match."""
    needle = "“ใบนำส่ง”"
    haystack = norm(joined(read_md(STORES / "mixed-script")))
    assert norm(needle) in haystack
    assert norm(needle).replace("\u0e33", "\u0e4d\u0e32") not in haystack


def test_plump_real_has_the_real_shape():
    store = load_store(STORES / "plump-real")
    topics = [n for n in store.files if n != "MEMORY.md"]
    assert len(store.files) >= 12
    for name in topics:
        head = store.files[name].split("---\n")[1]
        assert head.startswith(f"name: {name[:-3]}\n") and "\ndescription: " in head and "\ntype: " in head
        assert f"]({name}) — " in store.files["MEMORY.md"]
    assert [n for n in topics if "\npinned: true\n" in store.files[n]] == ["runbook-ledger.md"]
    needles = [n.needle for n in store.expected.muscle]
    assert any(n.startswith("`C:\\src\\") for n in needles)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("prod: schema migrations do NOT run automatically on deploy", "staging: schema migrations run automatically"),
        ("prod runs dispatch-api v7.3.1 (2026-04-02)", "staging runs dispatch-api v7.4.0-rc.2 (2026-04-15)"),
        ("`LEDGER_DB_URL` is the writer", "`LEDGER_DB_RO_URL` is the read replica"),
        ("queue depth > 500 for 10 min → Slack", "queue depth > 2000 for 10 min → page"),
    ],
)
def test_plump_real_trap_twins_are_both_muscle(a, b):
    """A washer that merges a twin pair keeps one and loses the other: both must be muscle."""
    muscle = [n.needle for n in load_store(STORES / "plump-real").expected.muscle]
    assert any(a in n for n in muscle) and any(b in n for n in muscle)


def test_governed_store_has_a_governance_file_with_fat_in_it():
    store = load_store(STORES / "governed")
    assert "CLAUDE.md" in store.files
    assert sum(norm(f.needle) in norm(store.files["CLAUDE.md"]) for f in store.expected.fat) == 2


def test_superseded_scratch_delete_entails_its_index_line():
    store = load_store(STORES / "superseded")
    fat = {n.needle: n.cls for n in store.expected.fat}
    assert fat["[[scratch-2026-03]]"] == "done-point-in-time"
    assert "[[scratch-2026-03]]" in store.files["MEMORY.md"] and "scratch-2026-03.md" in store.files
    assert fat["treat it as the settled baseline for the foreseeable future"] == "superseded"


def test_near_wall_index_is_at_the_caliper_wall():
    data = (STORES / "near-wall" / "MEMORY.md").read_bytes()
    lines = data.decode("utf-8").split("\n")
    assert 200 <= len(lines) - 1 <= 210  # 206 newline-terminated lines
    assert len(data) < 25 * 1024


def test_near_wall_index_is_reproduced_by_its_generator():
    gen = STORES / "gen_near_wall.py"
    proc = subprocess.run([sys.executable, str(gen), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_digest_covers_every_file(tmp_path):
    import shutil

    copy = tmp_path / "lean"
    shutil.copytree(STORES / "lean", copy)
    before = load_store(copy).digest
    assert before == load_store(STORES / "lean").digest
    (copy / "expected.json").write_bytes((copy / "expected.json").read_bytes() + b"\n")
    assert load_store(copy).digest != before


# --- one broken rule per store ------------------------------------------------------------------


MEMORY = "# Memory\n\n- [[notes]] — the one topic file\n"
NOTES = "# Notes\n\n- Deploys need `make ship` and a green canary.\n- We might perhaps revisit this at some point.\n"


def _expected(**changes) -> dict:
    data = {
        "fixture": "tiny",
        "description": "a two-file store",
        "expectNoOp": False,
        "muscle": [
            {"id": "m01", "needle": "[[notes]]", "note": "index link"},
            {"id": "m02", "needle": "`make ship`", "note": "deploy command"},
        ],
        "fat": [{"id": "f01", "needle": "We might perhaps revisit this", "class": "hedging", "note": "hedge"}],
    }
    data.update(changes)
    return data


def _store(tmp_path: Path, expected: dict | str | None = None, **files: str) -> Path:
    folder = tmp_path / "tiny"
    folder.mkdir()
    for name, text in {"MEMORY.md": MEMORY, "notes.md": NOTES, **files}.items():
        if text is not None:
            (folder / name).write_text(text, encoding="utf-8")
    body = expected if isinstance(expected, str) else json.dumps(expected or _expected(), ensure_ascii=False)
    (folder / "expected.json").write_text(body, encoding="utf-8")
    return folder


def _fails(folder: Path, where: str, problem: str) -> None:
    with pytest.raises(FixtureError) as err:
        load_store(folder)
    assert str(err.value) == f"{folder / where}: {problem}"


def test_the_tiny_store_itself_is_valid(tmp_path):
    store = load_store(_store(tmp_path))
    assert list(store.files) == ["MEMORY.md", "notes.md"]


def test_missing_expected_json(tmp_path):
    folder = _store(tmp_path)
    (folder / "expected.json").unlink()
    _fails(folder, "expected.json", "missing: a scored store states its ground truth here (see docs/your-own-store.md)")


def test_invalid_json(tmp_path):
    _fails(_store(tmp_path, '{"fixture": "tiny",}'), "expected.json", "not valid JSON: Expecting property name "
           "enclosed in double quotes at line 1 column 20")  # fmt: skip


# What CoalWash's score.mjs reads is each entry's id and needle (and fixture, expectNoOp when
# given): a store it can score is accepted; what it cannot score is refused, naming the field.


def _bare() -> dict:
    """expected.json with nothing but what the scorer needs."""
    return {
        "muscle": [{"id": "m01", "needle": "[[notes]]"}, {"id": "m02", "needle": "`make ship`"}],
        "fat": [{"id": "f01", "needle": "We might perhaps revisit this"}],
    }


def test_a_store_with_only_ids_and_needles_loads(tmp_path):
    store = load_store(_store(tmp_path, _bare()))
    e = store.expected
    assert (e.fixture, e.description, e.expect_no_op) == ("tiny", "", False)  # the folder's name, as the scorer does
    assert [(n.id, n.note, n.cls) for n in e.fat] == [("f01", "", None)]


def test_a_store_with_only_ids_and_needles_is_washed_and_scored(tmp_path):
    folder = _store(tmp_path, _bare())
    scratch = tmp_path / "copy"
    washed = subprocess.run(
        [sys.executable, "-m", "washexp.cli", "wash", str(folder), "--operator", "benchmark", "--dry-run", "--json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert washed.returncode == 0, washed.stderr
    import shutil

    shutil.copytree(folder, scratch)
    scored = subprocess.run(
        [sys.executable, "-m", "washexp.cli", "score", str(folder), str(scratch), "--json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert scored.returncode == 0, scored.stderr
    data = json.loads(scored.stdout)
    assert data["fixture"] == "tiny" and data["muscle"]["kept"] == 2 and data["fat"]["removed"] == 0


def test_keys_the_scorer_ignores_are_ignored(tmp_path):
    data = _expected(version=2, expectNoOp="false")
    data["muscle"][1]["class"] = "duplicate"
    data["fat"][0]["note"] = 7
    e = load_store(_store(tmp_path, data)).expected
    assert e.expect_no_op is False and e.muscle[1].cls is None and e.fat[0].note == ""


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda d: d.pop("muscle"), "muscle: missing (the scorer reads each entry's id and needle from it)"),
        (lambda d: d["fat"][0].pop("needle"), "fat[0].needle: missing"),
        (lambda d: d["muscle"][0].pop("id"), "muscle[0].id: missing"),
        (lambda d: d["muscle"][0].update(needle=3), "muscle[0].needle: expected a string, got a number"),
        (lambda d: d.update(fat={}), "fat: expected a list, got an object"),
    ],
)
def test_what_the_scorer_cannot_score_is_refused(tmp_path, edit, problem):
    data = _bare()
    edit(data)
    _fails(_store(tmp_path, data), "expected.json", problem)


def test_id_of_the_wrong_form(tmp_path):
    data = _expected()
    data["fat"][0]["id"] = "m03"
    _fails(_store(tmp_path, data), "expected.json", "fat[0].id: 'm03' is not of the form f01, f02, ...")


def test_duplicate_id(tmp_path):
    data = _expected()
    data["muscle"][1]["id"] = "m01"
    _fails(_store(tmp_path, data), "expected.json", "muscle[1].id: 'm01' is used twice (first by muscle[0])")


def test_empty_needle(tmp_path):
    data = _expected()
    data["muscle"][0]["needle"] = " \u00a0\n"  # JS whitespace only
    _fails(
        _store(tmp_path, data),
        "expected.json",
        "muscle[0].needle: is empty (a needle needs a non-whitespace character)",
    )


def test_unknown_fat_class(tmp_path):
    data = _expected()
    data["fat"][0]["class"] = "near-duplicate"
    _fails(
        _store(tmp_path, data),
        "expected.json",
        "fat[0].class: unknown fat class 'near-duplicate'; did you mean 'duplicate' or 'near-dup'? (known: "
        "done-point-in-time, "
        "duplicate, hedging, near-dup, over-verbose, retired-key, superseded)",
    )


def test_no_op_store_with_fat(tmp_path):
    _fails(
        _store(tmp_path, _expected(expectNoOp=True)),
        "expected.json",
        "fat: expectNoOp is true, so the store plants no fat (found 1)",
    )


def test_md_file_not_utf8(tmp_path):
    folder = _store(tmp_path)
    (folder / "notes.md").write_bytes("# Notes\n- caf\u00e9\n".encode("latin-1"))
    _fails(folder, "notes.md", "not UTF-8 (byte 0xe9 at offset 13)")


def test_missing_index(tmp_path):
    folder = _store(tmp_path)
    (folder / "MEMORY.md").rename(folder / "memory-index.md")
    _fails(folder, "MEMORY.md", "missing: every store has a MEMORY.md index")


def test_needle_absent_from_the_store(tmp_path):
    data = _expected()
    data["muscle"][1]["needle"] = "`make  deploy`"
    _fails(
        _store(tmp_path, data),
        "expected.json",
        "muscle[1].needle: '`make  deploy`' is not in the store's .md files (whitespace-normalized)",
    )


def test_needle_found_only_in_a_non_md_file_is_absent(tmp_path):
    data = _expected()
    data["muscle"][1]["needle"] = "rollback plan"
    folder = _store(tmp_path, data)
    (folder / "notes.txt").write_text("rollback plan\n")
    (folder / "sub").mkdir()
    (folder / "sub" / "deep.md").write_text("rollback plan\n")
    _fails(
        folder,
        "expected.json",
        "muscle[1].needle: 'rollback plan' is not in the store's .md files (whitespace-normalized)",
    )


def test_needle_matches_across_whitespace_runs(tmp_path):
    """The scorer's rule: a line break inside the store equals the needle's single space."""
    data = _expected()
    data["muscle"][1]["needle"] = "a green\u3000canary"  # ideographic space is JS whitespace
    load_store(_store(tmp_path, data))


def test_needle_inside_another_needle(tmp_path):
    data = _expected()
    data["muscle"].append({"id": "m03", "needle": "need `make ship`", "note": "overlaps m02"})
    _fails(
        _store(tmp_path, data),
        "expected.json",
        "muscle[1].needle: '`make ship`' is a substring of m03's needle 'need `make ship`'",
    )


def test_fat_and_muscle_needles_on_one_line(tmp_path):
    notes = NOTES.replace("\n- We might", " We might")
    _fails(
        _store(tmp_path, **{"notes.md": notes}),
        "notes.md",
        "line 3: holds fat needle f01 and muscle needle m02, which is nowhere else in the store (cut one, lose both)",
    )


def test_fat_and_muscle_on_one_line_through_a_wrapped_needle(tmp_path):
    """A fat needle that wraps onto the muscle's line still shares that line."""
    notes = "# Notes\n\n- We might perhaps\nrevisit this: `make ship` stays.\n"
    _fails(
        _store(tmp_path, **{"notes.md": notes}),
        "notes.md",
        "line 4: holds fat needle f01 and muscle needle m02, which is nowhere else in the store (cut one, lose both)",
    )


# CoalWash's rule (its f05 keeps [[incidents]] beside the scratch file's fat opener, because the
# link "survives the scratch-file delete via glossary-rules.md / qa-linter.md"): a muscle needle
# on a fat line is refused only when no copy of it is on a line without fat.
ON_ONE_LINE = NOTES.replace("\n- We might", " We might")


def test_a_muscle_needle_on_a_fat_line_with_a_copy_in_another_file_is_accepted(tmp_path):
    store = load_store(_store(tmp_path, **{"notes.md": ON_ONE_LINE, "deploy.md": "# Deploy\n\n- `make ship`\n"}))
    assert "`make ship`" in store.files["deploy.md"] and "We might perhaps" in store.files["notes.md"]


def test_a_muscle_needle_on_a_fat_line_with_a_copy_on_another_line_is_accepted(tmp_path):
    load_store(_store(tmp_path, **{"notes.md": ON_ONE_LINE + "- Rollback: `make ship` the previous tag.\n"}))


def test_a_muscle_needle_whose_every_copy_shares_a_line_with_fat_is_refused(tmp_path):
    """Two copies, each beside fat: cutting the fat cuts both."""
    other = "# Deploy\n\n- `make ship`. We might perhaps revisit this too.\n"
    _fails(
        _store(tmp_path, **{"notes.md": ON_ONE_LINE, "deploy.md": other}),
        "deploy.md",
        "line 3: holds fat needle f01 and muscle needle m02, which is nowhere else in the store (cut one, lose both)",
    )


def test_not_a_folder(tmp_path):
    with pytest.raises(FixtureError, match=r"/nowhere: not a folder$"):
        load_store(tmp_path / "nowhere")


# --- selecting stores -----------------------------------------------------------------------------


def test_select_one_name_and_a_list():
    assert [s.name for s in load_stores(STORES, "lean")] == ["lean"]
    assert [s.name for s in load_stores(STORES, ["superseded", "lean"])] == ["superseded", "lean"]


def test_unknown_store_name_says_did_you_mean():
    with pytest.raises(ConfigError) as err:
        load_stores(STORES, "plump")
    assert str(err.value) == (
        f"{STORES}: unknown store 'plump'; did you mean 'plump-real'? (known: {', '.join(NAMES)})"
    )


@pytest.mark.parametrize("name", ["a\\b", "", "a\0b"])
def test_a_name_that_is_no_folder_name_is_refused(name):
    with pytest.raises(ConfigError, match="a bare folder name"):
        load_stores(STORES, name)


def test_a_store_by_absolute_and_relative_path_is_the_store_by_name():
    (by_name,) = load_stores(STORES, "lean")
    for entry, cwd in [(str(STORES / "lean"), "/"), ("fixtures/wash/lean", ROOT), ("./lean", STORES),
                       ("../lean/", STORES / "dup-heavy"), (".", STORES / "lean")]:  # fmt: skip
        (by_path,) = load_stores(STORES, entry, cwd=cwd)
        assert (by_path.name, by_path.digest, by_path.files) == (by_name.name, by_name.digest, by_name.files)
        assert by_path.path == STORES / "lean"


def test_a_name_and_a_path_in_one_list(tmp_path):
    import shutil

    shutil.copytree(STORES / "lean", tmp_path / "mine")
    (tmp_path / "mine" / "notes.md").write_text("- one more [[conventions]] line\n")
    stores = load_stores(STORES, ["superseded", "./mine"], cwd=tmp_path)
    assert [s.name for s in stores] == ["superseded", "mine"]


def test_a_path_that_is_no_folder_is_refused(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_stores(STORES, "nowhere/lean", cwd=tmp_path)
    assert str(err.value) == f"store 'nowhere/lean': no such folder ({tmp_path / 'nowhere' / 'lean'})"


def test_a_store_by_path_without_ground_truth_is_refused(tmp_path):
    import shutil

    shutil.copytree(STORES / "lean", tmp_path / "mine")
    (tmp_path / "mine" / "expected.json").unlink()
    with pytest.raises(FixtureError) as err:
        load_stores(STORES, str(tmp_path / "mine"))
    assert str(err.value) == (
        f"{tmp_path / 'mine' / 'expected.json'}: missing: a scored store states its ground truth here "
        "(see docs/your-own-store.md)"
    )


def test_two_stores_of_one_name_or_one_content_are_refused(tmp_path):
    import shutil

    shutil.copytree(STORES / "lean", tmp_path / "lean")
    (tmp_path / "lean" / "extra.md").write_text("# Extra\n")
    with pytest.raises(ConfigError, match=r"are both named 'lean' \(runs and records name a store by its folder name"):
        load_stores(STORES, ["lean", str(tmp_path / "lean")])
    shutil.copytree(STORES / "lean", tmp_path / "copy")
    with pytest.raises(ConfigError, match=r"are the same store \(same content\)$"):
        load_stores(STORES, ["lean", str(tmp_path / "copy")])


def test_a_store_named_twice_is_refused():
    with pytest.raises(ConfigError, match="a store is named twice"):
        load_stores(STORES, ["lean", "lean"])
    with pytest.raises(ConfigError, match="a store is named twice"):
        load_stores(STORES, ["lean", str(STORES / "lean")])
