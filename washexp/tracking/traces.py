"""Every model call of a condition as an MLflow trace attached to its run (``tracking.traces``).

A :class:`ModelCall` is one call as the recorder answered it: the request's messages, the reply
(or the refusal for length), the endpoint's token counts, when it started and ended, whether it
was sent to the model (live) or answered from a recording (replayed), its recording key and,
once a price is set, its cost. The tracker writes a run's calls on its writer thread, just before
the run's rows and status, so a FINISHED run has its traces.

One trace per call and process: a call several conditions share (a summary used by every Top-N
arm of its task) is one trace, created under the first run that closes with it (its
``mlflow.sourceRun``) and linked to every other run that used it (MLflow's trace-to-run
association), so each run's Traces tab, and ``mlflow.search_traces(run_id=...)``, lists every
call the condition used. A trace id is fixed when a condition first names its call
(:meth:`TraceStore.trace_id`), so a grade row can name the trace of the answer it graded before
anything is written.

What a trace holds (MLflow's own keys, so the UI shows a chat): one ``CHAT_MODEL`` span whose
inputs are ``{"messages": [...]}`` and outputs a chat completion (``choices``, ``usage``), the
token usage (``mlflow.chat.tokenUsage``, and the trace's token columns), its latency (the span's
start and end), the cost (``mlflow.llm.cost`` and ``washexp.cost_usd``, only with a price) and
the attributes and tags ``washexp.recording_key``, ``washexp.replayed`` (``true``/``false``),
``washexp.role``, ``washexp.task``. Every text is masked (:mod:`washexp.masking`) before it is
written.

In a SQL store a run's traces are written as rows of MLflow's own models in one transaction
(the trace infos, tags, metadata, spans and run links): MLflow's client spends two sessions and
some 40 statements on each trace (start_trace, then log_spans), ~10 ms of CPU a call, which is
more than the 5 % of a panel's time a trace may cost. The rows are what those calls write
(``tests/test_traces.py`` writes one call both ways and compares them as MLflow reads them).
Through a tracking server (HTTP) the store's own ``start_trace``/``log_spans`` and
``link_traces_to_run`` calls write them.
"""

from __future__ import annotations

import base64
import getpass
import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from washexp.masking import MASK, secret_values

RECORDING_KEY = "washexp.recording_key"
REPLAYED = "washexp.replayed"
ROLE = "washexp.role"
TASK = "washexp.task"
COST = "washexp.cost_usd"
LATENCY = "washexp.latency_ms"
_PREVIEW = 1000  # MLflow OSS's request/response preview length
_METADATA = 250  # MLflow's limit on a trace's inputs/outputs metadata
_LINKS = 100  # MLflow links at most 100 traces to a run per call


@dataclass(frozen=True)
class ModelCall:
    """One model call as the recorder answered it (see the module doc)."""

    key: str
    """Its recording key (sha256 of the model name and the request)."""
    model: str
    role: str
    """``S``, ``Jev``, ``H``, ``read``, a plugin's role, ``wash <role>``."""
    task: str | None
    messages: tuple[dict[str, Any], ...]
    generation: int
    answer: int
    reply: str | None
    """The reply's text; None for a refusal (``error``)."""
    error: str | None
    """The endpoint's refusal for length (an over-window request), else None."""
    prompt_tokens: int | None
    completion_tokens: int | None
    finish_reason: str | None
    started_ns: int
    ended_ns: int
    replayed: bool
    cost_usd: float | None = None
    """What the call cost (None: no price set, or a replay, which costs nothing and is not priced)."""

    @classmethod
    def of(
        cls,
        record: dict[str, Any],
        started_ns: int,
        ended_ns: int,
        replayed: bool,
        task: str | None = None,
        cost_usd: float | None = None,
    ) -> ModelCall:
        """A call from its recording (``Recorder.load``), how this process got it and the task
        it was made for (a recording does not name it)."""
        request, response = record["request"], record.get("response") or {}
        return cls(
            key=record["key"],
            model=record.get("model", ""),
            role=record.get("role", ""),
            task=task,
            messages=tuple(request["messages"]),
            generation=int(request.get("generation", 0)),
            answer=int(request.get("answer", 0)),
            reply=response.get("text") if "over_window" not in record else None,
            error=record.get("over_window"),
            prompt_tokens=response.get("prompt_tokens"),
            completion_tokens=response.get("completion_tokens"),
            finish_reason=response.get("finish_reason"),
            started_ns=started_ns,
            ended_ns=max(ended_ns, started_ns),
            replayed=replayed,
            cost_usd=cost_usd,
        )

    @property
    def name(self) -> str:
        where = f" {self.task}" if self.task else ""
        answer = f" a{self.answer}" if self.role == "read" else ""
        return f"{self.role or 'call'}{where} g{self.generation}{answer}"


