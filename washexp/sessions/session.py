"""A session in the task format's shape, and the one builder every format feeds.

The task format (``fixtures/compaction/README.md``) holds one query, then assistant turns with
tool calls and the tool results that answer them, then a final report. What a session has beyond
that (a system prompt, later user turns, a call never answered, an image) is left out and counted
in :attr:`Session.notes`, one line each, never guessed into the transcript.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from washexp.errors import FixtureError

NO_REPORT = "(the session ended without a final report)"
EMPTY_RESULT = "(empty tool result)"


@dataclass(frozen=True)
class Session:
    """One imported session: ``where`` names its file (and line or index) for every message."""

    where: str
    name: str
    query: str
    messages: list[dict[str, Any]]
    """Assistant and tool messages after the query, final report excluded (trajectory shape)."""
    final: str
    notes: tuple[str, ...]

    @property
    def units(self) -> list[str]:
        return [m["content"] for m in self.messages if m["role"] == "tool"]


@dataclass
class Builder:
    """Collects one session's turns in order; :meth:`finish` checks the shape and says what was left out."""

    where: str
    name: str
    query: str | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    dropped: Counter[str] = field(default_factory=Counter)
    _open: dict[str, int] = field(default_factory=dict)
    """Call id -> index of the assistant message that made it, until a result answers it."""
    _names: dict[str, str] = field(default_factory=dict)
    _alias: dict[str, str] = field(default_factory=dict)
    """A reused call id -> the id its latest call is written with (``<id>#2``...)."""

    def drop(self, what: str, n: int = 1) -> None:
        self.dropped[what] += n

    def user(self, text: str) -> None:
        if self.query is None and text.strip():
            self.query = text
        elif text.strip():
            self.drop("later user message")

    def assistant(self, text: str, calls: list[tuple[str, str, dict[str, Any]]] = ()) -> None:  # type: ignore[assignment]
        """``calls``: (id, tool name, arguments) each."""
        if self.query is None:
            self.drop("assistant turn before the first user message")
            return
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            message["tool_calls"] = []
            for given, name, arguments in calls:
                call_id = given
                if given in self._names:  # a replayed session reuses an answered call's id: a new call
                    if self._alias.get(given, given) in self._open:
                        raise FixtureError(self.where, None, f"tool call id {given!r} is used twice before a result")
                    call_id = f"{given}#{sum(n.split('#')[0] == given for n in self._names) + 1}"
                    self._alias[given] = call_id
                    self.drop("reused tool call id (renamed <id>#2, ...)")
                self._open[call_id], self._names[call_id] = len(self.messages), name
                message["tool_calls"].append({"id": call_id, "name": name, "arguments": arguments})
        self.messages.append(message)

    def tool(self, call_id: str, text: str) -> None:
        call_id = self._alias.get(call_id, call_id)
        if call_id not in self._open:
            if call_id in self._names:
                raise FixtureError(self.where, None, f"tool call {call_id!r} is answered twice")
            if self.query is None:
                self.drop("tool result before the first user message")
                return
            raise FixtureError(self.where, None, f"a tool result answers no earlier call ({call_id!r})")
        del self._open[call_id]
        if not text.strip():
            self.drop("empty tool result (kept as a placeholder)")
            text = EMPTY_RESULT
        self.messages.append({"role": "tool", "tool_call_id": call_id, "name": self._names[call_id], "content": text})

    def finish(self) -> Session:
        if self.query is None:
            raise FixtureError(self.where, None, "no user message: a task needs its initial query")
        for call_id, index in self._open.items():  # never answered: the task format needs a result per call
            calls = self.messages[index]["tool_calls"]
            self.messages[index]["tool_calls"] = [c for c in calls if c["id"] != call_id]
            if not self.messages[index]["tool_calls"]:
                del self.messages[index]["tool_calls"]
            self.drop("tool call without a result")
        messages = self.messages
        final = NO_REPORT
        if messages and messages[-1]["role"] == "assistant" and "tool_calls" not in messages[-1]:
            final = messages.pop()["content"] or NO_REPORT
        if final == NO_REPORT:
            self.drop("missing final report (a placeholder stands in)")
        if not any(m["role"] == "tool" for m in messages):
            raise FixtureError(self.where, None, "no tool results: a task needs source units")
        notes = tuple(f"{n} x {what}" for what, n in sorted(self.dropped.items()))
        return Session(self.where, self.name, self.query, messages, final, notes)
