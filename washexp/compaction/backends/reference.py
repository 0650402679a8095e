"""The offline reference backend (``model=reference``): deterministic, labelled, no network.

It is a baseline, not a chat model: an extractive S and an extractive H writer that honour
their budgets and favour structured tokens (ids, numbers, versions, paths, dates, key=value),
and a BM25 Jev ranker (bm25s). It has no reader, so fact accuracy is never measured for it:
retention is the headline of offline runs.
"""

from __future__ import annotations

import re

from washexp.compaction.backends.roles import Ranking, RankJob, Roles, SummaryJob, offline
from washexp.compaction.methods import extractive
from washexp.compaction.methods import h_native as hermes


def summarize(job: SummaryJob) -> str:
    """S: an extractive digest of every unit within the allowance, grouped under each unit's path."""
    focus, seen, candidates = extractive.words(job.query), set[str](), list[extractive.Line]()
    for u in job.units:
        label = u.arguments.get("path", u.tool)
        for raw in u.content.splitlines():
            line = extractive.clean(raw)
            if len(line) < 3 or line in seen or line.startswith("..."):
                continue
            seen.add(line)
            points = extractive.score(line, focus)
            if points:
                candidates.append(extractive.Line(points, len(candidates), line, label))
    return _render(extractive.select(candidates, _render, job.allowance))


def _render(chosen: list[extractive.Line]) -> str:
    out, current = [], None
    for line in chosen:
        if line.label != current:
            out.append(f"{line.label}:")
            current = line.label
        out.append(f"- {line.text}")
    return "\n".join(out)


_BLOCK = re.compile(r"^\[(TOOL RESULT [^\]\n]*|[A-Z]+)\]: ?")


def _candidates(serialized: str, focus: str) -> list[extractive.Line]:
    """Every scored line; the tool-result lines when there are any."""
    focus_words, seen = extractive.words(focus), set()
    found: dict[bool, list[extractive.Line]] = {True: [], False: []}
    in_tool, lines = False, serialized.split("\n")
    for pos, raw in enumerate(lines):
        m = _BLOCK.match(raw) if pos == 0 or not lines[pos - 1] else None  # messages: "\n\n"
        if m:
            in_tool, raw = m.group(1).startswith("TOOL RESULT"), raw[m.end() :]
        line = extractive.clean(raw)
        if (
            not line
            or line in seen
            or line == hermes.TRUNCATION_MARKER.strip()
            or line.startswith("...[summary input")
            or hermes.USER_ASKED.search(line)
        ):
            continue  # markers, repeats, and quoted attribution that would fail provenance
        seen.add(line)
        points = extractive.score(line, focus_words)
        if points:
            found[in_tool].append(extractive.Line(points, pos, line))
    return found[True] or found[False]


def reference_writer(request: hermes.CheckpointRequest) -> str:
    """Deterministic extractive baseline (not an LLM): the snapshot line and Critical Context
    bullets from tool-result lines, ranked by structured tokens + focus overlap (ties in source
    order), taken greedily while the body stays within the target tokens and the word limit,
    rendered in source order."""
    snapshot = hermes.NO_USER_SENTINEL if not request.has_user_turn else "Not reconstructed by the reference writer."
    head = f"{hermes.SNAPSHOT_HEADING}\n{snapshot}\n\n## Critical Context"

    def render(chosen: list[extractive.Line]) -> str:
        return head + "".join(f"\n- {c.text}" for c in chosen)

    chosen = extractive.select(
        _candidates(request.serialized, request.focus), render, request.target_tokens, request.word_limit
    )
    return render(chosen)


def bm25_scores(job: RankJob) -> list[float]:
    import logging

    import bm25s

    logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every index build
    corpus = bm25s.tokenize([u.render() for u in job.units], stopwords="en", show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(corpus, show_progress=False)
    query = bm25s.tokenize([job.query], stopwords="en", return_ids=False, show_progress=False)[0]
    return [round(float(s), 6) for s in retriever.get_scores(query)]


def _checkpoint_writer(task_id: str, generation: int) -> hermes.Writer:
    return reference_writer  # deterministic: every generation writes the same checkpoint


def reference_backend(model, endpoint=None, root=None) -> Roles:
    return Roles(
        spec={"backend": "reference"},
        parts={"summarize": {"summarizer": "extractive"}, "rank": {"ranker": "bm25s"}, "checkpoint": "extractive"},
        summarize=lambda job: offline(summarize(job)),
        rank=lambda job: Ranking(bm25_scores(job)),
        checkpoint_writer=_checkpoint_writer,
    )
