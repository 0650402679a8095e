"""The study's size rules, in Qwen tokens.

- Summary allowance: 20% of the rendered evidence tokens, clamped to 64..256, rounded down.
  It is frozen from source length, so S, H and every Top-N share it.
- Complete-input ceiling, per task, fixed before answering: the protected prompts + the
  allowance + the five largest whole units + a 64-token reserve + 32 framing tokens; enlarged
  (never shrunk) when the serialized S context needs more. It lets the whole N sweep fit
  without changing S or truncating evidence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

ALLOWANCE_RATIO = 0.20
ALLOWANCE_MIN = 64
ALLOWANCE_MAX = 256
CEILING_UNITS = 5
RESERVE_TOKENS = 64
FRAMING_TOKENS = 32


def allowance(evidence_tokens: int) -> int:
    """Summary allowance for ``evidence_tokens`` rendered evidence tokens."""
    return min(ALLOWANCE_MAX, max(ALLOWANCE_MIN, math.floor(ALLOWANCE_RATIO * evidence_tokens)))


@dataclass(frozen=True)
class Ceiling:
    base: int
    """The size-only ceiling before any enlargement."""
    value: int
    """The ceiling in force: ``max(base, largest S context)``."""

    @property
    def enlarged(self) -> bool:
        return self.value > self.base


def ceiling(protected_tokens: int, allowance_tokens: int, unit_tokens: list[int], s_context_tokens: int = 0) -> Ceiling:
    """The per-task complete-input ceiling (see the module docstring)."""
    largest = sum(sorted(unit_tokens, reverse=True)[:CEILING_UNITS])
    base = protected_tokens + allowance_tokens + largest + RESERVE_TOKENS + FRAMING_TOKENS
    return Ceiling(base=base, value=max(base, s_context_tokens))
