"""The ``openai`` backend (``model=openai``): every role played by a served chat model.

- S: ``prompts/summarize.txt``, the task and every unit -> summary text;
- Jev: ``prompts/jev.txt``, the task and every unit (nothing else) -> ``{"scores": [...]}``,
  parsed strictly: anything but one JSON object with exactly one number from 0 to 100 per unit
  is a ``ValueError`` (the condition is recorded as failed; there is no fallback ranking);
- H: the checkpoint writer sends ``CheckpointRequest.prompt`` as one user message (native), and
  ``hermes`` runs the real Hermes method with its call routed here (``compaction.hermes_real``);
- the reader: the context messages as they are, two answers per context at the config's
  temperature; ``prompt_tokens`` is the endpoint's own count.

S, Jev and H requests are built from the task's query and units (or turns) only: the follow-up
and the expected values never reach them. Every call goes through the recorder.
"""

from __future__ import annotations

import json
import logging
import threading

from washexp import PACKAGE_DIR
from washexp.compaction import hermes_real
from washexp.compaction.context import prompt
from washexp.hashing import sha256_bytes
from washexp.models.base import ChatRequest
from washexp.models.openai_backend import OpenAIModel
from washexp.models.recorder import Recorder
from washexp.roles import BACKENDS, RankJob, ReadJob, Reply, Roles, SummaryJob

log = logging.getLogger("washexp")

PROMPTS = ("summarize", "jev", "reader_system", "follow_up")
_recorders: dict[tuple, Recorder] = {}
_recorders_lock = threading.Lock()


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


def recorder_for(model) -> Recorder:
    """One recorder (and client) per process and endpoint settings, shared by every arm, so
    its call/replay counts cover a whole sweep and its concurrency bound holds across arms."""
    endpoint = (
        model.name,
        model.base_url,
        model.api_key_env,
        model.timeout_s,
        model.max_retries,
        model.max_concurrency,
    )
    key = (*endpoint, model.recordings, model.replay)
    with _recorders_lock:
        if key not in _recorders:
            client = OpenAIModel(*endpoint) if model.replay != "strict" else None  # strict never calls out
            _recorders[key] = Recorder(client, model.name, model.recordings, model.replay)
        return _recorders[key]


@BACKENDS.register("openai")
def openai_backend(model) -> Roles:
    rec = recorder_for(model)
    extra = dict(model.extra_body or {})

    def request(messages, generation: int, answer: int = 0, max_tokens=model.max_tokens) -> ChatRequest:
        return ChatRequest(tuple(messages), model.temperature, max_tokens, extra, generation, answer)

    def user(text: str) -> list[dict]:
        return [{"role": "user", "content": text}]

    def summarize(job: SummaryJob) -> str:
        text = _fill(
            prompt("summarize"),
            query=job.query,
            count=len(job.units),
            allowance=job.allowance,
            units=render_units(job.units),
        )
        body = rec.chat(request(user(text), job.generation), job.task_id, "S").text.strip()
        if not body:
            raise ValueError(f"S returned an empty summary (task {job.task_id}, g{job.generation})")
        return body

    def rank(job: RankJob) -> list[float]:
        text = _fill(prompt("jev"), query=job.query, count=len(job.units), units=render_units(job.units))
        reply = rec.chat(request(user(text), job.generation), job.task_id, "Jev").text
        try:
            return parse_scores(reply.strip(), len(job.units))
        except ValueError as err:
            raise ValueError(f"{err} (task {job.task_id}, g{job.generation})") from None

    def checkpoint_writer(task_id: str, generation: int):
        def write(req) -> str:
            return rec.chat(request(user(req.prompt), generation), task_id, "H").text

        return write

    def hermes_checkpoint(task_id: str, generation: int, turns: list[dict], focus: str, allowance: int):
        def chat(messages: list[dict], max_tokens: int | None) -> str:
            return rec.chat(request(messages, generation, max_tokens=max_tokens), task_id, "H").text

        return hermes_real.generate_checkpoint(turns, focus, allowance, chat, model.name)

    def read(job: ReadJob) -> Reply:
        response = rec.chat(request(job.messages, job.generation, job.answer), job.task_id, "read")
        return Reply(response.text, response.prompt_tokens)

    def records(task_id: str, method: str, contexts) -> dict[str, dict]:
        """The requests behind one condition: S and Jev (sizes use them for every arm), H for H,
        and the reader calls whose messages are one of ``contexts``."""
        wanted = {tuple(json.dumps(m, sort_keys=True) for m in c) for c in contexts}
        out = {}
        for key, rec_ in rec.records(task_id).items():
            role = rec_["role"]
            if (
                role in ("S", "Jev")
                or (role == "H" and method == "H")
                or (
                    role == "read"
                    and tuple(json.dumps(m, sort_keys=True) for m in rec_["request"]["messages"]) in wanted
                )
            ):
                out[key] = rec_
        return out

    spec = {
        "backend": "openai",
        "model": model.name,
        "tier": model.tier,
        "platform": model.platform,
        "temperature": model.temperature,
        "max_tokens": model.max_tokens,
        "extra_body": extra,
        "reader": "chat",
        "hermes_agent": hermes_real.version(),
        "prompts": {p: sha256_bytes((PACKAGE_DIR / "prompts" / f"{p}.txt").read_bytes()) for p in PROMPTS},
    }
    return Roles(
        spec=spec,
        summarize=summarize,
        rank=rank,
        checkpoint_writer=checkpoint_writer,
        read=read,
        concurrency=model.max_concurrency,
        records=records,
        hermes_checkpoint=hermes_checkpoint if hermes_real.version() else None,
        calls=lambda: f"{rec.calls} calls, {rec.hits} replayed",
    )