def calls_from(recorder, keys, task: str | None) -> tuple[ModelCall, ...]:
    """The calls behind ``keys`` as this process got them from ``recorder`` (its ``load`` and
    ``timing``; with a price, its ``cost_of`` for a live call). A key the recorder never answered
    in this process is an error: a condition names a call that did not happen here."""
    cost_of = getattr(recorder, "cost_of", None)  # the hook of washexp.models.cost, when it has one
    calls = []
    for key in dict.fromkeys(keys):
        record, timing = recorder.load(key), recorder.timing(key)
        if record is None or timing is None:
            raise LookupError(f"request {key}: the condition names a call this process did not answer")
        cost = cost_of(key) if cost_of is not None and not timing.replayed else None
        calls.append(ModelCall.of(record, timing.started_ns, timing.ended_ns, timing.replayed, task, cost))
    return tuple(calls)


def _b64(value: int, size: int) -> str:
    return base64.b64encode(value.to_bytes(size, "big")).decode()


def _preview(text: str) -> str:
    return text if len(text) <= _PREVIEW else text[: _PREVIEW - 3] + "..."


def _meta(text: str) -> str:
    return text if len(text) <= _METADATA else text[: _METADATA - 3] + "..."


def _last(messages, role: str) -> str:
    for m in reversed(messages):
        if m.get("role") == role and isinstance(m.get("content"), str):
            return m["content"]
    return json.dumps(list(messages), ensure_ascii=False)


@dataclass(frozen=True)
class _Built:
    """One call as MLflow stores a trace: its info's fields, tags, metadata and its one span."""

    trace_id: str
    timestamp_ms: int
    duration_ms: int
    state: str
    request_preview: str
    response_preview: str
    tags: dict[str, str]
    metadata: dict[str, str]
    token_usage: dict[str, int] | None
    cost: dict[str, float] | None
    span: dict[str, Any]


def _masker(values: list[str]):
    """:func:`washexp.masking.mask` with the secret values read once (a trace masks ten texts)."""

    def mask(text: str) -> str:
        for value in values:
            text = text.replace(value, MASK)
        return text

    return mask


def build(call: ModelCall, trace_id: str, experiment_id: str, run_id: str, secrets: list[str] | None = None) -> _Built:
    """The trace of ``call`` (masked: ``secrets``, default the environment's), in the form
    MLflow's client would store it."""
    mask = _masker(secret_values() if secrets is None else secrets)
    otel_trace = int(trace_id.removeprefix("tr-"), 16)
    span_id = uuid.uuid4().int >> 64 or 1
    inputs = {"messages": [dict(m) for m in call.messages]}
    usage = None
    if call.prompt_tokens is not None or call.completion_tokens is not None:
        usage = {"input_tokens": call.prompt_tokens or 0, "output_tokens": call.completion_tokens or 0}
        usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
    if call.error is None:
        choice = {"index": 0, "message": {"role": "assistant", "content": call.reply or ""}}
        outputs: dict[str, Any] = {"choices": [{**choice, "finish_reason": call.finish_reason}], "model": call.model}
        if usage is not None:
            outputs["usage"] = {
                "prompt_tokens": usage["input_tokens"],
                "completion_tokens": usage["output_tokens"],
                "total_tokens": usage["total_tokens"],
            }
    else:
        outputs = {"error": call.error}
    inputs_json = mask(json.dumps(inputs, ensure_ascii=False))
    outputs_json = mask(json.dumps(outputs, ensure_ascii=False))
    replayed = "true" if call.replayed else "false"
    attributes = {
        "mlflow.traceRequestId": json.dumps(trace_id),
        "mlflow.experimentId": json.dumps(experiment_id),
        "mlflow.spanType": json.dumps("CHAT_MODEL"),
        "mlflow.spanStartTimeNs": str(call.started_ns),
        "mlflow.spanInputs": inputs_json,
        "mlflow.spanOutputs": outputs_json,
        RECORDING_KEY: json.dumps(call.key),
        REPLAYED: replayed,
        ROLE: json.dumps(mask(call.role)),
        LATENCY: json.dumps(round((call.ended_ns - call.started_ns) / 1e6, 3)),
        "washexp.generation": json.dumps(call.generation),
        "washexp.answer": json.dumps(call.answer),
        "mlflow.llm.model": json.dumps(mask(call.model)),
    }
    if call.task:
        attributes[TASK] = json.dumps(mask(call.task))
    if usage is not None:
        attributes["mlflow.chat.tokenUsage"] = json.dumps(usage)
    cost = None
    if call.cost_usd is not None:
        cost = {"total_cost": float(call.cost_usd)}
        attributes["mlflow.llm.cost"] = json.dumps(cost)
        attributes[COST] = json.dumps(float(call.cost_usd))
    status = {"code": "STATUS_CODE_OK", "message": ""}
    if call.error is not None:
        status = {"code": "STATUS_CODE_ERROR", "message": mask(call.error)}
    span = {
        "trace_id": _b64(otel_trace, 16),
        "span_id": _b64(span_id, 8),
        "parent_span_id": None,
        "name": mask(call.name),
        "start_time_unix_nano": call.started_ns,
        "end_time_unix_nano": call.ended_ns,
        "events": [],
        "status": status,
        "attributes": attributes,
        "links": [],
    }
    tags = {
        "mlflow.traceName": span["name"],
        RECORDING_KEY: call.key,
        REPLAYED: replayed,
        ROLE: mask(call.role),
    }
    if call.task:
        tags[TASK] = mask(call.task)
    metadata = {
        "mlflow.sourceRun": run_id,
        "mlflow.trace_schema.version": "3",
        "mlflow.user": _user(),
        "mlflow.source.name": "washexp",
        "mlflow.source.type": "LOCAL",
        "mlflow.traceInputs": _meta(inputs_json),
        "mlflow.traceOutputs": _meta(outputs_json),
        "mlflow.trace.sizeBytes": str(len(inputs_json) + len(outputs_json)),
    }
    if usage is not None:
        metadata["mlflow.trace.tokenUsage"] = json.dumps(usage)
    if cost is not None:
        metadata["mlflow.trace.cost"] = json.dumps(cost)
    response = call.reply if call.error is None else call.error
    return _Built(
        trace_id=trace_id,
        timestamp_ms=call.started_ns // 1_000_000,
        duration_ms=(call.ended_ns - call.started_ns) // 1_000_000,
        state="OK" if call.error is None else "ERROR",
        request_preview=mask(_preview(_last(call.messages, "user"))),
        response_preview=mask(_preview(response or "")),
        tags=tags,
        metadata=metadata,
        token_usage=usage,
        cost=cost,
        span=span,
    )


