"""Claude Code session JSONL (``~/.claude/projects/<project>/<session>.jsonl``): one session a file.

Each line is an entry; ``user`` and ``assistant`` entries carry a ``message`` whose ``content`` is
a string or a list of blocks: ``text``, ``tool_use`` (``id``, ``name``, ``input``) on the
assistant side, ``tool_result`` (``tool_use_id``, ``content``) on the user side. Claude Code
writes one assistant reply as several entries, a block each: each becomes its own turn. Other
entries (``summary``, ``system``, file snapshots), a subagent's ``isSidechain`` entries,
``isMeta`` user entries and ``thinking`` blocks are counted and left out.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from washexp.errors import FixtureError
from washexp.sessions.reader import read_jsonl, text_of
from washexp.sessions.session import Builder, Session


def sessions(path: Path) -> Iterator[Session]:
    b = Builder(str(path), "001")
    seen = False
    for number, entry in read_jsonl(path):
        at = f"{path}: line {number}"
        if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
            raise FixtureError(at, None, "not a Claude Code session entry (an object with a type)")
        kind = entry["type"]
        if kind not in ("user", "assistant"):
            b.drop(f"{kind} entry")
            continue
        message = entry.get("message")
        if not isinstance(message, dict) or "content" not in message:
            raise FixtureError(at, "message", "a user or assistant entry needs a message with content")
        seen = True
        if entry.get("isSidechain"):
            b.drop("subagent (sidechain) entry")
        elif entry.get("isMeta"):
            b.drop("meta user entry")
        elif kind == "user":
            _user(b, message["content"], at)
        else:
            _assistant(b, message["content"], at)
    if not seen:
        raise FixtureError(path, None, "not a Claude Code session (no user or assistant entries)")
    yield b.finish()


def _blocks(content: Any, at: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list) or not all(isinstance(x, dict) for x in content):
        raise FixtureError(at, "message.content", "must be text or a list of content blocks")
    return content


def _user(b: Builder, content: Any, at: str) -> None:
    texts = []
    for block in _blocks(content, at):
        if block.get("type") == "tool_result":
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str):
                raise FixtureError(at, "tool_result", "needs the tool_use_id it answers")
            b.tool(call_id, text_of(block.get("content"), at, b.drop))
        elif block.get("type") == "text":
            texts.append(text_of(block.get("text"), at, b.drop))
        else:
            b.drop(f"user {block.get('type')} block")
    if texts:
        b.user("\n".join(texts))


def _assistant(b: Builder, content: Any, at: str) -> None:
    texts, calls = [], []
    for block in _blocks(content, at):
        kind = block.get("type")
        if kind == "text":
            texts.append(text_of(block.get("text"), at, b.drop))
        elif kind == "tool_use":
            if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                raise FixtureError(at, "tool_use", "needs an id and a name")
            arguments = block.get("input")
            calls.append((block["id"], block["name"], arguments if isinstance(arguments, dict) else {"raw": arguments}))
        else:
            b.drop(f"assistant {kind} block")
    if texts or calls:
        b.assistant("\n".join(texts), calls)
