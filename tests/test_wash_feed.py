"""The growth feed: every N materialises into a valid store, byte-identically, the supersede step
relabels, the re-appended notes push mechanical fat over the gauge's 500 again and again, and the
``washexp feed`` command keeps its exit codes."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from washexp.errors import ConfigError, FixtureError
from washexp.tokens import caliper_estimate
from washexp.wash.coalwash.files import read_md
from washexp.wash.store.feed import apply_session, expected_after, load_feed, main, materialise
from washexp.wash.store.stores import FAT_CLASSES, load_store

ROOT = Path(__file__).resolve().parent.parent
FEED = ROOT / "fixtures" / "wash-feed" / "dispatch-team"
ALWAYS_LOADED = ("MEMORY.md", "CLAUDE.md")
ARM_AT, DISARM_BELOW = 500, 200  # CoalWash 1.0's gauge: arm at >= 500 mechanical-fat tokens
_JS_WS = "[\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]+"
_JS_TRIM = re.compile(f"^{_JS_WS}|{_JS_WS}$")  # String.prototype.trim strips the JS \\s class


@pytest.fixture(scope="module")
def feed():
    return load_feed(FEED)


def mech_fat(text: str) -> int:
    """CoalWash 1.0's ``mechFatFromText`` for one file, re-derived here (the real caliper is not ours):
    each repeat of an identical trimmed line of >= 24 UTF-16 units costs ``caliper_estimate`` of the
    untrimmed line; each blank line beyond two in a row costs 1."""
    seen: set[str] = set()
    fat = blanks = 0
    for line in text.split("\n"):
        trimmed = _JS_TRIM.sub("", line)
        if not trimmed:
            blanks += 1
            fat += blanks > 2
            continue
        blanks = 0
        if len(trimmed.encode("utf-16-le")) // 2 >= 24:
            if trimmed in seen:
                fat += caliper_estimate(line)
            seen.add(trimmed)
    return fat


def store_mech_fat(store: Path) -> int:
    return sum(mech_fat((store / n).read_text(encoding="utf-8")) for n in ALWAYS_LOADED if (store / n).is_file())


def dedupe(store: Path) -> None:
    """What a washer's quick tier does when the gauge fires: drop later copies of identical lines."""
    for name in ALWAYS_LOADED:
        path = store / name
        if path.is_file():
            seen: set[str] = set()
            keep = []
            for line in path.read_text(encoding="utf-8").split("\n"):
                trimmed = line.strip()
                if len(trimmed) >= 24 and trimmed in seen:
                    continue
                seen.add(trimmed)
                keep.append(line)
            path.write_text("\n".join(keep), encoding="utf-8")


def tree_bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_mech_fat_rule_itself():
    line = "- a note long enough to count, well past 24"
    indented = " " * 8 + line  # same trimmed line, priced untrimmed: 2 tokens dearer
    assert mech_fat(f"{line}\n{line}\n{indented}\n") == caliper_estimate(line) + caliper_estimate(indented)
    assert caliper_estimate(indented) == caliper_estimate(line) + 2
    assert mech_fat("short line\nshort line\n") == 0  # under 24 characters: never fat
    assert mech_fat("a\n\n\n\n\nb\n") == 2  # four blanks in a row: two beyond the allowed two


def test_feed_has_24_sessions_and_every_fat_class(feed):
    assert len(feed.sessions) >= 24
    classes = {n["class"] for n in expected_after(feed, len(feed.sessions))["fat"]}
    assert classes == set(FAT_CLASSES)


def test_every_n_materialises_into_a_valid_store(feed, tmp_path):
    for n in range(len(feed.sessions) + 1):
        out = materialise(feed, n, tmp_path / f"n{n:02d}")
        store = load_store(out)
        assert json.loads((out / "expected.json").read_text(encoding="utf-8")) == expected_after(feed, n)
        assert store.expected.fixture == f"dispatch-team-s{n:02d}"


def test_materialise_is_byte_for_byte_reproducible(tmp_path):
    a = materialise(FEED, 17, tmp_path / "a")
    b = materialise(FEED, 17, tmp_path / "b")
    assert tree_bytes(a) == tree_bytes(b)


def test_n_zero_is_the_start_store(tmp_path):
    out = materialise(FEED, 0, tmp_path / "zero")
    assert read_md(out) == read_md(FEED / "start")


def test_apply_session_onto_n_minus_one_equals_n(feed, tmp_path):
    a = materialise(feed, 9, tmp_path / "a")
    apply_session(feed, 10, a)
    b = materialise(feed, 10, tmp_path / "b")
    assert read_md(a) == read_md(b)


def test_new_file_brings_its_index_line(feed, tmp_path):
    out = materialise(feed, 3, tmp_path / "s3")
    assert (out / "incident-3351.md").is_file()
    assert "- [[incident-3351]] — payouts delayed" in (out / "MEMORY.md").read_text(encoding="utf-8")