_USER: list[str] = []


def _user() -> str:
    if not _USER:
        try:
            _USER.append(getpass.getuser())
        except (KeyError, OSError):  # no name for this uid (a container)
            _USER.append("unknown")
    return _USER[0]


class TraceStore:
    """The traces of one tracker's experiment: ids fixed on first ask (any thread), written on
    the tracker's writer thread (one at a time, in the order runs closed)."""

    def __init__(self, connect: Callable[[], tuple[Any, str]]):
        """``connect()``: MLflow's client and the experiment id, asked at the first write only (the
        tracker's store may still be setting up when this is built)."""
        self._connect = connect
        self._lock = threading.Lock()
        self._ids: dict[str, str] = {}  # recording key -> trace id, this process
        self._written: set[str] = set()  # trace ids stored (writer thread only)
        self._artifact_location: str | None = None

    def trace_id(self, key: str) -> str:
        """The id of the trace of the call behind ``key`` in this process (made on first ask)."""
        with self._lock:
            found = self._ids.get(key)
            if found is None:
                found = self._ids[key] = f"tr-{uuid.uuid4().hex}"
            return found

    def _open(self) -> None:
        self._client, self._experiment_id = self._connect()  # waits for the store's set-up, which imports MLflow:
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore  # importing it beside that races

        store = self._client._tracking_client.store
        self._sql = store if isinstance(store, SqlAlchemyStore) else None  # None: a tracking server

    def write(self, run_id: str, calls: tuple[ModelCall, ...]) -> None:
        """Store the traces of ``calls`` not yet stored, under ``run_id``; link the others to it."""
        if not hasattr(self, "_client"):
            self._open()
        new, linked, seen = [], [], set()
        for call in calls:
            tid = self.trace_id(call.key)
            if tid in seen:
                continue
            seen.add(tid)
            (linked if tid in self._written else new).append((tid, call))
        secrets = secret_values()
        built = [build(call, tid, self._experiment_id, run_id, secrets) for tid, call in new]
        if self._sql is not None:
            self._write_sql(run_id, built, [tid for tid, _ in linked])
        else:
            self._write_client(run_id, built, [tid for tid, _ in linked])
        self._written.update(b.trace_id for b in built)

    def _location(self) -> str:
        if self._artifact_location is None:
            self._artifact_location = self._client.get_experiment(self._experiment_id).artifact_location
        return self._artifact_location

    def _write_sql(self, run_id: str, built: list[_Built], linked: list[str]) -> None:
        from mlflow.entities.entity_type import EntityAssociationType
        from mlflow.store.tracking.dbmodels.models import (
            SqlEntityAssociation,
            SqlSpan,
            SqlTraceInfo,
            SqlTraceMetadata,
            SqlTraceTag,
        )
        from mlflow.utils.uri import append_to_uri_path
        from sqlalchemy import insert

        experiment = int(self._experiment_id)
        infos, tags, metadata, spans, links = [], [], [], [], []
        now = int(time.time() * 1000)
        for b in built:
            info = {
                "request_id": b.trace_id,
                "experiment_id": experiment,
                "timestamp_ms": b.timestamp_ms,
                "execution_time_ms": b.duration_ms,
                "status": b.state,
                "client_request_id": None,
                "request_preview": b.request_preview,
                "response_preview": b.response_preview,
                "trace_name": b.tags["mlflow.traceName"],
                "db_payload_generation": 1,
            }
            usage = b.token_usage or {}
            for column in ("input_tokens", "output_tokens", "total_tokens"):
                info[column] = usage.get(column)
            for column in ("input_cost", "output_cost", "total_cost"):
                info[column] = (b.cost or {}).get(column)
            infos.append(info)
            location = append_to_uri_path(self._location(), "traces", b.trace_id, "artifacts")
            trace_tags = {k: v for k, v in b.tags.items() if k != "mlflow.traceName"}
            trace_tags |= {"mlflow.artifactLocation": location, "mlflow.trace.spansLocation": "TRACKING_STORE"}
            tags += [{"request_id": b.trace_id, "key": k, "value": v} for k, v in trace_tags.items()]
            meta = {k: v for k, v in b.metadata.items() if k not in ("mlflow.trace.tokenUsage", "mlflow.trace.cost")}
            meta["mlflow.trace.infoFinalized"] = "true"
            metadata += [{"request_id": b.trace_id, "key": k, "value": v} for k, v in sorted(meta.items())]
            s = b.span
            spans.append(
                {
                    "trace_id": b.trace_id,
                    "experiment_id": experiment,
                    "span_id": s["span_id"],
                    "parent_span_id": None,
                    "name": s["name"],
                    "type": "CHAT_MODEL",
                    "status": s["status"]["code"].removeprefix("STATUS_CODE_"),
                    "start_time_unix_nano": s["start_time_unix_nano"],
                    "end_time_unix_nano": s["end_time_unix_nano"],
                    "content": json.dumps(s, ensure_ascii=False),
                    "input_cost": None,
                    "output_cost": None,
                    "total_cost": (b.cost or {}).get("total_cost"),
                    "model_name": json.loads(s["attributes"]["mlflow.llm.model"])[:500] or None,
                    "model_provider": None,
                }
            )
        for tid in linked:
            links.append(
                {
                    "association_id": uuid.uuid4().hex,
                    "source_type": EntityAssociationType.TRACE,
                    "source_id": tid,
                    "destination_type": EntityAssociationType.RUN,
                    "destination_id": run_id,
                    "created_time": now,
                }
            )
        with self._sql.ManagedSessionMaker() as session:
            for model, rows in (
                (SqlTraceInfo, infos),
                (SqlTraceTag, tags),
                (SqlTraceMetadata, metadata),
                (SqlSpan, spans),
                (SqlEntityAssociation, links),
            ):
                if rows:
                    session.execute(insert(model.__table__), rows)

    def _write_client(self, run_id: str, built: list[_Built], linked: list[str]) -> None:
        """Through a tracking server: the store's own trace calls (one per trace, then the spans)."""
        from mlflow.entities import Span, TraceInfo, TraceLocation, TraceState

        store = self._client._tracking_client.store
        for b in built:
            metadata = dict(b.metadata)
            store.start_trace(
                TraceInfo(
                    trace_id=b.trace_id,
                    trace_location=TraceLocation.from_experiment_id(self._experiment_id),
                    request_time=b.timestamp_ms,
                    state=TraceState(b.state),
                    request_preview=b.request_preview,
                    response_preview=b.response_preview,
                    execution_duration=b.duration_ms,
                    trace_metadata=metadata,
                    tags={**b.tags, "mlflow.trace.spansLocation": "TRACKING_STORE"},
                )
            )
        if built:
            store.log_spans(self._experiment_id, [Span.from_dict(b.span) for b in built])
        for i in range(0, len(linked), _LINKS):
            self._client.link_traces_to_run(linked[i : i + _LINKS], run_id)
