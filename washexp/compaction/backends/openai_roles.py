"""The ``openai`` backend (``model=openai``): every role played by a served chat model.

- S: ``prompts/summarize.txt``, the task and every unit -> summary text;
- Jev: ``prompts/jev.txt``, the task and every unit (nothing else) -> ``{"scores": [...]}``
  (asked as structured output with the reader's ``model.structured_output``), read as
  ``compaction.replies`` reads an internal role (the object, bare or in one code fence), then
  checked strictly: anything but one object with exactly one number from 0 to 100 per unit is a
  :class:`ReplyError` (that generation's Top-N >= 1 contexts fail; no fallback ranking);
- H: the checkpoint writer sends ``CheckpointRequest.prompt`` as one user message (native), and
  ``hermes`` runs hermes-agent's method as installed with its call routed here
  (``compaction.h_hermes``); both are capped at ``model.max_tokens``;
- S, H and Jev are the study's independent generations: sampled at
  ``model.generation_temperature``; the reader answers at ``model.temperature`` (0, the study's
  "temperature zero"); ``prompt_tokens`` is the endpoint's own count;
- the meter: the endpoint's tokenize route, else Qwen3's chat template (``compaction.meter``).

S, Jev and H requests are built from the task's query and units (or turns) only: the follow-up
and the expected values never reach them. Every call goes through the recorder.
"""

from __future__ import annotations

import dataclasses
import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from washexp.compaction.backends.answer_format import ranking_format, response_format
from washexp.compaction.backends.replies import NOT_JSON, role_json
from washexp.compaction.backends.roles import Ranking, RankJob, ReadJob, ReplyError, Roles, SummaryJob
from washexp.compaction.inputs.context import prompt, prompt_digests
from washexp.compaction.inputs.meter import EndpointMeter, Meter, local_meter
from washexp.compaction.methods import h_hermes
from washexp.models.base import ChatRequest, ChatResponse
from washexp.models.endpoint import open_recorder
from washexp.models.openai_client import api_key
from washexp.models.recorder import Recorder

log = logging.getLogger("washexp")


def render_units(units) -> str:
    return "\n\n".join(f"### Unit {i}\n{u.render()}" for i, u in enumerate(units, start=1))


def _fill(template: str, **values) -> str:
    for name, value in values.items():
        template = template.replace("{" + name + "}", str(value))
    return template


def parse_scores(text: str, n: int) -> list[float]:
    """Jev's reply: exactly ``{"scores": [n numbers in 0..100]}`` (bare or in one code fence),
    or a ValueError saying why."""
    data = role_json(text)
    if data is NOT_JSON:
        raise ValueError(f"Jev reply is not JSON (nor one fenced JSON block): {text[:80]!r}")
    if not isinstance(data, dict) or set(data) != {"scores"} or not isinstance(data["scores"], list):
        raise ValueError(f'Jev reply is not {{"scores": [...]}}: {text[:80]!r}')
    scores = data["scores"]
    if len(scores) != n:
        raise ValueError(f"Jev reply has {len(scores)} scores for {n} units")
    for i, s in enumerate(scores, start=1):
        if isinstance(s, bool) or not isinstance(s, int | float) or not 0 <= s <= 100:
            raise ValueError(f"Jev score of unit {i} is {s!r}, not a number from 0 to 100")
    return [float(s) for s in scores]


def recorder_for(model, endpoint, root: Path, gone=None) -> Recorder:
    """The recorder (and client) of one sweep: its call/replay counts cover the sweep and its
    concurrency bound holds across arms (``gone``: see ``OpenAIModel``)."""
    return open_recorder(model, endpoint, root, gone)


def meter_for(model, endpoint, rec: Recorder) -> Meter:
    """The endpoint's tokenize route (probed on first use), recorded beside the chat recordings."""
    kwargs = dict((model.extra_body or {}).get("chat_template_kwargs") or {})
    if not endpoint.base_url and endpoint.replay != "strict":
        return local_meter(kwargs.get("enable_thinking"))
    key = api_key(endpoint.base_url, endpoint.api_key_env) if endpoint.base_url else ""
    return EndpointMeter(endpoint.base_url or "", key, model.name, kwargs, rec.dir, endpoint.replay)


