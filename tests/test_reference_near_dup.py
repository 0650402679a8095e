"""The reference washer's near-duplicate pass is near-linear and finds what all pairs find.

The trap (issue 23): the pass compared each unit with every earlier unit sharing any shingle, so
a boilerplate opening made it quadratic (0.25 / 0.5 / 1 MB topic file: 8 / 35 / 136 s). The pass
now probes only each unit's rarest shingles (prefix filtering); :func:`all_pairs` is the same
loop probing every shingle, the old pass, as the oracle: on every committed store and on random
stores (many near-copies, pinned files, every shingle size and threshold) the washer's edits are
the same.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import washexp.wash.washers.reference as reference
from tests.conftest import ROOT
from washexp.wash.coalwash.files import read_md
from washexp.wash.washers.reference import Edit, ReferenceWasher, near_dup_edits


def all_pairs(docs, free, shingle_words: int, threshold: float) -> list[Edit]:
    """The pass as it was: every earlier surviving unit sharing any shingle is a candidate."""
    return near_dup_edits(docs, free, shingle_words, threshold, all_pairs=True)


def both(files: dict[str, str], washer: ReferenceWasher, monkeypatch) -> tuple[list, list]:
    def rows(edits):
        return [(e.file, e.lo, e.hi, e.cls, e.reason, e.op, e.text) for e in edits]

    now = rows(washer.edits(files)[0])
    with monkeypatch.context() as m:
        m.setattr(reference, "near_dup_edits", all_pairs)
        before = rows(washer.edits(files)[0])
    return now, before


STORES = sorted(p.parent for p in (ROOT / "fixtures").glob("wash*/**/MEMORY.md"))


@pytest.mark.parametrize("store", STORES, ids=[str(p.relative_to(ROOT / "fixtures")) for p in STORES])
@pytest.mark.parametrize(("k", "t"), [(4, 0.5), (1, 0.3), (2, 0.7), (3, 1.0), (4, 0.1)])
def test_the_committed_stores_get_the_same_edits(store: Path, k: int, t: float, monkeypatch):
    now, before = both(read_md(store), ReferenceWasher(shingle_words=k, near_dup_jaccard=t), monkeypatch)
    assert now == before
    if (k, t) == (4, 0.5) and store.name == "near-wall":
        assert any(row[3] == "duplicate" for row in now)  # the comparison saw near-dup cuts


VOCAB = ["deploy", "canary", "queue", "the", "of", "v1.2", "[[ops]]", "retry", "db", "a", "x-7", "Done"]
line = st.lists(st.sampled_from(VOCAB), min_size=1, max_size=9).map(" ".join)
unit = st.one_of(line.map(lambda s: f"- {s}"), line, st.just(""), line.map(lambda s: f"## {s}"))


@st.composite
def store(draw):
    """Up to four files of short units over a tiny vocabulary (near-copies everywhere), one of
    them maybe pinned."""
    files = {}
    for n in range(draw(st.integers(1, 4))):
        units = draw(st.lists(unit, max_size=25))
        units += [units[i] for i in draw(st.lists(st.integers(0, max(len(units) - 1, 0)), max_size=8)) if units]
        head = "---\npinned: true\n---\n" if draw(st.booleans()) and n == 0 else ""
        files[f"n{n}.md"] = head + "\n".join(units) + "\n"
    return files


@settings(max_examples=300, deadline=None)
@given(files=store(), k=st.integers(1, 4), t=st.sampled_from([0.1, 0.25, 1 / 3, 0.5, 0.6, 2 / 3, 0.7, 0.9, 1.0]))
def test_random_stores_get_the_same_edits(files, k, t):
    washer = ReferenceWasher(shingle_words=k, near_dup_jaccard=t)
    now = [(e.file, e.lo, e.hi, e.reason) for e in washer.edits(files)[0]]
    saved = reference.near_dup_edits
    reference.near_dup_edits = all_pairs
    try:
        before = [(e.file, e.lo, e.hi, e.reason) for e in washer.edits(files)[0]]
    finally:
        reference.near_dup_edits = saved
    assert now == before


class _Name(str):
    """A file name that counts the comparisons made with it (a scan of every edit per file)."""

    compared = 0

    def __eq__(self, other):
        _Name.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_the_washer_never_scans_every_edit_once_per_file():
    """A 1 MB store of many notes (issue 37: 45-116 s at the full tier): each rule took each file's
    edits by scanning all edits, files x edits comparisons of a file name. Counted, not timed:
    with 400 files of duplicate notes the names are compared a dozen times per file, not once per edit per file."""
    note = "- the depot list refreshes nightly at 01:15 UTC from the bucket, owner ops-data\n"
    files = {_Name(f"topic-{i:04d}.md"): f"# Topic {i}\n\n{note}{note}- a note of its own {i}\n" for i in range(400)}
    files[_Name("MEMORY.md")] = "# Memory\n\n" + "".join(f"- [[topic-{i:04d}]]\n" for i in range(400))
    _Name.compared = 0
    edits, _ = ReferenceWasher().edits(files)
    assert len(edits) >= 400  # a duplicate note in every topic file
    assert _Name.compared <= 20 * len(files), _Name.compared  # 965,997 when it scanned
