"""Every committed record with a bundle, in ``results/`` and its subfolders, is what its bundle
rebuilds (``washexp verify``'s check), so a change to a record builder that moves a committed
value, even in its last digit, fails here rather than in a reader's verify."""

from __future__ import annotations

from pathlib import Path

import pytest

from washexp.verify import load_record, verify

pytestmark = pytest.mark.slow  # every committed bundle rebuilt: about 2.5 min on one core

RESULTS = Path(__file__).resolve().parents[1] / "results"
RECORDS = sorted(bundle.with_suffix(".json") for bundle in RESULTS.rglob("*.bundle"))


def test_the_committed_records_with_a_bundle_are_found():
    assert RECORDS, f"no record with a bundle under {RESULTS}"
    assert any(r.parent != RESULTS for r in RECORDS), "the records in subfolders (gen40s, gen200) are found too"


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.relative_to(RESULTS).as_posix())
def test_a_committed_record_is_what_its_bundle_rebuilds(record):
    path, found = load_record(str(record))
    assert verify(path, found, None) is None
