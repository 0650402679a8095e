"""Measurement 3, sawtooth vs bloat: two arms from the same start over the feed's sessions.

Each session appends the feed's chunks to the arm's store. Arm A then asks the gauge and washes
exactly when it fires (its own cadence, no operator override); arm B never washes. After each
session the arm's always-loaded size (index + governance files, the caliper's estimate) is what
the next session pays. An arm's total is the sum over sessions; A's total also carries each
wash's own token cost (the receipt's, 0 for a rule-based washer): a saving that ignores its own
spend is a fraud.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from washexp.errors import WashexpError
from washexp.wash.coalwash import caliper, gauge
from washexp.wash.coalwash.files import read_md
from washexp.wash.coalwash.score import score_texts
from washexp.wash.measure.rounds import store_sha256
from washexp.wash.store.feed import Feed, apply_session, expected_after, materialise


@dataclass
class Session:
    session: int
    always_loaded: int
    band: str
    fired: bool
    applied: int = 0
    cost_tokens: int = 0
    calls: dict[str, int] = field(default_factory=dict)
    """The wash's model calls per seat."""
    failed: str | None = None
    sha256: str = ""


@dataclass
class Arm:
    name: str
    sessions: list[Session] = field(default_factory=list)
    final_score: dict[str, Any] | None = None

    @property
    def total(self) -> int:
        return sum(s.always_loaded for s in self.sessions)

    @property
    def cost(self) -> int:
        return sum(s.cost_tokens for s in self.sessions)


def run_arm(feed: Feed, sessions: int, work: Path, the_gauge, wash, washes: bool) -> Arm:
    """One arm over sessions 1..N on a store materialised at session 0 in ``work``."""
    store = materialise(feed, 0, work / "store")
    (store / "expected.json").unlink()  # the washer never sees ground truth
    arm = Arm("A" if washes else "B")
    for k in range(1, sessions + 1):
        apply_session(feed, k, store)
        verdict = the_gauge.verdict(caliper.measure(store), gauge.load_state(store))
        gauge.save_state(store, verdict.state)
        row = Session(k, 0, verdict.band, verdict.fires)
        if washes and verdict.fires:
            try:
                receipt = wash(store)
                row.applied, row.cost_tokens, row.calls = receipt.applied, receipt.cost_tokens, dict(receipt.calls)
            except WashexpError as err:
                row.failed = str(err)
        row.always_loaded = caliper.measure(store).always_loaded_tokens_est
        row.sha256 = store_sha256(read_md(store))
        arm.sessions.append(row)
    expected = expected_after(feed, sessions)
    reference: dict[str, str] = {}  # no pristine store to compare with: the no-op line is informational only
    arm.final_score = score_texts(expected, reference, read_md(store), expected["fixture"], round=sessions)
    return arm


def arm_artifacts(arm: Arm) -> dict[str, str]:
    rows = [asdict(s) for s in arm.sessions]
    return {
        "sessions.json": json.dumps(rows, indent=1) + "\n",
        "final-score.json": json.dumps(arm.final_score, indent=2, ensure_ascii=False) + "\n",
    }
