"""Every model call of a condition as an MLflow trace attached to its run (``tracking.traces``).

A :class:`ModelCall` is one call as the recorder answered it: the request's messages, the reply
(or the refusal for length), the endpoint's token counts, when it started and ended, whether it
was sent to the model (live) or answered from a recording (replayed), its recording key and,
once a price is set, its cost. The tracker writes a run's calls on its writer thread, before the
run's files, rows and status, so a FINISHED run has its traces.

The calls of one role and task a run brings are one trace (:func:`group_of`: a condition's
reader calls, the summaries of its task, a ranking), one span per call, created under the run
(its ``mlflow.sourceRun``); a call is stored once per process. A call several conditions share
(a summary used by every Top-N arm of its task) stays in the trace it was first stored in, and
that trace is linked to every other run that used it (``link_traces_to_run``), so each run's
Traces tab, and ``mlflow.search_traces(run_id=...)``, holds every call the condition used. A
trace per call cost MLflow's SQL store a ``start_trace`` and a ``log_spans`` each (about 28 ms of
CPU); grouped, the panel's 908 calls are 172 traces.

Traces are written through MLflow's public tracing API only (``mlflow.start_span_no_context``
and the span's ``end``, ``link_traces_to_run``, ``mlflow.flush_trace_async_logging``, all in MLflow
3.13 to 3.17), the same calls for a
SQLite store, any other database and a tracking server. MLflow names a trace when it is written,
but a grade row names the trace of the answer it graded before anything is written: so
:meth:`TraceStore.trace_id` hands out a placeholder (``washexp-trace-<hex>``) that the writer
replaces by the stored trace's id in the run's tables (:meth:`TraceStore.stored_ids`) before they
are written. MLflow's exporter only logs a trace it failed to store; the store is asked after
each run's traces (``search_traces``), and a trace it does not hold fails the write (a run is
never FINISHED without its traces).

What a trace holds (MLflow's own keys, so the UI shows a chat): a ``CHAIN`` root span named by
the role and task (``read payment``) whose inputs name its calls and whose status is ERROR when
one was refused; under it one ``CHAT_MODEL`` span per call, named ``read payment g2 a1``, whose
inputs are ``{"messages": [...]}`` and outputs a chat completion (``choices``, ``usage``), the
token usage (``mlflow.chat.tokenUsage``, which MLflow sums into the trace's token usage), its
latency (the span's start and end), the cost (``mlflow.llm.cost`` and ``washexp.cost_usd``, only
with a price) and the attributes ``washexp.recording_key``, ``washexp.replayed``,
``washexp.role``, ``washexp.task``, ``washexp.generation``, ``washexp.answer``. The trace's tags
are ``washexp.role``, ``washexp.task`` and ``washexp.replayed`` (``true`` when every call in it
was answered from a recording). Every text is masked (:mod:`washexp.masking`) before it is
handed to MLflow.
"""

from __future__ import annotations

import json
import threading
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


def _masker(values: list[str]):
    """:func:`washexp.masking.mask` with the secret values read once (a trace masks ten texts)."""

    def mask(text: str) -> str:
        for value in values:
            text = text.replace(value, MASK)
        return text

    return mask


@dataclass(frozen=True)
class SpanArgs:
    """One call as the arguments of its span's start and end (masked)."""

    name: str
    inputs: dict[str, Any]
    outputs: dict[str, Any]
    attributes: dict[str, Any]
    error: str | None
    started_ns: int
    ended_ns: int


def span_args(call: ModelCall, secrets: list[str] | None = None) -> SpanArgs:
    """The span of ``call`` (masked: ``secrets``, default the environment's) as MLflow is asked
    to write it."""
    mask = _masker(secret_values() if secrets is None else secrets)
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
    # masked as JSON text, so every string inside is (a secret may sit in any message)
    inputs = json.loads(mask(json.dumps({"messages": [dict(m) for m in call.messages]}, ensure_ascii=False)))
    outputs = json.loads(mask(json.dumps(outputs, ensure_ascii=False)))
    attributes: dict[str, Any] = {
        RECORDING_KEY: call.key,
        REPLAYED: call.replayed,
        ROLE: mask(call.role),
        LATENCY: round((call.ended_ns - call.started_ns) / 1e6, 3),
        "washexp.generation": call.generation,
        "washexp.answer": call.answer,
        "mlflow.llm.model": mask(call.model),
    }
    if call.task:
        attributes[TASK] = mask(call.task)
    if usage is not None:
        attributes["mlflow.chat.tokenUsage"] = usage
    if call.cost_usd is not None:
        attributes["mlflow.llm.cost"] = {"total_cost": float(call.cost_usd)}
        attributes[COST] = float(call.cost_usd)
    return SpanArgs(
        name=mask(call.name),
        inputs=inputs,
        outputs=outputs,
        attributes=attributes,
        error=None if call.error is None else mask(call.error),
        started_ns=call.started_ns,
        ended_ns=call.ended_ns,
    )


PLACEHOLDER = "washexp-trace-"
"""What :meth:`TraceStore.trace_id` hands out before MLflow names the trace."""