def openai_backend(model, endpoint, root: Path, gone=None) -> Roles:
    rec = recorder_for(model, endpoint, root, gone)
    extra = dict(model.extra_body or {})
    sampled = model.generation_temperature

    def request(messages, generation: int, answer: int = 0, temperature=sampled, repeat: int = 0) -> ChatRequest:
        # One output cap for every call (Hermes' own request sends none).
        return ChatRequest(tuple(messages), temperature, model.max_tokens, extra, generation, answer, repeat)

    def user(text: str) -> list[dict]:
        return [{"role": "user", "content": text}]

    def summarize(job: SummaryJob) -> ChatResponse:
        text = _fill(
            prompt("summarize"),
            query=job.query,
            count=len(job.units),
            allowance=job.allowance,
            units=render_units(job.units),
        )
        reply = rec.chat(request(user(text), job.generation), job.task_id, "S")
        if not reply.text.strip():
            raise ReplyError(f"S returned an empty summary (task {job.task_id}, g{job.generation})", reply.key)
        return reply

    def rank(job: RankJob) -> Ranking:
        text = _fill(prompt("jev"), query=job.query, count=len(job.units), units=render_units(job.units))
        req = request(user(text), job.generation)
        req = dataclasses.replace(req, response_format=ranking_format(model.structured_output, len(job.units)))
        reply = rec.chat(req, job.task_id, "Jev")
        try:
            return Ranking(parse_scores(reply.text.strip(), len(job.units)), reply.key)
        except ValueError as err:
            raise ReplyError(f"{err} (task {job.task_id}, g{job.generation})", reply.key) from None

    def checkpoint_writer(task_id: str, generation: int):
        def write(req) -> ChatResponse:
            return rec.chat(request(user(req.prompt), generation), task_id, "H")

        return write

    def hermes_checkpoint(task_id: str, generation: int, turns: list[dict], focus: str, allowance: int):
        def chat(messages: list[dict], _hermes_max_tokens: int | None) -> ChatResponse:
            return rec.chat(request(messages, generation), task_id, "H")

        return h_hermes.generate_checkpoint(turns, focus, allowance, chat, model.name)

    def chat(task_id: str, generation: int, messages: list[dict], role: str) -> ChatResponse:
        return rec.chat(request(messages, generation), task_id, role)

    def read(job: ReadJob) -> ChatResponse:
        req = request(job.messages, job.generation, job.answer, model.temperature, job.repeat)
        req = dataclasses.replace(req, response_format=response_format(model.structured_output, job.fields))
        return rec.chat(req, job.task_id, "read")

    spec = {
        "backend": "openai",
        "model": model.name,
        "tier": model.tier,
        "platform": model.platform,
        "temperature": model.temperature,
        "generation_temperature": sampled,
        "max_tokens": model.max_tokens,
        "extra_body": extra,
        **({"structured_output": model.structured_output} if model.structured_output != "off" else {}),
    }
    prompts = prompt_digests()
    parts = {
        "summarize": {"prompt": prompts["summarize"]},
        # the ranker asks for its shape with the reader (a key only then, so earlier identities stand)
        "rank": {"prompt": prompts["jev"], **({"structured": True} if model.structured_output != "off" else {})},
        "checkpoint": "chat",  # h_native's own prompt: its code is in the code digest
        "hermes": {"hermes_agent": h_hermes.version(), "compressor_sha256": h_hermes.source_sha256()},
        "read": {"reader": "chat", "prompts": {k: prompts[k] for k in ("reader_system", "follow_up")}},
    }
    return Roles(
        spec=spec,
        parts=parts,
        summarize=summarize,
        rank=rank,
        checkpoint_writer=checkpoint_writer,
        read=read,
        concurrency=endpoint.max_concurrency,
        recording=rec.artifact,
        chat=chat,
        hermes_checkpoint=hermes_checkpoint if h_hermes.version() else None,
        meter=meter_for(model, endpoint, rec),
        calls=lambda: f"{rec.calls} calls, {rec.hits} replayed",
        # Twice the endpoint's slots: a slot whose thread is turning a reply around (parsing it,
        # recording it) goes at once to a call already waiting; the client still sends at most
        # max_concurrency at a time.
        pool=ThreadPoolExecutor(2 * max(1, endpoint.max_concurrency), thread_name_prefix="washexp-call"),
        stop=rec.close,
    )
