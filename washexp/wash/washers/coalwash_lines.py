"""What the coalwash washer's roles write, read line by line: flags, verdicts, check answers.

Every reader returns what parsed and, for everything that did not, ``{"line", "why"}``: a bad
line costs that one item, never the round.

- A **flag** (the outsider) is ``file · line-range · class · reason``: ``file`` a file of the store
  (backticks around it are tolerated), ``line-range`` ``N``, ``N-M`` or ``all`` (the whole file),
  inside the file's lines; ``class`` one of :data:`FLAG_CLASSES`; ``reason`` the rest of the line
  (it may hold a ``·``). A leading list bullet is tolerated; empty lines, code fences and
  ``NONE`` are not items. Flags are numbered 1.. in the order the valid ones came.
- A **verdict** (the insider) is one JSON object per line: ``{"flag": N, "verdict": V, "text":
  ..., "reason": ...}`` with ``V`` one of :data:`VERDICTS`; ``shrink`` needs a string ``text``.
  A verdict for no flag, or a second one for a flag, is dropped.
- A **check answer** passes only when its first non-empty line is ``PASS``; ``FAIL · why`` and
  anything else fail (the check fails closed).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from washexp.wash.plan import PlanItem, split_lines

FLAG_CLASSES = {
    "superseded": "superseded",
    "duplicate": "duplicate",
    "done-point-in-time": "done-point-in-time",
    "over-verbose": "over-verbose",
    "trivially-obvious": "trivially-obvious",
    "contradiction-candidate": "contradiction",
    "unsure": "over-verbose",
}
"""The outsider's classes (CoalWash's) -> the plan class an accepted or shrunk item carries."""
VERDICTS = ("accept", "shrink", "reject", "contradiction")
_BULLET = re.compile(r"^(?:[-*•]\s+|\d+[.)]\s+)")
_RANGE = re.compile(r"^(?:lines?\s*)?L?(\d+)(?:\s*[-–]\s*L?(\d+))?$", re.IGNORECASE)


@dataclass(frozen=True)
class Flag:
    n: int
    line: str
    """As the outsider wrote it."""
    file: str
    start: int
    end: int
    cls: str
    reason: str
    whole: bool = False

    @property
    def range(self) -> str:
        return "all" if self.whole else (f"{self.start}" if self.start == self.end else f"{self.start}-{self.end}")

    def render(self) -> str:
        return f"[{self.n}] {self.file} · {self.range} · {self.cls} · {self.reason}"

    def item(self, op: str = "delete", text: str | None = None, reason: str = "") -> PlanItem:
        """The plan item for this flag: ``delete`` (``delete-file`` for ``all``) or ``replace``."""
        cls = FLAG_CLASSES[self.cls]
        why = reason or self.reason
        if self.cls == "unsure":
            why = f"unsure: {why}"
        if op == "delete" and self.whole:
            return PlanItem(self.file, 1, 1, cls, why, "delete-file")
        return PlanItem(self.file, self.start, self.end, cls, why, op, text)


def _skip(line: str) -> bool:
    return not line or line.startswith("```")


def parse_flags(text: str, files: dict[str, str]) -> tuple[list[Flag], list[dict]]:
    flags: list[Flag] = []
    dropped: list[dict] = []
    for raw in text.splitlines():
        line = raw.strip()
        if _skip(line) or line.upper() == "NONE":
            continue
        parts = [p.strip() for p in _BULLET.sub("", line).split("·")]
        if len(parts) < 4 or not all(parts[:4]):
            dropped.append({"line": line, "why": "not `file · line-range · class · reason`"})
            continue
        name, span, cls, reason = parts[0].strip("`*"), parts[1], parts[2].lower(), " · ".join(parts[3:])
        why = _flag_problem(name, span, cls, files)
        if why:
            dropped.append({"line": line, "why": why})
            continue
        whole = span.lower() == "all"
        if whole:
            start, end = 1, 1
        else:
            m = _RANGE.match(span)
            assert m, span  # _flag_problem refused any other span
            start, end = int(m.group(1)), int(m.group(2) or m.group(1))
        flags.append(Flag(len(flags) + 1, line, name, start, end, cls, reason, whole))
    return flags, dropped


def _flag_problem(name: str, span: str, cls: str, files: dict[str, str]) -> str | None:
    if name not in files:
        return f"no file {name!r} in the store"
    if cls not in FLAG_CLASSES:
        return f"unknown class {cls!r}"
    if span.lower() == "all":
        return None
    m = _RANGE.match(span)
    if not m:
        return f"line-range {span!r} is not N, N-M or all"
    start, end = int(m.group(1)), int(m.group(2) or m.group(1))
    lines = len(split_lines(files[name]))
    if not 1 <= start <= end <= lines:
        return f"line-range {span} is outside {name} (lines 1-{lines})"
    return None


def parse_verdicts(text: str, flags: list[Flag]) -> tuple[dict[int, dict], list[dict]]:
    """flag number -> ``{"verdict", "text", "reason"}``, and the dropped lines."""
    known = {f.n for f in flags}
    verdicts: dict[int, dict] = {}
    dropped: list[dict] = []
    for raw in text.splitlines():
        line = raw.strip()
        if _skip(line):
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            dropped.append({"line": line, "why": "not a JSON verdict"})
            continue
        why = _verdict_problem(data, known, verdicts)
        if why:
            dropped.append({"line": line, "why": why})
            continue
        reason = data.get("reason")
        verdicts[data["flag"]] = {
            "verdict": data["verdict"],
            "text": data.get("text"),
            "reason": reason.strip() if isinstance(reason, str) else "",
        }
    return verdicts, dropped


def _verdict_problem(data, known: set[int], seen: dict[int, dict]) -> str | None:
    if not isinstance(data, dict):
        return "not a JSON object"
    n = data.get("flag")
    if not isinstance(n, int) or isinstance(n, bool):
        return "no integer flag number"
    if data.get("verdict") not in VERDICTS:
        return f"verdict {data.get('verdict')!r} is not one of {', '.join(VERDICTS)}"
    if n not in known:
        return f"a verdict for flag {n}, which is not a flag"
    if n in seen:
        return f"a second verdict for flag {n} (the first stands)"
    if data["verdict"] == "shrink" and not isinstance(data.get("text"), str):
        return "shrink without a string text"
    return None


def check_passed(text: str) -> tuple[bool, str]:
    """(passed, why): only a first non-empty line ``PASS`` passes."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if first.rstrip(".").upper() == "PASS":
        return True, ""
    if first.upper().startswith("FAIL"):
        return False, f"second check failed: {first[4:].strip(' ·:-') or 'no reason given'}"
    return False, f"second check answer unreadable: {first[:80]!r}"
