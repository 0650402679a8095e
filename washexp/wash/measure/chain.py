"""The chain (CoalWash's 2026-07-15 study): a photocopy of a photocopy.

``passes`` sequential passes of one cutter, each seeing only the previous pass's output. Per
pass: its size, **cumulative** recall (against the original store) and **pairwise** recall
(against the pass before it), overall and per class (:mod:`washexp.wash.coalwash.recall`), and the muscle
needles kept. Pairwise recall can look acceptable at every pass while cumulative recall falls:
that gap is what the chain measures.

Chains: ``truncate`` (the model-free baseline; each pass keeps ``pass_keep_pct`` % of its input's
bytes), ``plain`` when there is a model (each pass the plain prompt, no target), and the gated
washer run the same number of passes on its own output, for contrast. An ungated chain also has a
**one-shot** control: the same cutter from the original straight to the chain's final size.
A pass that fails ends its chain (the passes before it are kept, the failure named).
"""

from __future__ import annotations

from typing import Any

from washexp.errors import ModelError, WashexpError
from washexp.wash.coalwash.recall import CLASSES, census, recall
from washexp.wash.measure.compressor import size
from washexp.wash.measure.controlled import Run, measure_run
from washexp.wash.measure.cutters import Cutter


def run_chain(
    files: dict[str, str],
    expected: dict,
    name: str,
    cutter: Cutter,
    passes: int,
    keep_pct: int | None,
    one_shot: bool,
    always_loaded,
) -> dict[str, Any]:
    """One chain on one store: the raw record (``passes`` rows, the one-shot row, the failure)."""
    rows: list[dict[str, Any]] = []
    failed = None
    prev = dict(files)
    for k in range(1, passes + 1):
        target = size(prev) * keep_pct // 100 if keep_pct is not None else None
        try:
            cut = cutter.cut(dict(prev), target, 0)
        except ModelError:
            raise
        except WashexpError as err:
            failed = f"pass {k}: {err}"
            break
        run = measure_run(Run(cutter.name, k), files, cut.files, expected, name, always_loaded)
        pair = recall(census(prev), census(cut.files))
        rows.append(
            {
                "pass": k,
                "bytes": run.bytes,
                "always_loaded_bytes": run.always_loaded_bytes,
                "target_bytes": target,
                "cumulative": run.recall,
                "pairwise": pair.to_dict(),
                "needles_kept": run.needles_kept,
                "needles_lost": run.needles_lost,
                "cost_tokens": cut.cost_tokens,
            }
        )
        prev = cut.files
    shot = None
    if one_shot and rows and failed is None:
        final = rows[-1]["bytes"]
        try:
            cut = cutter.cut(dict(files), final, 0)
        except ModelError:
            raise
        except WashexpError as err:
            failed = f"one-shot: {err}"
        else:
            run = measure_run(Run(cutter.name, 0), files, cut.files, expected, name, always_loaded)
            shot = {
                "target_bytes": final,
                "bytes": run.bytes,
                "recall": run.recall,
                "needles_kept": run.needles_kept,
                "cost_tokens": cut.cost_tokens,
            }
    return {
        "chain": cutter.name,
        "store": name,
        "store_bytes": size(files),
        "keep_pct": keep_pct,
        "instruction": cutter.instruction,
        "passes": rows,
        "one_shot": shot,
        "failed": failed,
    }


def metrics(chains: list[dict[str, Any]], planned: int) -> tuple[dict[str, float], dict[str, list[float]]]:
    """A store run's metrics (``<chain>/pass<k>/...``, ``<chain>/one_shot/...``) and step series
    (``<chain>/cumulative_pct``, ``<chain>/pairwise_pct``, one value per pass)."""
    out: dict[str, float] = {"passes_planned": float(planned)}
    series: dict[str, list[float]] = {}
    for ch in chains:
        c = ch["chain"]
        out[f"{c}/passes"] = float(len(ch["passes"]))
        out[f"{c}/failed"] = float(ch["failed"] is not None)
        for row in ch["passes"]:
            p = f"{c}/pass{row['pass']}"
            out[f"{p}/bytes"] = float(row["bytes"])
            for kind in ("cumulative", "pairwise"):
                if row[kind]["recall_pct"] is not None:
                    out[f"{p}/{kind}_pct"] = row[kind]["recall_pct"]
                    series.setdefault(f"{c}/{kind}_pct", []).append(row[kind]["recall_pct"])
            out[f"{p}/needles_kept"] = float(row["needles_kept"])
        if ch["passes"]:
            last = ch["passes"][-1]
            for cls in CLASSES:
                byc = last["cumulative"]["by_class"][cls]
                if byc["total"]:
                    out[f"{c}/last/{cls}_pct"] = byc["recall_pct"]
        if ch["one_shot"] is not None:
            out[f"{c}/one_shot/bytes"] = float(ch["one_shot"]["bytes"])
            if ch["one_shot"]["recall"]["recall_pct"] is not None:
                out[f"{c}/one_shot/recall_pct"] = ch["one_shot"]["recall"]["recall_pct"]
    return out, series