def test_supersede_relabels_the_old_muscle_as_fat(feed):
    before, after = expected_after(feed, 9), expected_after(feed, 10)
    train = "the release train leaves Tuesdays 15:00 UTC"
    assert [m["id"] for m in before["muscle"] if m["needle"] == train] == ["m08"]
    assert not [m for m in after["muscle"] if m["needle"] == train]
    assert [(f["id"], f["class"]) for f in after["fat"] if f["needle"] == train] == [("f11", "superseded")]
    assert any(m["needle"].startswith("the release train leaves Thursdays") for m in after["muscle"])


def test_washed_store_gets_the_session_appended(feed, tmp_path):
    """A washer may delete a whole file; the next session's append recreates it with the chunk alone."""
    store = materialise(feed, 8, tmp_path / "armA")
    (store / "scratch-2026-05.md").unlink()
    for k in range(9, 25):
        apply_session(feed, k, store)
    assert (store / "scratch-2026-05.md").read_text(encoding="utf-8").startswith("- closed out the load-test")


def test_append_starts_on_a_fresh_line_when_a_washer_dropped_the_final_newline(feed, tmp_path):
    store = materialise(feed, 1, tmp_path / "w")
    path = store / "decisions.md"
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    apply_session(feed, 2, store)
    assert "<consumer>`) first.\n- 2026-05-05: offers expire" in path.read_text(encoding="utf-8")


def test_mechanical_fat_recrosses_the_gauge(feed, tmp_path):
    """Arm A dedupes when mechanical fat reaches 500; the feed must make it fire at least twice,
    each session adding about 100 estimated tokens of verbatim repeats to MEMORY.md."""
    arm_a, arm_b = materialise(feed, 0, tmp_path / "A"), materialise(feed, 0, tmp_path / "B")
    assert store_mech_fat(arm_a) == 0
    crossings, increments, b_fat = [], [], []
    for k in range(1, len(feed.sessions) + 1):
        before = store_mech_fat(arm_a)
        apply_session(feed, k, arm_a)
        apply_session(feed, k, arm_b)
        increments.append(store_mech_fat(arm_a) - before)
        b_fat.append(store_mech_fat(arm_b))
        if store_mech_fat(arm_a) >= ARM_AT:
            crossings.append(k)
            dedupe(arm_a)
            assert store_mech_fat(arm_a) <= DISARM_BELOW
    assert len(crossings) >= 2, crossings
    assert all(80 <= inc <= 120 for inc in increments), increments
    assert b_fat == sorted(b_fat) and b_fat[-1] > 2000  # the bloat arm never sheds a token


