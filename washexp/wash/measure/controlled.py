"""The controlled experiment (CoalWash's 2026-07-12 design): what each cut loses at the same size.

Per store, every arm starts from the same files:

- ``unchecked``: no change (the reference: 0 % saving, 100 % recall);
- ``gated``: the washer under test, gates on (:func:`washexp.wash.measure.cutters.gated`), run once;
- the ungated compressors (``truncate`` always; ``plain`` when there is a model), each told the
  **target** in bytes; a stochastic one runs ``repeats`` times.

Size is the UTF-8 bytes of the store's top-level ``*.md`` files (the always-loaded share, as the
caliper counts it, is kept beside it). The target is the gated arm's size when it cut at least
:data:`MIN_CUT_PCT` %; when it cut less, the target is ``target_pct`` % of the store and the gated
arm is reported at its own size, marked ``own size``. A run is **in band** within ±
:data:`BAND_PCT` % of the target; an arm's figures (mean, min, max) are over its in-band runs,
and out-of-band runs are reported and counted apart, never dropped (an arm with no run in band
has no figure: ``n/a``). Per run: saving %, structured-token recall overall and per class by
CoalWash's rule (distinct values; :mod:`washexp.wash.coalwash.recall`), the occurrence recall beside it,
tokens lost, the planted muscle needles kept (the scorer's rule).

Recoverability (what left the live files but survives in an archive file) is not measured: a
plan cannot create a file, so no arm can archive; the record says so.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from washexp.errors import ModelError, WashexpError
from washexp.wash.coalwash.recall import CLASSES, census, occurrence_recall, recall
from washexp.wash.coalwash.score import score_texts
from washexp.wash.measure.compressor import size
from washexp.wash.measure.cutters import Cutter

BAND_PCT = 5.0
MIN_CUT_PCT = 5.0


def in_band(nbytes: int, target: int) -> bool:
    """Within ± :data:`BAND_PCT` % of the target (inclusive)."""
    return abs(nbytes - target) * 100 <= BAND_PCT * target


def target_of(store_bytes: int, gated_bytes: int | None, target_pct: int) -> tuple[int, bool]:
    """(target bytes, the gated arm is at its own size): the gated arm's size when it cut at
    least :data:`MIN_CUT_PCT` %, else ``target_pct`` % of the store."""
    if gated_bytes is not None and (store_bytes - gated_bytes) * 100 >= MIN_CUT_PCT * store_bytes:
        return gated_bytes, False
    return store_bytes * target_pct // 100, True


@dataclass
class Run:
    arm: str
    repeat: int
    bytes: int | None = None
    always_loaded_bytes: int | None = None
    saving_pct: float | None = None
    in_band: bool | None = None
    own_size: bool = False
    recall: dict[str, Any] | None = None
    """CoalWash's rule: distinct values per class."""
    occurrence_recall: dict[str, Any] | None = None
    """The second figure: occurrences over distinct lines (``washexp.wash.coalwash.recall``)."""
    needles_kept: int | None = None
    needles_lost: list[str] = field(default_factory=list)
    cost_tokens: int = 0
    calls: dict[str, int] = field(default_factory=dict)
    failed: str | None = None


def measure_run(
    run: Run, before: dict[str, str], after: dict[str, str], expected: dict, name: str, always_loaded
) -> Run:
    """Fill ``run``'s size, saving, recall and needles for ``after`` against ``before``."""
    total = size(before)
    run.bytes = size(after)
    run.always_loaded_bytes = always_loaded(after)
    run.saving_pct = 100.0 * (total - run.bytes) / total if total else None
    b, a = census(before), census(after)
    run.recall = recall(b, a).to_dict()
    run.occurrence_recall = occurrence_recall(b, a).to_dict()
    muscle = score_texts(expected, before, after, name)["muscle"]
    run.needles_kept, run.needles_lost = muscle["kept"], list(muscle["lost"])
    return run


