"""Context assembly: the complete input a reader receives, in the OpenAI wire shape.

Every context keeps the same system prompt, the same original task and the same follow-up;
only the middle differs:

- Full: the collection history (tool calls and results), the final report excluded;
- closed book (``method=none``): nothing: the system prompt, the task and the follow-up alone;
- fused: one ``Summary:`` carrier holding the summary body (S or H) and, for Top N > 0, the
  selected units rendered whole, in source order.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path

from washexp.compaction.inputs.fixtures import Task
from washexp.hashing import sha256_bytes
from washexp.tokens import count, count_chat

PROMPTS = Path(__file__).resolve().parents[1] / "prompts"
"""The family's prompt files: their sha256 is part of every condition's identity."""


@cache
def prompt(name: str) -> str:
    return (PROMPTS / f"{name}.txt").read_text(encoding="utf-8").strip()


@cache
def prompt_digests() -> dict[str, str]:
    """name -> sha256 of every prompt file (a changed prompt is a new condition)."""
    return {p.stem: sha256_bytes(p.read_bytes()) for p in sorted(PROMPTS.glob("*.txt"))}


def follow_up(task: Task) -> str:
    """The scoring follow-up: the named JSON fields with their descriptions."""
    fields = "\n".join(f'- "{name}": {text.strip()}' for name, text in task.fields.items())
    return prompt("follow_up").replace("{fields}", fields)


def to_wire(message: dict) -> dict:
    """A trajectory message in the OpenAI chat-completions request shape."""
    if message["role"] == "tool":
        return {"role": "tool", "tool_call_id": message["tool_call_id"], "content": message["content"]}
    wire = {"role": message["role"], "content": message.get("content") or ""}
    if message.get("tool_calls"):
        wire["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c["arguments"], ensure_ascii=False)},
            }
            for c in message["tool_calls"]
        ]
    return wire


@dataclass(frozen=True)
class Context:
    messages: tuple[dict, ...]
    """The complete input, system prompt to follow-up, in the wire shape."""
    units: tuple[int, ...]
    """Indices of the source units carried whole."""
    summary_tokens: int = 0

    @cached_property
    def input_tokens(self) -> int:
        """Complete-input size in Qwen tokens (ChatML rendering)."""
        return count_chat(list(self.messages))

    @cached_property
    def evidence_text(self) -> str:
        """What the reader sees beyond the system prompt, the task and the follow-up."""
        parts = []
        for m in self.messages[2:-1]:
            parts.append(m.get("content") or "")
            parts.extend(c["function"]["arguments"] for c in m.get("tool_calls") or [])
        return "\n".join(parts)


def _frame(task: Task, middle: list[dict]) -> tuple[dict, ...]:
    return (
        {"role": "system", "content": prompt("reader_system")},
        {"role": "user", "content": task.query},
        *middle,
        {"role": "user", "content": follow_up(task)},
    )


def full_context(task: Task) -> Context:
    middle = [to_wire(m) for m in task.history]
    return Context(_frame(task, middle), units=tuple(u.index for u in task.units))


def closed_book_context(task: Task) -> Context:
    """No evidence and no summary: what a reader answers from the question alone."""
    return Context(_frame(task, []), units=())


def carrier(summary: str, rendered_units: list[str]) -> str:
    """The downstream ``Summary:`` carrier shared by S and H."""
    text = f"Summary:\n{summary}"
    if rendered_units:
        text += "\n\nEvidence kept verbatim, in source order:\n\n" + "\n\n".join(rendered_units)
    return text


def fused_context(task: Task, summary: str, unit_indices: list[int]) -> Context:
    rendered = [task.units[i].render() for i in sorted(unit_indices)]
    middle = [{"role": "user", "content": carrier(summary, rendered)}]
    return Context(_frame(task, middle), units=tuple(sorted(unit_indices)), summary_tokens=count(summary))


def protected_tokens(task: Task) -> int:
    """The prompts every context carries: system prompt, original task, follow-up."""
    return count_chat(list(_frame(task, [])))


def evidence_tokens(task: Task) -> int:
    """Rendered evidence tokens: every unit as a fused context would render it."""
    return count("\n\n".join(u.render() for u in task.units))
