"""Controlled recall's census and its JSON (``washexp.wash.coalwash.recall``): fast unit tests."""

from __future__ import annotations

from washexp.wash.coalwash.recall import census, recall_of


def test_values_on_neighbouring_lines_are_each_counted_once():
    c = census({"a.md": "12\n34\n", "b.md": "34\n"})
    assert c.counts["numbers"] == {"12": 1, "34": 1}  # the duplicate line in b.md is one statement
    assert c.values["numbers"] == ("12", "34")


def test_a_file_whose_frontmatter_cannot_be_read_is_named():
    c = census({"a.md": "---\ntitle: x\n", "b.md": "---\ntags: y\n---\nbody\n"})
    assert c.unreadable_frontmatter == ("a.md",)
    assert c.counts["frontmatter"] == {"tags": 1}
    assert census({"b.md": "---\ntags: y\n---\n"}).unreadable_frontmatter == ()


def test_the_json_names_each_class_and_the_values_lost():
    r = recall_of({"a.md": "v1.2.3 and 2026-05-12\n"}, {"a.md": "v1.2.3\n"})
    d = r.to_dict()
    assert (d["total"], d["kept"], d["recall_pct"]) == (2, 1, 50.0)
    assert d["by_class"]["dates"] == {"total": 1, "kept": 0, "recall_pct": 0.0, "lost": {"2026-05-12": 1}}
    assert d["by_class"]["versions"] == {"total": 1, "kept": 1, "recall_pct": 100.0, "lost": {}}
    assert d["by_class"]["quotes"] == {"total": 0, "kept": 0, "recall_pct": None, "lost": {}}
    assert list(d) == ["total", "kept", "recall_pct", "by_class"]
