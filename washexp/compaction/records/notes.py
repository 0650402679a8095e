"""The compaction record's notes: the method choices a reader of the numbers must know, and
what the covered runs say about generations, token counts and task sets."""

from __future__ import annotations

import json

import pandas as pd

from washexp.compaction.methods.baselines import kind_of
from washexp.compaction.methods.table import BASELINES
from washexp.compaction.records.runs import value

METHOD = (
    "Method: Jev ties go to the earlier unit (source order); Top N takes the N highest scores with no "
    "threshold, rendered in source order.",
    "Method: a task with fewer units than N keeps all of them (units_kept per task below). Its contexts "
    "for every N past its unit count are identical, so with a reader their answers are the same "
    "recorded requests, replayed from the recorder: not new draws.",
    "Method: an internal role's reply (the Jev ranking) is read as a JSON object, bare or inside one code "
    "fence; the reader's answer is graded strictly as the study says (prose or a fence is malformed).",
    "Method: each context uses only what it needs. Full depends on the reader alone (no S, no ranking, "
    "so no ceiling); Top 0 on no ranking; a failed S, H or ranking fails only the contexts of its "
    "generation that use it (zero credit, reason in the run's failures.json). The ceiling is enlarged "
    "to fit the S contexts that exist.",
    "Method: both H paths follow one rule: at most three length-check attempts (0.8x the target each, "
    "no feedback), a provenance failure (no-user sentinel, 'User asked:') ends the attempts, one output "
    "cap (model.max_tokens) for every call. H is valid only if its body fits the allowance, its context "
    "fits the ceiling (local Qwen count) and it uses fewer input tokens than Full, judged before answering.",
)


def method_notes(arms: pd.DataFrame, reference: bool) -> list[str]:
    notes = list(METHOD)
    labels = sorted({str(v) for v in arms.get("params.h_label", pd.Series(dtype=object)).dropna()} - {"n/a"})
    if labels:
        notes.append(f"H is {'; '.join(labels)}.")
    builtin = {"full", "none", "S", "H"}
    methods = {str(m) for m in arms.get("method", pd.Series(dtype=object)).dropna()} - builtin
    baselines = sorted(m for m in methods if kind_of(m) in BASELINES)  # ``mask M=10``: kind, params
    plugins = sorted(methods - set(baselines))
    if baselines:
        notes.append(
            f"Baselines ({', '.join(baselines)}): mask M keeps the latest M tool outputs verbatim and replaces "
            "older ones with a one-line placeholder (calls kept); recency K keeps the last K turns verbatim and "
            "leaves earlier turns out; hybrid M budget is mask M, or S fused with its Top-N units when the "
            "masked context is over budget input tokens (local Qwen count). With Top N > 0 the top-ranked units "
            "also stay verbatim in place. Model-free but for the hybrid's S; unchecked, like S."
        )
    rankers = sorted({str(r) for r in arms.get("ranker", pd.Series(dtype=object)).dropna()})
    if rankers:
        notes.append(
            f"Ranker: arms labelled {', '.join(rankers)} rank their Top-N units with model-free BM25, not Jev."
        )
    if plugins:
        notes.append(
            f"Plugin methods ({', '.join(plugins)}; their specs under provenance) answer to H's validity rule: "
            "one attempt, the body within the allowance, the body alone under the ceiling, fewer input tokens "
            "than Full. A body that breaks it is counted under 'invalid', a crash or a non-string body under "
            "'failed contexts'; both score 0 and stay in."
        )
    if reference:
        notes.append(
            "The reference backend is deterministic and calls no endpoint: one generation per task, and "
            "no API token counts (API columns n/a). Its H '< Full' check uses the local Qwen3 chat template."
        )
        return notes
    spec = json.loads(arms.iloc[0]["params.roles"])
    notes.append(
        f"Generations: S, H and Jev are sampled at generation temperature {spec.get('generation_temperature')} "
        f"(the study's 'three independently generated summary/ranking pairs'); its 'temperature zero' is read "
        f"as the answers' (reader temperature {spec.get('temperature')})."
    )
    return notes


def count_notes(final: pd.DataFrame, measured: bool) -> list[str]:
    """Which count decided H's validity; which count the reduction columns use."""
    notes = []
    if measured:
        notes.append(
            "Reduction and shortening vs Full are by the endpoint's own input count (API) wherever a reader "
            "answered; the local Qwen count (ChatML rendering) is the secondary figure beside it."
        )
    h = final[final["method"] == "H"]
    endpoint = sum(
        value(a, f"{c}/h_full_check_endpoint") or 0.0 for _, a in h.iterrows() for c in ("primary", "control")
    )
    local = sum(value(a, f"{c}/h_full_check_local") or 0.0 for _, a in h.iterrows() for c in ("primary", "control"))
    gguf = sum(value(a, f"{c}/h_full_check_gguf") or 0.0 for _, a in h.iterrows() for c in ("primary", "control"))
    if endpoint or local:
        notes.append(
            f"H's 'fewer input tokens than Full' check was decided by the endpoint's tokenize route for "
            f"{endpoint:.0f} context(s) and by the local Qwen3 chat template for {local:.0f}."
        )
    if gguf:
        notes.append(
            f"H's 'fewer input tokens than Full' check was decided for {gguf:.0f} context(s) by the served "
            "GGUF file's own chat template and vocabulary, the count its llama.cpp server reports."
        )
    return notes


def generation_notes(table_rows: tuple[dict, ...], planned: int) -> list[str]:
    """Never claim N generations for fewer distinct ones."""
    notes = []
    for key, name in (("distinct_s", "S bodies"), ("distinct_rankings", "rankings"), ("distinct_h", "H bodies")):
        seen = [r[key] for r in table_rows if r[key] is not None]
        if seen and min(seen) < planned:
            notes.append(
                f"{planned} generation(s) planned per task, but tasks produced {min(seen):.0f}–{max(seen):.0f} "
                f"distinct {name}: identical generations are one generation, not independent ones."
            )
    return notes


def task_set_notes(conds: pd.DataFrame) -> list[str]:
    everyone = frozenset(conds["task"])
    notes = []
    for (_, label), group in conds.groupby(["order", "label"], sort=True):
        missing = sorted(everyone - frozenset(group["task"]))
        if missing:
            notes.append(f"{label} lacks tasks {', '.join(missing)}: paired comparisons use the tasks both arms ran.")
    return notes
