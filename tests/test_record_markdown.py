"""A wide table's markdown: a column with no value in any row is left out and named under the
table, and the JSON keeps it (issue 50: a reviewer's table must fit a page)."""

from __future__ import annotations

import json

from washexp.export.records import Column, Record, Table


def _record(rows: tuple[dict, ...]) -> Record:
    columns = (Column("arm", "arm"), Column("retention", "retention"), Column("fact_accuracy", "fact accuracy"))
    table = Table("arms", "Arms", columns, rows)
    return Record("compaction", "reference", "2026-12-06", "t", {}, (), (table,))


def test_a_column_na_in_every_row_is_left_out_of_the_markdown_and_named():
    record = _record(
        (
            {"arm": "S top0", "retention": 0.2, "fact_accuracy": None},
            {"arm": "H top0", "retention": 0.3, "fact_accuracy": float("nan")},
        )
    )
    md = record.to_markdown()
    assert "| arm | retention |" in md and "| S top0 | 0.200 |" in md and "fact accuracy |" not in md
    assert "Not shown, n/a in every row (the .json keeps them): fact accuracy." in md
    rows = json.loads(record.to_json())["tables"]["arms"]["rows"]
    assert all("fact_accuracy" in row for row in rows)


def test_a_column_with_one_value_stays():
    md = _record(
        (
            {"arm": "S top0", "retention": None, "fact_accuracy": None},
            {"arm": "H top0", "retention": 0.3, "fact_accuracy": None},
        )
    ).to_markdown()
    assert "| arm | retention |" in md and "| S top0 | n/a |" in md
    assert md.count("Not shown") == 1