class TraceStore:
    """The traces of one tracker's experiment: placeholders handed out on first ask (any
    thread), traces written on the tracker's writer thread (one run at a time, in the order runs
    closed)."""

    def __init__(self, connect: Callable[[], tuple[Any, str]]):
        """``connect()``: MLflow's client and the experiment id, asked at the first write only (the
        tracker's store may still be setting up when this is built)."""
        self._connect = connect
        self._lock = threading.Lock()
        self._ids: dict[str, str] = {}  # recording key -> placeholder, this process
        self._stored: dict[str, str] = {}  # placeholder -> MLflow's trace id (writer thread only)

    def trace_id(self, key: str) -> str:
        """The placeholder naming the trace of the call behind ``key`` in this process (made on
        first ask): :meth:`stored_ids` maps it to the stored trace once written."""
        with self._lock:
            found = self._ids.get(key)
            if found is None:
                found = self._ids[key] = f"{PLACEHOLDER}{uuid.uuid4().hex}"
            return found

    def stored_ids(self, calls: tuple[ModelCall, ...]) -> dict[str, str]:
        """Placeholder -> the id MLflow gave the trace, for the traces of ``calls`` written so
        far: only a run's own (a sweep's every trace, replaced in every run's tables, made the
        writing quadratic: 908 requests took 117 s of CPU)."""
        with self._lock:
            mine = {self._ids[c.key] for c in calls if c.key in self._ids}
        return {p: self._stored[p] for p in mine if p in self._stored}

    def stored(self, key: str) -> str | None:
        """The id MLflow gave the trace of the call behind ``key``, once written."""
        return self._stored.get(self._ids.get(key, ""))

    def write(self, run_id: str, calls: tuple[ModelCall, ...]) -> None:
        """Store the calls of ``calls`` not yet stored under ``run_id``, one trace per role and
        task (:func:`group_of`); link the traces holding the others to it. Raises when the store
        does not hold them all afterwards."""
        import mlflow

        client, experiment_id = self._connect()
        groups: dict[tuple[str, str | None], list[tuple[str, ModelCall]]] = {}
        linked: dict[str, None] = {}  # ordered, each once
        seen: set[str] = set()
        for call in calls:
            placeholder = self.trace_id(call.key)
            if placeholder in seen:
                continue
            seen.add(placeholder)
            stored = self._stored.get(placeholder)
            if stored is None:
                groups.setdefault(group_of(call), []).append((placeholder, call))
            else:
                linked[stored] = None
        secrets = secret_values()
        written = set()
        for group in groups.values():
            stored_id = _write_group(run_id, experiment_id, [call for _, call in group], secrets)
            written.add(stored_id)
            for placeholder, _ in group:
                self._stored[placeholder] = stored_id
        if written:
            mlflow.flush_trace_async_logging()  # stored before they are linked or looked for
        others = list(linked)  # each written under an earlier run: never one of this run's own
        for i in range(0, len(others), _LINKS):
            client.link_traces_to_run(others[i : i + _LINKS], run_id)
        self._check(client, experiment_id, run_id, written | linked.keys())

    @staticmethod
    def _check(client, experiment_id: str, run_id: str, expected: set[str]) -> None:
        """Fail closed: MLflow's exporter logs a trace it could not store and goes on."""
        if not expected:
            return
        held: set[str] = set()
        token = None
        while True:
            page = client.search_traces(
                locations=[experiment_id], run_id=run_id, include_spans=False, max_results=500, page_token=token
            )
            held.update(t.info.trace_id for t in page)
            token = page.token
            if not token or expected <= held:
                break
        missing = expected - held
        if missing:
            raise TraceWriteError(f"run {run_id}: MLflow did not store {len(missing)} of its {len(expected)} traces")


def group_of(call: ModelCall) -> tuple[str, str | None]:
    """The trace a call goes in: its role and task (a condition's reader calls, the summaries of a
    task all its arms share, a ranking)."""
    return call.role, call.task


def _write_group(run_id: str, experiment_id: str, calls: list[ModelCall], secrets: list[str]) -> str:
    """One trace under ``run_id``: a root span for the group, a ``CHAT_MODEL`` span per call.
    Returns the id MLflow gave it."""
    import mlflow
    from mlflow.entities import SpanStatus, SpanStatusCode

    spans = [span_args(call, secrets) for call in calls]
    first, mask = calls[0], _masker(secrets)
    refused = sum(a.error is not None for a in spans)
    tags = {ROLE: mask(first.role), REPLAYED: "true" if all(c.replayed for c in calls) else "false"}
    if first.task:
        tags[TASK] = mask(first.task)
    # what MlflowClient.start_trace(run_id=...) does from MLflow 3.14; 3.13 has no run_id there
    root = mlflow.start_span_no_context(
        mask(" ".join(part for part in (first.role or "call", first.task) if part)),
        span_type="CHAIN",
        inputs={"calls": [a.name for a in spans]},
        tags=tags,
        metadata={"mlflow.sourceRun": run_id},
        experiment_id=experiment_id,
        start_time_ns=min(a.started_ns for a in spans),
    )
    for args in spans:
        span = mlflow.start_span_no_context(
            args.name,
            span_type="CHAT_MODEL",
            parent_span=root,
            inputs=args.inputs,
            attributes=args.attributes,
            start_time_ns=args.started_ns,
        )
        status = SpanStatus(SpanStatusCode.ERROR, args.error) if args.error is not None else "OK"
        span.end(outputs=args.outputs, status=status, end_time_ns=args.ended_ns)
    status = SpanStatus(SpanStatusCode.ERROR, f"{refused} refused") if refused else "OK"
    root.end(
        outputs={"answered": len(spans) - refused, "refused": refused},
        status=status,
        end_time_ns=max(a.ended_ns for a in spans),
    )
    return root.trace_id


class TraceWriteError(OSError):
    """The store did not keep a trace it was handed (an :class:`OSError`: the tracker reports it
    as the store failing mid-run)."""
