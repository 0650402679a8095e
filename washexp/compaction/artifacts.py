"""A condition's artifacts per generation: the summary and ranking used (or why they failed),
H's attempts and its "fewer than Full" check, the context and what it is missing."""

from __future__ import annotations

import json
from typing import Any

from washexp.compaction.inputs.fixtures import Task
from washexp.compaction.methods.jev import rank, top_n


def to_json(obj: Any) -> str:
    return json.dumps(obj, indent=1, ensure_ascii=False, sort_keys=False) + "\n"


def frozen_artifacts(task: Task, arm, gens, parts: dict[str, list], method) -> dict[str, str]:
    """``parts``: the generations' frozen S, ranking and checked bodies (H or a plugin's)
    (:class:`~washexp.compaction.frozen.Made`; empty lists for Full); ``method`` describes its own."""
    out = {}
    for gen in gens:
        g = gen.g
        if gen.outcome.summary is not None:
            out[f"summary/g{g}.txt"] = gen.outcome.summary
        if parts["Jev"]:
            made = parts["Jev"][g]
            record = ranking(task, made.value, arm.topn) if made.ok else {"failure": made.failure}
            out[f"ranking/g{g}.json"] = to_json(record)
        if parts["H"]:
            made = parts["H"][g]
            record = method.describe(made.value) if made.ok else {**method.describe(None), "failure": made.failure}
            out[f"summary/g{g}.checkpoint.json"] = to_json({**record, "full_check": gen.outcome.check})
        if gen.valid:
            out[f"contexts/g{g}.json"] = to_json(list(gen.outcome.context.messages))
            out[f"retention/g{g}.json"] = to_json(gen.missing)
    return out


def ranking(task: Task, scores: list[float], n: int | None) -> dict:
    return {
        "units": [{"index": u.index, "call_id": u.call_id, "arguments": u.arguments} for u in task.units],
        "scores": scores,
        "order": rank(scores),
        "selected": top_n(scores, n or 0),
        "requested_n": n,
    }