@pytest.mark.parametrize("n", [-1, 25, True])
def test_n_out_of_range_is_a_config_error(feed, tmp_path, n):
    with pytest.raises(ConfigError, match=r"feed 'dispatch-team' has sessions 0\.\.24"):
        materialise(feed, n, tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_materialise_refuses_a_non_empty_folder(tmp_path):
    out = tmp_path / "taken"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(ConfigError, match="exists and is not an empty folder"):
        materialise(FEED, 2, out)
    assert [p.name for p in out.iterdir()] == ["keep.txt"]


# --- load_feed: one broken rule per case, the exact one-line message --------------------------------


def _copy_feed(tmp_path: Path) -> Path:
    dst = tmp_path / "dispatch-team"
    shutil.copytree(FEED, dst)
    return dst


def _edit_sessions(feed_dir: Path, old: str, new: str) -> Path:
    path = feed_dir / "sessions.yaml"
    text = path.read_text(encoding="utf-8")
    assert text.count(old) >= 1, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


CASES = [
    (
        "unknown key",
        "    note: hotfix release for the double-accept race\n",
        "    note: hotfix release for the double-accept race\n    mood: tired\n",
        "sessions[0].mood: unknown key (allowed: id, note, chunks, supersede)",
    ),
    (
        "bad label",
        "        label: muscle\n        text: |\n          - dispatch-api v8.0.3",
        "        label: gristle\n        text: |\n          - dispatch-api v8.0.3",
        "s01.chunks[0].label: 'gristle': expected muscle or fat",
    ),
    (
        "bad class",
        "        class: hedging\n",
        "        class: hedgeing\n",
        "s02.chunks[1].class: unknown fat class 'hedgeing'; did you mean 'hedging'? (known: done-point-in-time, "
        "duplicate, hedging, near-dup, over-verbose, retired-key, superseded)",
    ),
    (
        "needle not in its own chunk",
        'needle: "offers expire after 45 s server-side"',
        'needle: "offers expire after 30 s server-side"',
        "s02.chunks[0].needles[0].needle: 'offers expire after 30 s server-side' is not in the chunk's own text",
    ),
    (
        "append to a missing file",
        "      - file: oncall.md\n        label: muscle\n        text: |\n          - `DISPATCH_PG_POOL_MAX=40`",
        "      - file: on-call.md\n        label: muscle\n        text: |\n          - `DISPATCH_PG_POOL_MAX=40`",
        "s03.chunks[1].file: 'on-call.md' does not exist yet (append) — add new: true and an index line",
    ),
    (
        "duplicate id",
        "{id: m13,",
        "{id: m12,",
        "s02.chunks[0].needles[0].id: 'm12' is already used by the start store or an earlier chunk",
    ),
    (
        "session out of order",
        "  - id: s02\n",
        "  - id: s03\n",
        "sessions[1].id: 's03': session 2 is 's02'",
    ),
    (
        "supersede of a muscle id that is not live",
        "{muscle: m16, as: f14,",
        "{muscle: m08, as: f14,",
        "s14.supersede[0].muscle: 'm08' is not a live muscle needle at this session",
    ),
    (
        "empty needles on a chunk that is not a verbatim repeat",
        '        needles:\n          - {id: m13, needle: "offers expire after 45 s server-side", note: decision}\n',
        "        needles: []\n",
        "s02.chunks[0].needles: empty: only a verbatim repeat (class duplicate, every line already in the file) "
        "has none",
    ),
]


@pytest.mark.parametrize(("old", "new", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_load_feed_names_the_first_problem(tmp_path, old, new, message):
    feed_dir = _copy_feed(tmp_path)
    path = _edit_sessions(feed_dir, old, new)
    with pytest.raises(FixtureError) as err:
        load_feed(feed_dir)
    assert str(err.value) == f"{path}: {message}"


def test_load_feed_checks_the_store_after_each_session(tmp_path):
    """A chunk whose only copy of a muscle needle shares a line with a fat needle breaks the store
    rules at that session."""
    feed_dir = _copy_feed(tmp_path)
    path = _edit_sessions(
        feed_dir,
        "- 2026-05-05: offers expire after 45 s server-side; the client timer is display only.",
        "- 2026-05-05: offers expire after 45 s server-side, if anyone feels strongly, though nobody seems to.",
    )
    with pytest.raises(FixtureError) as err:
        load_feed(feed_dir)
    assert str(err.value) == (
        f"{path}: s02: the store after this session breaks a store rule: "
        "decisions.md: line 5: holds fat needle f03 and muscle needle m13, which is nowhere else in the store "
        "(cut one, lose both)"
    )


def test_load_feed_rejects_a_broken_start_store(tmp_path):
    feed_dir = _copy_feed(tmp_path)
    (feed_dir / "start" / "oncall.md").write_bytes(b"# On-call\n\xff\n")
    with pytest.raises(FixtureError, match=r"start/oncall\.md: not UTF-8 \(byte 0xff at offset 10\)$"):
        load_feed(feed_dir)


# --- the command line ------------------------------------------------------------------------------


def test_cli_writes_the_store(tmp_path, capsys):
    out = tmp_path / "s12"
    assert main([str(FEED), "--sessions", "12", "--out", str(out)]) == 0
    assert load_store(out).expected.fixture == "dispatch-team-s12"
    assert "dispatch-team after 12 of 24 sessions" in capsys.readouterr().out


def test_cli_resolves_a_bare_name_from_the_project(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT / "fixtures")
    assert main(["dispatch-team", "--sessions", "1", "--out", str(tmp_path / "one")]) == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["dispatch-tem", "--sessions", "1"], "unknown feed 'dispatch-tem'; did you mean 'dispatch-team'?"),
        ([str(FEED), "--sessions", "25"], "--sessions 25: feed 'dispatch-team' has sessions 0..24"),
        ([str(FEED), "--sessions", "x"], "argument --sessions: invalid int value: 'x'"),
        ([str(FEED)], "the following arguments are required: --sessions"),
        (["./no/such/feed", "--sessions", "1"], f"feed './no/such/feed': no such folder ({ROOT}/no/such/feed)"),
    ],
)
def test_cli_usage_errors_exit_2_with_one_line(tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.chdir(ROOT)
    out = tmp_path / "out"
    if "--out" not in args and args != [str(FEED)]:
        args = [*args, "--out", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not out.exists()


def test_cli_refuses_a_non_empty_out_dir(tmp_path, capsys):
    out = tmp_path / "busy"
    out.mkdir()
    (out / "notes.md").write_text("mine\n")
    assert main([str(FEED), "--sessions", "3", "--out", str(out)]) == 2
    assert "exists and is not an empty folder" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["notes.md"]


def test_washexp_feed_subcommand_end_to_end(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "washexp.cli", "feed", str(FEED), "--sessions", "24", "--out", str(tmp_path / "all")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    assert load_store(tmp_path / "all").expected.fixture == "dispatch-team-s24"
