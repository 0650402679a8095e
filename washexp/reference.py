"""The offline reference backend (``model=reference``): deterministic, labelled, no network.

It is a baseline, not a chat model: an extractive S and an extractive H writer that honour
their budgets and favour structured tokens (ids, numbers, versions, paths, dates, key=value),
and a BM25 Jev ranker (bm25s). It has no reader, so fact accuracy is never measured for it:
retention is the headline of offline runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from washexp.compaction.hermes import CheckpointRequest, Writer, reference_writer
from washexp.roles import BACKENDS, RankJob, Roles, SummaryJob
from washexp.tokens import count

_STRUCTURED = re.compile(
    r"\b[A-Z][A-Z0-9]*-\d+\b"              # ids: PAY-4827, INV-731
    r"|\b[a-z]+[-_][0-9a-f]*\d[0-9a-f]*\b"  # ids: req-7f3d9, tok_9f31c
    r"|\bv?\d+(?:\.\d+){1,3}\b"            # versions, decimals, addresses
    r"|\d{4}-\d{2}-\d{2}(?:T[\d:]+Z?)?"    # dates and timestamps
    r"|[\w.-]*/[\w./-]+|\b\w+\.(?:py|js|ts|json|ini|md|ya?ml|sh|log|txt|csv|sql|toml)\b"  # paths
    r"|\b\w+\s*[=:]\s*[^\s,;]+"            # key = value
    r"|\b\d+%?"                            # numbers
    r"|\"[^\"]{1,60}\"|'[^']{1,60}'"       # quoted strings
)
_LINE_NUMBER = re.compile(r"^\s*\d+\|")
_WORD = re.compile(r"[a-z][a-z0-9_]{3,}")


def _score(line: str, focus: set[str]) -> float:
    structured = len(set(_STRUCTURED.findall(line)))
    overlap = len(focus & set(_WORD.findall(line.lower())))
    return structured + 0.5 * overlap


def extract(sources: Iterable[tuple[str, str]], focus: str, max_tokens: int,
            max_words: int | None = None) -> str:
    """An extractive digest of ``sources`` ((label, text) pairs) within ``max_tokens`` Qwen
    tokens (and ``max_words`` words): the highest-scoring distinct lines, taken greedily
    (ties in source order), rendered in source order under their source labels."""
    focus_words = set(_WORD.findall(focus.lower()))
    candidates, seen = [], set()
    for s, (label, text) in enumerate(sources):
        for i, raw in enumerate(text.splitlines()):
            line = _LINE_NUMBER.sub("", raw).strip()
            if len(line) < 3 or line in seen or line.startswith("..."):
                continue
            seen.add(line)
            score = _score(line, focus_words)
            if score > 0:
                candidates.append((score, s, i, label, line))
    chosen: list[tuple[int, int, str, str]] = []
    for score, s, i, label, line in sorted(candidates, key=lambda c: (-c[0], c[1], c[2])):
        trial = sorted([*chosen, (s, i, label, line)])
        text = _render(trial)
        if count(text) <= max_tokens and (max_words is None or len(text.split()) <= max_words):
            chosen = trial
    return _render(chosen)


def _render(chosen: list[tuple[int, int, str, str]]) -> str:
    out, current = [], None
    for _, _, label, line in chosen:
        if label != current:
            out.append(f"{label}:")
            current = label
        out.append(f"- {line}")
    return "\n".join(out)


def summarize(job: SummaryJob) -> str:
    sources = [(u.arguments.get("path", u.tool), u.content) for u in job.units]
    return extract(sources, job.query, job.allowance)


def rank(job: RankJob) -> list[float]:
    import logging

    import bm25s

    logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every index build

    corpus = bm25s.tokenize([u.render() for u in job.units], stopwords="en", show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(corpus, show_progress=False)
    query = bm25s.tokenize([job.query], stopwords="en", return_ids=False, show_progress=False)[0]
    return [round(float(s), 6) for s in retriever.get_scores(query)]


def _checkpoint_writer(task_id: str, generation: int) -> Writer:
    def write(request: CheckpointRequest) -> str:
        return reference_writer(request)

    return write


@BACKENDS.register("reference")
def reference_backend(model) -> Roles:
    spec = {"backend": "reference", "summarizer": "extractive", "checkpoint": "extractive",
            "ranker": "bm25s", "reader": None}
    return Roles(spec=spec, summarize=summarize, rank=rank, checkpoint_writer=_checkpoint_writer)
