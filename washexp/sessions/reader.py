"""A session file is untrusted input: read whole or refused in one line naming the file and line.

Refused before a byte is read: a symbolic link, a file with a second hard link, anything but a
regular file, and a file past :data:`LIMIT` bytes (``washexp.inputs.read_untrusted``). Then it must
be UTF-8 JSON (or JSONL, one value a line) nested at most :data:`DEPTH` levels.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from washexp.errors import FixtureError
from washexp.inputs import parse_json, read_untrusted

LIMIT = 256 << 20
"""The largest session file read (a long agent session is tens of MiB)."""
DEPTH = 64
"""The deepest nesting a session's values may have (chat transcripts nest a few levels)."""


def read_bytes(path: Path) -> bytes:
    data = read_untrusted(path, inside=True, limit=LIMIT)
    if data is None:
        raise FixtureError(path, None, "no such file")
    return data


def check_depth(value: Any, where: str) -> None:
    """Refuse a value nested deeper than :data:`DEPTH` (iteratively: no recursion to exhaust)."""
    stack = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > DEPTH:
            raise FixtureError(where, None, f"nested deeper than {DEPTH} levels")
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)


def read_json(path: Path) -> Any:
    value = parse_json(read_bytes(path), path)
    check_depth(value, str(path))
    return value


def read_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, value) for each non-blank line; a line that is not JSON (a truncated last
    line too) is refused naming its number."""
    data = read_bytes(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise FixtureError(path, None, f"not UTF-8 (byte 0x{data[err.start]:02x} at offset {err.start})") from None
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as err:
            raise FixtureError(path, f"line {number}", f"not valid JSON ({err.msg} at column {err.colno})") from None
        except (ValueError, RecursionError):
            raise FixtureError(
                path, f"line {number}", "not usable JSON (a number too long or nesting too deep)"
            ) from None
        check_depth(value, f"{path}: line {number}")
        yield number, value


def text_of(content: Any, where: str, dropped: Any) -> str:
    """The text of a message's content: a string, or the text parts of a list of parts (the
    parts that are not text, images or audio, are counted in ``dropped``)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
            else:
                dropped(
                    f"non-text content part ({part.get('type') if isinstance(part, dict) else type(part).__name__})"
                )
        return "\n".join(texts)
    raise FixtureError(where, None, f"content is a {type(content).__name__}, not text or a list of parts")
