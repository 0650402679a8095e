"""A condition's artifacts per generation: the summary and ranking used (or why they failed),
H's attempts and its "fewer than Full" check, the context and what it is missing."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from washexp.compaction import h_hermes, h_native
from washexp.compaction.checkpoint import Checkpoint
from washexp.compaction.fixtures import Task
from washexp.compaction.jev import rank, top_n


def to_json(obj: Any) -> str:
    return json.dumps(obj, indent=1, ensure_ascii=False, sort_keys=False) + "\n"


def frozen_artifacts(task: Task, arm, gens, parts: dict[str, list], impl: str) -> dict[str, str]:
    """``parts``: the generations' frozen S, ranking and H (:class:`~washexp.compaction.frozen.Made`;
    empty lists for Full)."""
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
            record = checkpoint_record(made.value, impl) if made.ok else {"impl": impl, "failure": made.failure}
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


def checkpoint_record(cp: Checkpoint | None, impl: str) -> dict:
    if cp is None:
        return {}
    protocol = h_native.PROTOCOL if impl == "native" else h_hermes.protocol()
    return {
        "impl": impl,
        "protocol": protocol,
        "source_sha256": h_hermes.source_sha256() if impl == "hermes" else None,
        "valid": cp.valid,
        "failure": cp.failure,
        "attempts": [asdict(a) for a in cp.attempts],
    }