def run_store(
    files: dict[str, str],
    expected: dict,
    name: str,
    gated: Cutter,
    ungated: list[Cutter],
    target_pct: int,
    repeats: int,
    always_loaded,
) -> dict[str, Any]:
    """Every arm on one store: the raw record (``runs``, ``target_bytes``, the instructions)."""
    total = size(files)
    runs = [measure_run(Run("unchecked", 0), files, dict(files), expected, name, always_loaded)]
    g = _one(gated, "gated", 0, files, None, expected, name, always_loaded)
    target, own = target_of(total, g.bytes, target_pct)
    g.own_size = own
    g.in_band = None if g.bytes is None else in_band(g.bytes, target)
    runs.append(g)
    for cutter in ungated:
        for k in range(repeats if cutter.stochastic else 1):
            r = _one(cutter, cutter.name, k, files, target, expected, name, always_loaded)
            r.in_band = None if r.bytes is None else in_band(r.bytes, target)
            runs.append(r)
    return {
        "store": name,
        "store_bytes": total,
        "store_always_loaded_bytes": always_loaded(files),
        "target_bytes": target,
        "target_rule": "the gated arm's size" if not own else f"{target_pct}% of the store (the gated arm cut < 5%)",
        "band_pct": BAND_PCT,
        "gated_washer": gated.name,
        "instructions": {"gated": gated.instruction, **{c.name: c.instruction for c in ungated}},
        "runs": [asdict(r) for r in runs],
    }


def _one(cutter: Cutter, arm: str, k: int, files, target, expected, name, always_loaded) -> Run:
    run = Run(arm, k)
    try:
        cut = cutter.cut(dict(files), target, k)
    except ModelError:
        raise  # an endpoint that is gone stops the sweep
    except WashexpError as err:
        run.failed = str(err)
        return run
    run.cost_tokens, run.calls = cut.cost_tokens, dict(cut.calls)
    return measure_run(run, files, cut.files, expected, name, always_loaded)


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def arm_figures(runs: list[dict]) -> dict[str, float]:
    """One arm's figures over its counted runs (in band; the unchecked run; the gated run at its
    own size), plus how many runs were out of band or failed (see the module doc)."""
    done = [r for r in runs if r["failed"] is None]
    counted = [r for r in done if r["in_band"] is not False or r["own_size"]]
    out: dict[str, float | None] = {
        "runs": float(len(runs)),
        "failed_runs": float(len(runs) - len(done)),
        "in_band_runs": float(sum(r["in_band"] is True for r in done)),
        "out_of_band_runs": float(sum(r["in_band"] is False for r in done)),
        "own_size": float(any(r["own_size"] for r in done)),
        "cost_tokens": float(sum(r["cost_tokens"] for r in runs)),
    }
    if not counted:
        return {k: v for k, v in out.items() if v is not None}
    pct = [r["recall"]["recall_pct"] for r in counted if r["recall"]["recall_pct"] is not None]
    out |= {
        "counted_runs": float(len(counted)),
        "bytes": _mean([float(r["bytes"]) for r in counted]),
        "always_loaded_bytes": _mean([float(r["always_loaded_bytes"]) for r in counted]),
        "saving_pct": _mean([r["saving_pct"] for r in counted if r["saving_pct"] is not None]),
        "tokens_total": float(counted[0]["recall"]["total"]),
        "tokens_lost": _mean([float(r["recall"]["total"] - r["recall"]["kept"]) for r in counted]),
        "needles_kept": _mean([float(r["needles_kept"]) for r in counted]),
    }
    if pct:
        out |= {"recall_pct": _mean(pct), "recall_min_pct": min(pct), "recall_max_pct": max(pct)}
    occ = [o["recall_pct"] for r in counted if (o := r.get("occurrence_recall")) and o["recall_pct"] is not None]
    if occ:
        out["occurrence_recall_pct"] = _mean(occ)
    for cls in CLASSES:
        byc = [r["recall"]["by_class"][cls] for r in counted]
        if byc[0]["total"]:
            out[f"recall/{cls}_pct"] = _mean([c["recall_pct"] for c in byc])
            out[f"dropped/{cls}"] = _mean([float(c["total"] - c["kept"]) for c in byc])
    return {k: v for k, v in out.items() if v is not None}


def metrics(raw: dict[str, Any], muscle_total: int) -> dict[str, float]:
    """A store run's metrics: ``<arm>/<figure>`` for every arm, and the store's sizes."""
    out = {
        "store_bytes": float(raw["store_bytes"]),
        "store_always_loaded_bytes": float(raw["store_always_loaded_bytes"]),
        "target_bytes": float(raw["target_bytes"]),
        "muscle_total": float(muscle_total),
    }
    arms = list(dict.fromkeys(r["arm"] for r in raw["runs"]))
    for arm in arms:
        figures = arm_figures([r for r in raw["runs"] if r["arm"] == arm])
        out |= {f"{arm}/{k}": v for k, v in figures.items()}
    return out
