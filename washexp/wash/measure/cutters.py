"""The cutting arms of the controlled experiment and the chain: each cuts a store's files.

A :class:`Cutter` takes a store's files (name -> text), an optional byte target and a repeat
index, and returns the files after one cut, on a scratch copy (never the user's store):

- ``truncate``: the model-free baseline (:mod:`washexp.wash.measure.compressor`), ungated, always present;
- ``plain``: the ``plain`` washer (one call per file), ungated (``gates=false``), told the target
  in bytes when there is one (``prompts/plain-target.txt``), else the plain prompt; present when
  the sweep has a served model; a stochastic arm (repeats differ by the request's generation);
- ``gated``: the washer under test through the whole pipeline with the gates on (quick tier,
  keeps, operator, fidelity gate, transactional apply), ``gauge=off`` so the LEAN band never
  stops it: the gate, not the gauge, is what is tested. It is never told a target.

Each cutter carries its instruction text verbatim (what the record states it was given).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from washexp.wash import pipeline
from washexp.wash.coalwash import gauge
from washexp.wash.coalwash.files import read_md
from washexp.wash.measure import compressor
from washexp.wash.measure.rounds import scratch_copy
from washexp.wash.store.scratch import scratch_dir


@dataclass(frozen=True)
class Cut:
    files: dict[str, str]
    cost_tokens: int = 0
    calls: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Cutter:
    name: str
    gates: bool
    stochastic: bool
    instruction: str
    """The instruction it was given, verbatim (a prompt template, or a rule for a model-free arm)."""
    cut: Callable[[dict[str, str], int | None, int], Cut]
    """(files, target bytes or None, repeat) -> the files after one cut."""


def truncate() -> Cutter:
    def cut(files: dict[str, str], target: int | None, repeat: int) -> Cut:
        if target is None:
            raise ValueError("truncate needs a byte target")
        return Cut(compressor.truncate(files, target))

    return Cutter(compressor.NAME, False, False, compressor.RULE, cut)


def _washed(files: dict[str, str], washer, operator, gates: bool) -> Cut:
    """One full-tier wash of a scratch copy of ``files`` with the gauge off."""
    with scratch_dir("fidelity") as tmp:
        store = scratch_copy(Path(tmp), Path(tmp) / "store", files)
        receipt = pipeline.wash(store, washer, gauge.load_gauge("off"), operator, tier="full", gates=gates)
        return Cut(read_md(store), receipt.cost_tokens, dict(receipt.calls))


def plain(model, operator, targeted_prompt: str, refit_prompt: str, plain_prompt: str, band_pct: float) -> Cutter:
    from washexp.wash.washers.plain import REFITS, PlainWasher

    def cut(files: dict[str, str], target: int | None, repeat: int) -> Cut:
        washer = PlainWasher(model=model.drawn(repeat=repeat), target_bytes=target, band_pct=band_pct)
        return _washed(files, washer, operator, gates=False)

    text = (
        f"with a target: {targeted_prompt}\n"
        f"a file outside ±{band_pct:g} % of its share, again from its original text, up to {REFITS} times "
        f"(the version closest to its share kept): {refit_prompt}\n"
        f"without one (a chain pass): {plain_prompt}"
    )
    return Cutter("plain", False, True, text, cut)


def gated(name: str, make_washer: Callable[[], object], operator, instruction: str) -> Cutter:
    def cut(files: dict[str, str], target: int | None, repeat: int) -> Cut:
        return _washed(files, make_washer(), operator, gates=True)

    return Cutter(f"gated {name}", True, False, instruction, cut)
