"""Rounds of a wash on a scratch copy of one store, scored after every round.

Each round runs the whole pipeline (``pipeline.wash``) and then the scorer on the store as it now
is (``score.score_texts`` against the pristine store and its ``expected.json``). A round is
labelled by the fat left when it starts: ``has-fat`` while any planted fat remains,
``fat-exhausted`` after (the phase boundary is the first round that starts with none). A muscle
needle lost in a round is named with the plan item that cut it: an applied item whose text held
the needle before the round.

A washer that fails (a command that exits non-zero or hangs, a plan naming a missing file) ends
the loop with a FAILED round and its reason, with what the washer produced before it failed (a
command's stdout and stderr) kept as the round's artifacts; the pipeline never leaves the store
half-written.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from washexp.errors import ModelError, WashexpError
from washexp.hashing import canonical_hash, sha256_bytes, tree_digest
from washexp.needles import contains
from washexp.wash import pipeline
from washexp.wash.coalwash import caliper
from washexp.wash.coalwash.files import read_md
from washexp.wash.coalwash.score import score_texts
from washexp.wash.plan import split_lines
from washexp.wash.washers import WasherError


@dataclass
class Round:
    round: int
    phase: str
    score: dict[str, Any] | None
    receipt: dict[str, Any] | None
    sha256: str
    diff: str
    failed: str | None = None
    lost_now: list[dict] = field(default_factory=list)
    """Muscle lost in this round: id, needle, and the plan item that cut it."""
    lost_so_far: int = 0
    """Muscle needles lost at any round up to this one (a needle restored later still counts)."""
    tokens_total: int = 0
    tokens_always_loaded: int = 0
    washer_artifacts: dict[str, str] = field(default_factory=dict)
    """What the washer wanted kept with the round (a model's replies, a command's output)."""
    copy_of: int | None = None
    """The earlier round this one repeats: it started from the same store, the washer said the same
    and the store ended the same (a deterministic washer on a store it left unchanged). A copy is
    one observation again, not a new one: the record counts copies apart."""


def scratch_copy(src: Path, dst: Path, files: dict[str, str]) -> Path:
    """The store's ``*.md`` files (never ``expected.json``: a washer never sees ground truth)."""
    dst.mkdir(parents=True)
    for name, text in files.items():
        (dst / name).write_bytes(text.encode("utf-8"))
    return dst


def store_sha256(files: dict[str, str]) -> str:
    return tree_digest({n: sha256_bytes(t.encode("utf-8")) for n, t in files.items()})


def _diff(before: dict[str, str], after: dict[str, str]) -> str:
    out: list[str] = []
    for name in sorted(before.keys() | after.keys()):
        a, b = before.get(name, ""), after.get(name, "")
        if a != b:
            out += difflib.unified_diff(
                a.splitlines(True), b.splitlines(True), f"a/{name}", f"b/{name}" if name in after else "/dev/null"
            )
    return "".join(out)


def _culprits(needle: str, receipt: pipeline.Receipt, before: dict[str, str]) -> list[dict]:
    """The applied items whose text held ``needle`` before the round."""
    found = []
    for step in receipt.steps:
        for item in step.applied:
            text = before.get(item["file"], "")
            if item["op"] != "delete-file":
                text = "".join(split_lines(text)[item["start"] - 1 : item["end"]])
            if contains(text, needle):
                found.append({"tier": step.tier, **item})
    return found


def loop(
    store_dir: Path,
    fixture_files: dict[str, str],
    expected: dict[str, Any],
    name: str,
    wash,
    rounds: int,
    dry_stop: int,
    label: str | None = None,
) -> list[Round]:
    """Wash ``store_dir`` up to ``rounds`` times with ``wash(store, round) -> Receipt``; stop after
    ``dry_stop`` consecutive rounds that applied nothing (0: never)."""
    muscle = {m["id"]: m["needle"] for m in expected.get("muscle", [])}
    out: list[Round] = []
    lost: set[str] = set()
    fat_left = len(expected.get("fat", []))
    dry = 0
    seen: dict[str, int] = {}  # a round's signature -> the first round with it
    for r in range(1, rounds + 1):
        phase = "has-fat" if fat_left else "fat-exhausted"
        before = read_md(store_dir)
        try:
            receipt = wash(store_dir, r)
        except ModelError:  # the endpoint (or the local server) is gone: the sweep cannot finish
            raise
        except WashexpError as err:
            after = read_md(store_dir)
            kept = dict(err.artifacts) if isinstance(err, WasherError) else {}  # why it failed, in its words
            out.append(
                Round(
                    r,
                    phase,
                    None,
                    None,
                    store_sha256(after),
                    _diff(before, after),
                    failed=str(err),
                    washer_artifacts=kept,
                )
            )
            break
        after = read_md(store_dir)
        score = score_texts(expected, fixture_files, after, name, round=r, model=label, phase=phase)
        now_lost = [m for m in score["muscle"]["lost"] if m not in lost]
        lost |= set(now_lost)
        m = caliper.measure(store_dir)
        signature = canonical_hash([store_sha256(before), store_sha256(after), dict(receipt.artifacts)])
        out.append(
            Round(
                r,
                phase,
                score,
                receipt.to_dict(),
                store_sha256(after),
                _diff(before, after),
                lost_now=[
                    {"id": i, "needle": muscle[i], "cut_by": _culprits(muscle[i], receipt, before)} for i in now_lost
                ],
                lost_so_far=len(lost),
                tokens_total=m.total_tokens_est,
                tokens_always_loaded=m.always_loaded_tokens_est,
                washer_artifacts=dict(receipt.artifacts),
                copy_of=seen.get(signature),
            )
        )
        seen.setdefault(signature, r)
        fat_left = len(score["fat"]["remaining"])
        dry = dry + 1 if receipt.applied == 0 else 0
        if dry_stop and dry >= dry_stop:
            break
    return out


def artifacts(rounds: list[Round]) -> dict[str, str]:
    """Per round: the score JSON, the receipt, the diff, the washer's own artifacts
    (``rounds/rNN/<name>``); and the named losses."""
    out = {}
    for rd in rounds:
        stem = f"rounds/r{rd.round:02d}"
        if rd.score is not None:
            out[f"{stem}.score.json"] = json.dumps(rd.score, indent=2, ensure_ascii=False) + "\n"
            out[f"{stem}.receipt.json"] = json.dumps(rd.receipt, indent=1, ensure_ascii=False) + "\n"
        if rd.diff:
            out[f"{stem}.diff"] = rd.diff
        for name, text in rd.washer_artifacts.items():
            out[f"{stem}/{name}"] = text
    out["rounds.json"] = json.dumps([_row(rd) for rd in rounds], indent=1, ensure_ascii=False) + "\n"
    return out


def _row(rd: Round) -> dict[str, Any]:
    row = asdict(rd)
    row.pop("diff")
    row.pop("receipt")
    row.pop("washer_artifacts")
    return row
