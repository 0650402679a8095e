"""The ``openai`` backend (``model=openai``): every role played by a served chat model.

- S: ``prompts/summarize.txt``, the task and every unit -> summary text;
- Jev: ``prompts/jev.txt``, the task and every unit (nothing else) -> ``{"scores": [...]}``,
  parsed strictly: anything but one JSON object with exactly one number from 0 to 100 per unit
  is a ``ValueError`` (the condition is recorded as failed; there is no fallback ranking);
- H: the checkpoint writer sends ``CheckpointRequest.prompt`` as one user message (native), and
  ``hermes`` runs the real Hermes method with its call routed here (``compaction.h_hermes``);
- the reader: the context messages as they are, two answers per context at the config's
  temperature; ``prompt_tokens`` is the endpoint's own count.

S, Jev and H requests are built from the task's query and units (or turns) only: the follow-up
and the expected values never reach them. Every call goes through the recorder.
"""

from __future__ import annotations

import json
import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from washexp.compaction import h_hermes
from washexp.compaction.context import prompt, prompt_digests
from washexp.compaction.roles import Ranking, RankJob, ReadJob, Roles, SummaryJob
from washexp.models.base import ChatRequest, ChatResponse
from washexp.models.openai_client import OpenAIModel
from washexp.models.recorder import Recorder

log = logging.getLogger("washexp")


def render_units(units) -> str:
    return "\n\n".join(f"### Unit {i}\n{u.render()}" for i, u in enumerate(units, start=1))


def _fill(template: str, **values) -> str:
    for name, value in values.items():
        template = template.replace("{" + name + "}", str(value))
    return template


def parse_scores(text: str, n: int) -> list[float]:
    """Jev's reply: exactly ``{"scores": [n numbers in 0..100]}``, or a ValueError saying why."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"Jev reply is not JSON ({err.msg}): {text[:80]!r}") from None
    if not isinstance(data, dict) or set(data) != {"scores"} or not isinstance(data["scores"], list):
        raise ValueError(f'Jev reply is not {{"scores": [...]}}: {text[:80]!r}')
    scores = data["scores"]
    if len(scores) != n:
        raise ValueError(f"Jev reply has {len(scores)} scores for {n} units")
    for i, s in enumerate(scores, start=1):
        if isinstance(s, bool) or not isinstance(s, int | float) or not 0 <= s <= 100:
            raise ValueError(f"Jev score of unit {i} is {s!r}, not a number from 0 to 100")
    return [float(s) for s in scores]


def recorder_for(model, endpoint, root: Path) -> Recorder:
    """The recorder (and client) of one sweep: its call/replay counts cover the sweep and its
    concurrency bound holds across arms."""
    directory = Path(endpoint.recordings) if endpoint.recordings else root / "mlruns" / "recordings"
    if not directory.is_absolute():
        directory = root / directory
    client = None
    if endpoint.replay != "strict":  # strict never calls out
        client = OpenAIModel(
            model.name,
            endpoint.base_url,
            endpoint.api_key_env,
            endpoint.timeout_s,
            endpoint.max_retries,
            endpoint.max_concurrency,
        )
    return Recorder(client, model.name, directory, endpoint.replay)


def openai_backend(model, endpoint, root: Path) -> Roles:
    rec = recorder_for(model, endpoint, root)
    extra = dict(model.extra_body or {})

    def request(messages, generation: int, answer: int = 0, max_tokens=model.max_tokens) -> ChatRequest:
        return ChatRequest(tuple(messages), model.temperature, max_tokens, extra, generation, answer)

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
            raise ValueError(f"S returned an empty summary (task {job.task_id}, g{job.generation})")
        return reply

    def rank(job: RankJob) -> Ranking:
        text = _fill(prompt("jev"), query=job.query, count=len(job.units), units=render_units(job.units))
        reply = rec.chat(request(user(text), job.generation), job.task_id, "Jev")
        try:
            return Ranking(parse_scores(reply.text.strip(), len(job.units)), reply.key)
        except ValueError as err:
            raise ValueError(f"{err} (task {job.task_id}, g{job.generation})") from None

    def checkpoint_writer(task_id: str, generation: int):
        def write(req) -> ChatResponse:
            return rec.chat(request(user(req.prompt), generation), task_id, "H")

        return write

    def hermes_checkpoint(task_id: str, generation: int, turns: list[dict], focus: str, allowance: int):
        def chat(messages: list[dict], max_tokens: int | None) -> ChatResponse:
            return rec.chat(request(messages, generation, max_tokens=max_tokens), task_id, "H")

        return h_hermes.generate_checkpoint(turns, focus, allowance, chat, model.name)

    def read(job: ReadJob) -> ChatResponse:
        return rec.chat(request(job.messages, job.generation, job.answer), job.task_id, "read")

    spec = {
        "backend": "openai",
        "model": model.name,
        "tier": model.tier,
        "platform": model.platform,
        "temperature": model.temperature,
        "max_tokens": model.max_tokens,
        "extra_body": extra,
        "reader": "chat",
        "hermes_agent": h_hermes.version(),
        "prompts": prompt_digests(),
    }
    return Roles(
        spec=spec,
        summarize=summarize,
        rank=rank,
        checkpoint_writer=checkpoint_writer,
        read=read,
        concurrency=endpoint.max_concurrency,
        recording=rec.load,
        hermes_checkpoint=hermes_checkpoint if h_hermes.version() else None,
        calls=lambda: f"{rec.calls} calls, {rec.hits} replayed",
        pool=ThreadPoolExecutor(max(1, endpoint.max_concurrency), thread_name_prefix="washexp-call"),
    )
