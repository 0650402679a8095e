"""``washer=plain``: the control a user gets without CoalWash. Run it with ``gates=false``.

One model call per store file (``prompts/plain.txt``: "Compress this memory file. Keep every
fact."), and the reply written back: one ``replace`` item of the whole file. No outsider, no
insider, no second check, no keeps; the study refuses it with the gates on, so its runs measure
what a plain compress loses when nothing stands between the model and the store (the pipeline's
``gates=False``: no fidelity gate, no keeps, no LEAN stop; the apply still holds).

The reply is written back as it came, with two transport-level exceptions: one code fence around
the whole reply is taken off, and trailing line breaks are dropped (the file keeps its own final
newline). A reply equal to the file proposes nothing. Left alone, with a note: an empty file
(nothing to compress) and a ``pinned: true`` file (the apply refuses any edit of one, which would
fail the whole round; a plain user's agent would not be stopped by it, so this is the one
concession, and the note says so). Token cost: what the endpoint reported over the calls.

Told a target (``target_bytes``, as the controlled experiment does): each file is asked for its
share of it (``bytes_i x target / store bytes``, in bytes) with ``prompts/plain-target.txt``,
the same request plus "Cut it to about N bytes of UTF-8 text (it is M bytes now)."; without one,
the prompt and every request are as before. A file whose version lands outside the band
(``band_pct`` of its share, the controlled experiment's ±5 %) is asked again, from its original
text, told how far its last version was (``prompts/plain-refit.txt``), up to :data:`REFITS` more
times; the version closest to its share is kept, and every attempt is an artifact. CoalWash's
naive arm (a large model told "about 69 KB") landed in band at once in all four runs; a 1.5B model
told a byte target missed the band on every store, and an agent told a size checks the size and
tries again, which is what this does (``docs/coalwash-departures.md``). Only sizes guide it, never
what a file holds. Repeats and rounds are told apart by the model
layer's draw (``WasherModel.drawn``): a recorded call per draw.
"""

from __future__ import annotations

import re
from pathlib import Path

from washexp.wash.plan import Plan, PlanItem, split_lines
from washexp.wash.store.apply import is_pinned
from washexp.wash.washer import Keep, Proposal
from washexp.wash.washers.model import Meter, WasherModel, fill, prompt, prompt_digests

NAME = "plain"
ROLES = ("plain",)
TARGET_PROMPT = "plain-target"
REFIT_PROMPT = "plain-refit"
REFITS = 2
"""More attempts at a file whose version missed the band of its share (a user's agent, told a size, would check it)."""
REASON = "plain compress: the file as the model rewrote it"
_FENCE = re.compile(r"\A```[^\n]*\n(.*?)\n?```\Z", re.DOTALL)


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def unwrap(reply: str) -> str:
    """The reply without one fence around all of it and without trailing line breaks."""
    m = _FENCE.match(reply.strip())
    return (m.group(1) if m else reply).rstrip("\r\n")


class PlainWasher:
    """Each file compressed by one call and written back whole."""

    name = NAME
    needs_model = True
    gates_off_only = True
    """The study refuses this washer unless ``gates=false``: it is the no-CoalWash control."""

    def __init__(self, *, model: WasherModel, target_bytes: int | None = None, band_pct: float | None = None):
        if target_bytes is not None and target_bytes < 0:
            raise ValueError(f"plain: target_bytes={target_bytes} must be >= 0")
        self.model = model
        self.target_bytes = target_bytes
        self.band_pct = band_pct
        """Refit a file whose version misses its share by more than this % (None: one attempt)."""

    def share(self, text: str, total: int) -> int:
        """This file's part of the target, in bytes."""
        assert self.target_bytes is not None
        return _size(text) * self.target_bytes // total if total else 0

    def instruction(self, name: str, text: str, total: int, last: int | None = None) -> str:
        """The prompt this file gets (the target's share when told one; ``last``: the size of the
        previous attempt, for a refit)."""
        if self.target_bytes is None:
            return fill(prompt("plain"), file=name, text=text)
        share, size = self.share(text, total), _size(text)
        if last is None:
            return fill(prompt(TARGET_PROMPT), file=name, text=text, target_bytes=share, bytes=size)
        direction = "too long: cut more" if last > share else "too short: keep more of the file"
        return fill(
            prompt(REFIT_PROMPT),
            file=name,
            text=text,
            target_bytes=share,
            bytes=size,
            attempt_bytes=last,
            direction=direction,
        )

    def _compress(self, name: str, text: str, total: int, meter: Meter, artifacts: dict[str, str]) -> str:
        """The file's compressed text: one attempt, or with a band, the attempt closest to its share."""
        reply = self.model.ask(self.instruction(name, text, total), "plain", meter).text
        artifacts[f"plain.{name}.txt"] = reply
        best = unwrap(reply)
        if self.target_bytes is None or self.band_pct is None:
            return best
        share, last = self.share(text, total), _size(best)
        for attempt in range(1, REFITS + 1):
            if abs(last - share) * 100 <= self.band_pct * share:
                break
            reply = self.model.ask(self.instruction(name, text, total, last), "plain", meter).text
            artifacts[f"plain.{name}.refit{attempt}.txt"] = reply
            after = unwrap(reply)
            last = _size(after)
            if abs(last - share) < abs(_size(best) - share):
                best = after
        return best

    @staticmethod
    def prompts() -> dict[str, str]:
        return prompt_digests(ROLES)

    def propose(self, files: dict[str, str], keeps: tuple[Keep, ...], scratch: Path) -> Proposal:
        meter = Meter()
        items, notes = [], []
        artifacts: dict[str, str] = {}
        total = sum(_size(t) for t in files.values())
        for name, text in files.items():
            lines = split_lines(text)
            if not lines:
                notes.append(f"plain: {name} is empty; nothing to compress")
                continue
            if is_pinned(text):
                notes.append(f"plain: {name} is pinned; left alone (the apply would refuse the round)")
                continue
            after = self._compress(name, text, total, meter, artifacts)
            if after == text.rstrip("\r\n"):
                continue
            items.append(PlanItem(name, 1, len(lines), "over-verbose", REASON, "replace", after))
        if meter.unreported:
            notes.append(f"plain: {meter.unreported} of {meter.calls} replies reported no token usage (counted 0)")
        return Proposal(Plan(tuple(items), (), NAME), meter.tokens, artifacts, (), tuple(notes), dict(meter.by_seat))
