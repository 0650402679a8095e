"""``washexp runs``' overrides column: the values each key took over a sweep's arms. Trap guarded:
a list value (``task=[backup,refactor]``) was split at its own commas and its pieces glued to
another key (``model=openai,refactor]``)."""

from __future__ import annotations

from washexp.listing import merged_overrides


def test_a_list_value_stays_whole_and_with_its_key():
    arms = [
        "compaction.task=[backup,refactor],compaction.topn=0,model.name=q,model=openai",
        "compaction.task=[backup,refactor],compaction.topn=1,model.name=q,model=openai",
    ]
    assert merged_overrides(arms) == "compaction.task=[backup,refactor] compaction.topn=0,1 model.name=q model=openai"


def test_values_merge_per_key_in_order_and_escapes_stay():
    assert merged_overrides(["method=S,topn=0", "method=H,topn=0"]) == "method=S,H topn=0"
    assert merged_overrides(["store=[a],x=1", "store=[b,c],x=1"]) == "store=[a],[b,c] x=1"
    assert (
        merged_overrides([r"endpoint.base_url=http\://h\:1/v1,method=S"])
        == r"endpoint.base_url=http\://h\:1/v1 method=S"
    )
    assert merged_overrides(["(defaults)"]) == "(defaults)"


def test_the_header_lines_up_with_its_columns():
    """The trap: the status column is as wide as its text ("2 FAILED 4 FINISHED"), and a sweep id
    can pass 34 characters, so the columns after it left their header behind."""
    from datetime import datetime

    from washexp.listing import SweepRow, render

    when = datetime(2026, 12, 6, 4, 30)
    rows = [
        SweepRow(
            "multirun/2026-12-06/04-30-00-and-a-long-tail", "compaction", when, 12, 168, {"FINISHED": 180}, "a=1", {}
        ),
        SweepRow("outputs/x", "wash", when, 3, 23, {"FAILED": 2, "FINISHED": 24}, "benchmark=wash", {"outputs/y": 2}),
    ]
    header, *lines = render(rows)
    for name in ("experiment", "started (UTC)", "status", "overrides"):  # left-aligned: each starts where its name does
        at = header.index(name)
        assert all(line[at - 2 : at] == "  " and line[at] != " " for line in lines), (name, header, lines)
    for name in ("arms", "under"):  # numbers: each ends where its name does
        end = header.index(name) + len(name)
        assert all(line[end - 1].isdigit() and line[end : end + 2] == "  " for line in lines), (name, header, lines)
    assert [line.split("  ")[0] for line in lines] == [r.sweep for r in rows]
