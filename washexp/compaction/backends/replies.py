"""How an internal role's reply (Jev) is read, and how the reader's answer is not.

Issue 11's rule: a JSON object inside a code fence is still that object. An internal role
(Jev's ``{"scores": [...]}``) is read from the whole reply when it is one JSON value, else from
the reply's single fenced block (```json or a bare ```), prose around the fence allowed. Two
or more fenced blocks are ambiguous and read as nothing. The reader's answer is *not* read this
way: it stays strictly graded as the study says (``compaction.grading``: prose or a fence makes
it malformed).
"""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n(.*?)\n?```", re.S)
NOT_JSON = object()
"""What :func:`role_json` returns when the reply holds no single JSON value."""


def role_json(text: str) -> Any:
    """The JSON value of an internal role's reply (see the module doc), or ``NOT_JSON``."""
    text = (text or "").strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    blocks = _FENCE.findall(text)
    if len(blocks) != 1:
        return NOT_JSON
    try:
        return json.loads(blocks[0].strip())
    except json.JSONDecodeError:
        return NOT_JSON
