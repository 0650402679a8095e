"""ATIF, the Agent Trajectory Interchange Format (harbor-framework/harbor,
``rfcs/0001-trajectory-format.md``): one trajectory a JSON file, validated by the ``atif``
package's own models (v1.8; earlier versions' documents are read by the same models).

Steps in order: a ``user`` step's message is the query (later ones are counted and left out), an
``agent`` step is an assistant turn with its ``tool_calls``, and its ``observation.results``
answer them by ``source_call_id``. ``system`` steps, results of no call, reasoning, subagent
trajectories and steps copied from a prior trajectory are counted and left out.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from atif import Trajectory
from pydantic import ValidationError

from washexp.errors import FixtureError
from washexp.sessions.reader import read_json
from washexp.sessions.session import Builder, Session


def sessions(path: Path) -> Iterator[Session]:
    raw = read_json(path)
    try:
        trajectory = Trajectory.model_validate(raw)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or None
        raise FixtureError(path, where, f"not an ATIF trajectory ({first['msg']})") from None
    yield trajectory_session(trajectory, str(path))


def _text(content: Any, b: Builder) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    texts = []
    for part in content:
        if part.type == "text":
            texts.append(part.text or "")
        else:
            b.drop(f"{part.type} content part")
    return "\n".join(texts)


def trajectory_session(trajectory: Trajectory, where: str) -> Session:
    b = Builder(where, "001")
    if trajectory.subagent_trajectories:
        b.drop("embedded subagent trajectory", len(trajectory.subagent_trajectories))
    for step in trajectory.steps:
        if step.is_copied_context:
            b.drop("step copied from a prior trajectory")
        elif step.source == "user":
            b.user(_text(step.message, b))
        elif step.source == "system":
            b.drop("system step")
        else:
            if step.reasoning_content:
                b.drop("reasoning content")
            calls = [(c.tool_call_id, c.function_name, c.arguments) for c in step.tool_calls or []]
            b.assistant(_text(step.message, b), calls)
            for result in step.observation.results if step.observation else []:
                if result.subagent_trajectory_ref:
                    b.drop("subagent trajectory reference")
                if result.source_call_id is None:
                    b.drop("observation of no tool call")
                else:
                    b.tool(result.source_call_id, _text(result.content, b))
    return b.finish()
