"""A condition's model calls as traces (``tracking.traces``): which calls, and which grade is whose.

A condition names every call behind it as a ``requests/<key>.json`` artifact; the recorder that
answered them holds each record and how this process got it (:meth:`Recorder.timing`). The
calls become :class:`~washexp.tracking.traces.ModelCall` values its run's tracker writes as
traces, and ``grade_traces.json`` names the ``trace_id`` of each graded answer (the reader
call of its generation and answer). Not part of any condition's code digest: a trace changes no
result.
"""

from __future__ import annotations

from typing import Any

from washexp.compaction.backends.roles import Roles
from washexp.models.recorder import Recorder
from washexp.tracking.traces import ModelCall, calls_from

TRACE_COLUMN = "trace_id"
TRACE_TABLE = "grade_traces.json"


def recorder_of(roles: Roles) -> Recorder | None:
    """The recorder behind a served backend's roles (its ``recording`` is the recorder's bound
    ``artifact``); None offline, where no call is made."""
    owner = getattr(roles.recording, "__self__", None)
    return owner if isinstance(owner, Recorder) else None


def recording_keys(artifacts: dict[str, Any]) -> list[str]:
    """The recording keys a condition logged (``requests/<key>.json``): every call behind it."""
    return [name[len("requests/") : -len(".json")] for name in artifacts if name.startswith("requests/")]


def condition_calls(recorder: Recorder, keys: list[str], task: str) -> tuple[ModelCall, ...]:
    """The calls behind ``keys`` as this process got them (:func:`~washexp.tracking.traces.calls_from`)."""
    return calls_from(recorder, keys, task)


def link_grades(tables: dict[str, list[dict]], calls: tuple[ModelCall, ...], trace_id) -> dict[str, list[dict]]:
    """``tables`` with ``grade_traces.json``: per graded answer (generation, answer), the trace of
    the reader call it graded (``trace_id(key)``). A table of its own, never a column of
    ``grades.json``: a trace id names where a store keeps the call, so a result's own tables stay
    byte-identical made now or replayed. Every graded answer has its reader call: one missing is an
    error."""
    rows = tables.get("grades.json")
    if not rows:
        return tables
    reads = {(c.generation, c.answer): trace_id(c.key) for c in calls if c.role == "read"}
    linked = {}
    for row in rows:
        slot = (row["generation"], row["answer"])
        found = reads.get(slot)
        if found is None:
            raise LookupError(f"grade of g{row['generation']} answer {row['answer']}: no reader call behind it")
        linked[slot] = found
    links = [{"generation": g, "answer": a, TRACE_COLUMN: tid} for (g, a), tid in linked.items()]
    return {**tables, TRACE_TABLE: links}
