"""The human gate's operator policies: what each approves and refuses, and why (one line each)."""

from __future__ import annotations

import io

import pytest

from washexp.errors import ConfigError
from washexp.wash.coalwash.operators import (
    OPERATORS,
    ApproveAll,
    ApproveNone,
    Benchmark,
    Delete,
    Interactive,
    Review,
    make_operator,
)

# The superseded store's shape: a scratch file that holds a copy of the [[migration-log]] link
# (muscle, also in the index), a migration entry that holds the only copy of two lessons, and a
# done entry that is fat only.
SCRATCH = (
    "# Scratch — March 2026 cutover\n\n"
    "- watched replica lag during the switch, it stayed under a second\n"
    "- copied the lock lesson to [[migration-log]]; the rest can go\n"
)
LESSON = "- 2026-01-22, migration 38: always take an advisory lock before backfilling `entries`; 112 rows.\n"
DONE = "- 2026-02-14: the team sync about migration 39 happened as planned and is noted here.\n"
INDEX_AFTER = "# Memory — ledger\n\n- [[versions]] — the live build\n- [[migration-log]] — lessons per migration\n"
MUSCLE = (
    ("m03", "always take an advisory lock before backfilling `entries`"),
    ("m09", "[[versions]]"),
    ("m10", "[[migration-log]]"),
)


def review(after: str | None = INDEX_AFTER, drops: tuple[str, ...] = ()) -> Review:
    deletes = (
        Delete(0, "scratch-2026-03.md", SCRATCH, "done scratch"),
        Delete(2, "migration-log.md", LESSON, "old"),
        Delete(3, "migration-log.md", DONE, "done point-in-time"),
    )
    return Review(deletes, drops, after)


def test_approve_all_approves_every_delete_and_every_drop_shown():
    d = ApproveAll().review(review(drops=("wikilink-drop:scratch-2026-03",)))
    assert d.approved == {0, 2, 3}
    assert d.approved_drops == {"wikilink-drop:scratch-2026-03"}
    assert d.refused == ()


def test_approve_none_refuses_every_delete_with_a_reason_and_no_drop():
    d = ApproveNone().review(review(drops=("wikilink-drop:scratch-2026-03",)))
    assert d.approved == frozenset() and d.approved_drops == frozenset()
    assert [i for i, _ in d.refused] == [0, 2, 3]
    assert all(why == "the operator approves no delete" for _, why in d.refused)


def test_benchmark_refuses_a_cut_that_costs_a_muscle_needle_and_names_it():
    # the plan's after-text lacks the lesson: the delete holding its only copy is refused
    d = Benchmark(MUSCLE).review(review())
    assert dict(d.refused) == {2: "holds muscle m03"}
    assert d.approved == {0, 3}  # the fat-only delete and the scratch file go


def test_benchmark_approves_a_delete_whose_needle_copy_survives_elsewhere():
    # the scratch file holds "[[migration-log]]" (m10), but the index keeps it after the plan
    d = Benchmark(MUSCLE).review(review())
    assert 0 in d.approved
    assert "m10" not in " ".join(why for _, why in d.refused)


def test_benchmark_without_the_after_text_treats_every_needle_in_a_cut_as_lost():
    d = Benchmark(MUSCLE).review(review(after=None))
    assert dict(d.refused) == {0: "holds muscle m10", 2: "holds muscle m03"}
    assert d.approved == {3}


def test_benchmark_refuses_a_drop_that_is_part_of_a_lost_needle_only():
    drops = ("wikilink-drop:scratch-2026-03", "wikilink-drop:migration-log", "wikilink-drop:versions")
    after_without_versions = "# Memory\n\n- [[migration-log]] — lessons\n"
    d = Benchmark(MUSCLE).review(review(after=after_without_versions, drops=drops))
    # scratch-2026-03 is no muscle; migration-log survives (an occurrence drop); versions is lost
    assert d.approved_drops == {"wikilink-drop:scratch-2026-03", "wikilink-drop:migration-log"}


def test_benchmark_matches_needles_with_the_scorers_whitespace_rule():
    wrapped = Delete(0, "a.md", "- always take an advisory\n  lock before backfilling `entries`\n", "r")
    d = Benchmark(MUSCLE).review(Review((wrapped,), (), ""))
    assert dict(d.refused) == {0: "holds muscle m03"}


def test_interactive_asks_per_delete_and_per_drop_and_records_refusals():
    answers = iter(["y", "n", " YES ", "y"])
    prompts: list[str] = []

    def ask(prompt: str) -> str:
        prompts.append(prompt)
        return next(answers)

    d = Interactive(ask).review(review(drops=("wikilink-drop:scratch-2026-03",)))
    assert d.approved == {0, 3}
    assert d.refused == ((2, "refused at the terminal"),)
    assert d.approved_drops == {"wikilink-drop:scratch-2026-03"}
    assert "delete from scratch-2026-03.md (done scratch)" in prompts[0] and "[[migration-log]]" in prompts[0]
    assert prompts[3] == "drop wikilink-drop:scratch-2026-03? [y/N] "


def test_interactive_default_answer_is_no_and_long_text_is_cut():
    long = Delete(0, "big.md", "x" * 2000, "over-verbose")
    prompts: list[str] = []
    d = Interactive(lambda p: prompts.append(p) or "").review(Review((long,), ("number-drop:42",)))
    assert d.approved == frozenset() and d.approved_drops == frozenset()
    assert "x" * 600 + " ..." in prompts[0] and "x" * 601 not in prompts[0]


def test_interactive_without_a_terminal_is_one_line(monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    with pytest.raises(ConfigError) as err:
        make_operator("interactive").review(review())
    assert "\n" not in str(err.value) and "terminal" in str(err.value)


def test_make_operator_names_and_errors():
    assert [make_operator(n, MUSCLE).name for n in OPERATORS] == list(OPERATORS)
    with pytest.raises(ConfigError, match="expected.json"):
        make_operator("benchmark")
    with pytest.raises(ConfigError) as err:
        make_operator("aprove-all")
    assert "did you mean 'approve-all'" in str(err.value) and "\n" not in str(err.value)
