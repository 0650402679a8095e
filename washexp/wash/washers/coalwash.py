"""``washer=coalwash``: CoalWash's full tier (``reference/coalwash.md`` §5) through a served model.

Three roles, each a fresh conversation with no context but what its prompt file
(``washexp/wash/prompts/``) gives it:

1. **outsider** (``outsider.txt``): the flag rules and the store's files, every line numbered. It
   only flags, one line per item: ``file · line-range · class · reason``.
2. **insider** (``insider.txt``): the store and the numbered flags. One verdict per flag:
   ``accept`` (the flagged lines are deleted; ``all`` deletes the file), ``shrink`` (they are
   replaced by the verdict's text), ``reject`` (a :class:`~washexp.wash.washer.Keep` ``{target,
   reason, date}``: the pipeline writes it to ``keeps.json`` and the range is never flagged
   again), ``contradiction`` (a note for the human; nothing changes).
3. **check** (``check.txt``): every shrink, before against after, goes to a fresh outsider
   asking for changed claim strength or re-paired values; only ``PASS`` keeps it. A merge is a
   shrink whose text carries the lines it replaces, so it is checked the same way.

Dropped with a note naming why (``washexp.wash.washers.coalwash_lines`` reads the replies): a
flag line that does not parse, a file not in the store, a range outside the file, an unknown
class, a flag on a ``pinned: true`` file or on a kept target, a flag with no verdict, a malformed
verdict, a shrink that changes nothing, an item overlapping an earlier accepted or shrunk one, a
shrink whose check fails. The round always goes on; only an unusable endpoint stops it
(:class:`~washexp.errors.ModelError`).

The plan's ``approved_drops`` are the candidates its edits entail; the operator and the fidelity
gate judge it as any plan. Token cost: what the endpoint reported over the washer's calls.
Artifacts: each role's raw reply and ``coalwash.items.json`` (every flag and what became of it).
The washer never reads ``expected.json``: it sees only the texts it is given.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

from washexp.errors import ConfigError
from washexp.wash.plan import Plan, PlanItem, split_lines
from washexp.wash.store.apply import is_pinned
from washexp.wash.washer import Keep, Proposal, target_of
from washexp.wash.washers import entailed_drops
from washexp.wash.washers.coalwash_lines import Flag, check_passed, parse_flags, parse_verdicts
from washexp.wash.washers.model import Meter, WasherModel, fill, prompt, prompt_digests

NAME = "coalwash"
ROLES = ("outsider", "insider", "check")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def numbered(files: dict[str, str]) -> str:
    """The store as the roles see it: each file under a header, each line as ``N| text``."""
    blocks = []
    for name, text in files.items():
        lines = [line.rstrip("\r\n") for line in split_lines(text)]
        body = "\n".join(f"{i:>4}| {line}" for i, line in enumerate(lines, start=1))
        blocks.append(f"=== FILE: {name} ({len(lines)} lines) ===\n{body}".rstrip())
    return "\n\n".join(blocks)


def _lines(files: dict[str, str], flag: Flag) -> tuple[int, int, str]:
    """(start, end, text) of what ``flag`` covers; ``all`` is every line of the file."""
    lines = split_lines(files[flag.file])
    start, end = (1, len(lines)) if flag.whole else (flag.start, flag.end)
    return start, end, "".join(lines[start - 1 : end]).rstrip("\r\n")


class CoalWashWasher:
    """The outsider flags, the insider adjudicates, a second outsider checks every shrink."""

    name = NAME
    needs_model = True

    def __init__(self, *, model: WasherModel, keep_date: str = "2026-01-01"):
        if not isinstance(keep_date, str) or not _DATE.match(keep_date):
            raise ConfigError(f"washer coalwash: keep_date must be a YYYY-MM-DD string, got {keep_date!r}")
        self.model = model
        self.keep_date = keep_date

    @staticmethod
    def prompts() -> dict[str, str]:
        """The prompt files' sha256 (part of the washer's spec, so of every run's identity)."""
        return prompt_digests(ROLES)

    def propose(self, files: dict[str, str], keeps: tuple[Keep, ...], scratch: Path) -> Proposal:
        meter = Meter()
        store = numbered(files)
        flagged = self.model.ask(fill(prompt("outsider"), count=len(files), files=store), "outsider", meter).text
        flags, dropped = parse_flags(flagged, files)
        items_log = [{"line": d["line"], "outcome": "dropped", "why": d["why"]} for d in dropped]
        flags = self._admissible(flags, files, {k.target for k in keeps}, items_log)
        artifacts = {"coalwash.outsider.txt": flagged}
        verdicts: dict[int, dict] = {}
        if flags:
            text = fill(
                prompt("insider"),
                count=len(files),
                files=store,
                flag_count=len(flags),
                flags="\n".join(f.render() for f in flags),
            )
            judged = self.model.ask(text, "insider", meter).text
            artifacts["coalwash.insider.txt"] = judged
            verdicts, bad = parse_verdicts(judged, flags)
            items_log += [{"line": d["line"], "outcome": "dropped", "why": f"insider: {d['why']}"} for d in bad]
        items, new_keeps = [], []
        checks: list[str] = []
        taken: dict[str, list[Flag]] = {}
        for flag in flags:
            entry = {"flag": flag.n, "line": flag.line}
            items_log.append(entry)
            v = verdicts.get(flag.n)
            if v is None:
                entry |= {"outcome": "dropped", "why": "the insider gave no verdict"}
                continue
            entry["verdict"] = v["verdict"]
            if v["verdict"] == "reject":
                reason = v["reason"] or "the insider rejected the flag"
                new_keeps.append(Keep(target_of(flag.item(), files), reason, self.keep_date))
                entry |= {"outcome": "kept", "why": reason}
                continue
            if v["verdict"] == "contradiction":
                entry |= {"outcome": "contradiction", "why": v["reason"] or flag.reason}
                continue
            item, why = self._edit(flag, v, files)
            if item is None or (why := why or _overlap(flag, taken)):
                entry |= {"outcome": "dropped", "why": why}
                continue
            if item.op == "replace":
                passed, why = self._check(flag, item, files, meter, checks)
                if not passed:
                    entry |= {"outcome": "dropped", "why": why}
                    continue
            taken.setdefault(flag.file, []).append(flag)
            items.append(item)
            entry["outcome"] = "shrunk" if item.op == "replace" else "deleted"
        if checks:
            artifacts["coalwash.checks.txt"] = "\n\n".join(checks)
        artifacts["coalwash.items.json"] = json.dumps(items_log, indent=1, ensure_ascii=False) + "\n"
        notes = [_note(e) for e in items_log if e.get("outcome") in ("dropped", "contradiction")]
        if meter.unreported:
            notes.append(f"coalwash: {meter.unreported} of {meter.calls} replies reported no token usage (counted 0)")
        plan = Plan(tuple(items), entailed_drops(files, items), NAME)
        return Proposal(plan, meter.tokens, artifacts, tuple(new_keeps), tuple(notes), dict(meter.by_seat))

    @staticmethod
    def _admissible(flags: list[Flag], files: dict[str, str], kept: set[str], log: list[dict]) -> list[Flag]:
        """The flags the insider is shown: not on a pinned file, not on a kept target."""
        out = []
        for flag in flags:
            if is_pinned(files[flag.file]):
                log.append({"line": flag.line, "outcome": "dropped", "why": f"{flag.file} is pinned"})
            elif target_of(flag.item(), files) in kept:
                log.append({"line": flag.line, "outcome": "dropped", "why": "kept by an earlier wash (keeps.json)"})
            else:
                out.append(flag)
        return [replace(f, n=i) for i, f in enumerate(out, start=1)]  # the insider sees them numbered 1..

    @staticmethod
    def _edit(flag: Flag, verdict: dict, files: dict[str, str]) -> tuple[PlanItem | None, str]:
        """The plan item an accept or shrink makes, or (None, why)."""
        if verdict["verdict"] == "accept":
            return flag.item(reason=verdict["reason"]), ""
        start, end, before = _lines(files, flag)
        if end < start:
            return None, f"shrink of {flag.file}, which is empty"
        text = verdict["text"].rstrip("\r\n")
        if text == before:
            return None, "the shrink changes nothing"
        return replace(flag, start=start, end=end, whole=False).item("replace", text, verdict["reason"]), ""

    def _check(self, flag: Flag, item: PlanItem, files: dict[str, str], meter: Meter, log: list[str]):
        """The second outsider check of a shrink: (passed, why)."""
        _, _, before = _lines(files, flag)
        text = fill(
            prompt("check"), file=flag.file, range=f"{item.start}-{item.end}", before=before, after=item.text or ""
        )
        answer = self.model.ask(text, "check", meter).text
        log.append(f"[{flag.n}] {flag.file} {item.start}-{item.end}: {answer.strip()}")
        return check_passed(answer)


def _overlap(flag: Flag, taken: dict[str, list[Flag]]) -> str:
    """Why ``flag`` cannot join the items already taken on its file, or ''."""
    for other in taken.get(flag.file, []):
        if flag.whole or other.whole or (flag.start <= other.end and other.start <= flag.end):
            return f"overlaps flag {other.n} ({other.file} {other.range}), which was taken first"
    return ""


def _note(entry: dict) -> str:
    what = f"flag {entry['flag']}" if "flag" in entry else "a line"
    if entry["outcome"] == "contradiction":
        return f"coalwash: contradiction for the human gate, nothing changed: {entry['line']} ({entry['why']})"
    return f"coalwash: {what} dropped ({entry['why']}): {entry['line']}"
