"""Scripted replies for the model washers (``coalwash``, ``plain``) on the scripted OpenAI-wire
server of ``tests/openai_server.py`` (real HTTP on 127.0.0.1). Test equipment: its replies are
scripted, never a model's result.

A request's kind is the first line of the prompt file it was built from (``outsider``,
``insider``, ``check``, ``plain``). ``WashScript.queued[kind]`` holds exact replies for the next
requests of that kind; with none queued, a kind's rule answers:

- outsider: one flag ``file · N · class · scripted`` for every numbered line holding a phrase of
  ``fat`` (phrase -> class), else ``NONE``;
- insider: ``accept`` for every flag it is shown;
- check: ``PASS``;
- plain: the file without the lines holding a phrase of ``fat`` or of ``lossy`` (the control's
  mistake: a line that held a fact); a model named in ``WashScript.careful`` makes no such mistake
  (two scripted washer models on one server).
"""

from __future__ import annotations

import json
import re
from collections import deque

from tests.openai_server import Script, serve
from washexp.wash.washers.model import prompt

KINDS = ("outsider", "insider", "check", "plain")
_FILE = re.compile(r"^=== FILE: (\S+) \(\d+ lines\) ===$")
_LINE = re.compile(r"^\s*(\d+)\| (.*)$")
_FLAG = re.compile(r"^\[(\d+)\] ")
_PLAIN = re.compile(r"\nFile: [^\n]+\n\n(.*)\n\Z", re.DOTALL)


class WashScript(Script):
    def __init__(self, fat: dict[str, str] | None = None, lossy: tuple[str, ...] = ()):
        super().__init__()
        self.fat = dict(fat or {})
        self.lossy = tuple(lossy)
        self.careful: set[str] = set()
        self.queued: dict[str, deque[str]] = {k: deque() for k in KINDS}
        self.openings = {kind: prompt(kind).splitlines()[0] for kind in KINDS}

    def classify(self, messages: list[dict]) -> tuple[str, object]:
        first = messages[0].get("content") or ""
        kind = next((k for k, opening in self.openings.items() if first.startswith(opening)), "other")
        return kind, None

    def reply(self, kind: str, task, messages: list[dict], temperature: float = 0.0, model: str = "") -> str:
        with self.lock:
            if self.queued.get(kind):
                return self.queued[kind].popleft()
        text = messages[0].get("content") or ""
        if kind == "outsider":
            return self.flags(text)
        if kind == "insider":
            flags = [int(m.group(1)) for m in map(_FLAG.match, text.splitlines()) if m]
            return "\n".join(json.dumps({"flag": n, "verdict": "accept", "reason": "scripted"}) for n in flags)
        if kind == "check":
            return "PASS"
        if kind == "plain":
            m = _PLAIN.search(text)
            body = m.group(1) if m else ""
            drop = (*self.fat, *(() if model in self.careful else self.lossy))
            return "\n".join(line for line in body.split("\n") if not any(p in line for p in drop))
        return "ok"

    def flags(self, text: str) -> str:
        out, name = [], None
        for line in text.splitlines():
            if m := _FILE.match(line):
                name = m.group(1)
            elif (m := _LINE.match(line)) and name:
                for phrase, cls in self.fat.items():
                    if phrase in m.group(2):
                        out.append(f"{name} · {m.group(1)} · {cls} · scripted: holds {phrase!r}")
        return "\n".join(out) or "NONE"


__all__ = ["WashScript", "serve"]
