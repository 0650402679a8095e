"""The simple baselines beside S and H: observation masking, a recency window, and their hybrid.

- ``mask`` (observation masking): the whole collection history, except that every tool output
  but the latest ``M`` is replaced by a one-line placeholder; the calls themselves stay.
- ``recency``: the last ``K`` turns verbatim (a turn: one assistant message and the tool results
  that answer it); earlier turns are left out.
- ``hybrid``: the masked context; when it is still over ``budget`` input tokens, S (the summary
  method) fused with its Top-N units instead. S is asked only then.

Model-free except the hybrid's S: they run offline and on any model. Fused with Top N like S and
H: the N top-ranked units are also kept verbatim, in place (masking leaves them unmasked, the
recency window keeps their turns). Nothing here reads a task's expected answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from washexp.compaction.frozen import Made
from washexp.compaction.inputs.context import Context, _frame, fused_context, to_wire
from washexp.compaction.inputs.fixtures import Task
from washexp.compaction.methods.table import BASELINES
from washexp.errors import ConfigError

if TYPE_CHECKING:
    from washexp.compaction.frozen import FrozenCache

PLACEHOLDER = "[older tool output omitted to save context]"
"""What a masked tool output becomes: short, the same for every output."""
DEFAULTS = {"M": 10, "K": 10, "budget": 4000}
"""M: tool outputs kept (10, as in Lindenbauer et al. 2025); K: turns kept; budget: the hybrid's
input-token limit before it summarises."""


def _unit_of(task: Task) -> dict[str, int]:
    return {u.call_id: u.index for u in task.units}


def masked_context(task: Task, m: int, keep: tuple[int, ...] = ()) -> Context:
    """Every tool output but the latest ``m`` (and the units in ``keep``) as the placeholder."""
    units = _unit_of(task)
    latest = set(range(max(0, len(task.units) - m), len(task.units))) | set(keep)
    middle = []
    for msg in task.history:
        wire = to_wire(msg)
        if msg["role"] == "tool" and units[msg["tool_call_id"]] not in latest:
            wire["content"] = PLACEHOLDER
        middle.append(wire)
    return Context(_frame(task, middle), units=tuple(sorted(latest)))


def turns(task: Task) -> list[list[dict]]:
    """The history split into turns: each assistant message with the tool results after it."""
    out: list[list[dict]] = []
    for msg in task.history:
        if msg["role"] == "assistant" or not out:
            out.append([])
        out[-1].append(msg)
    return out


def recency_context(task: Task, k: int, keep: tuple[int, ...] = ()) -> Context:
    """The last ``k`` turns verbatim, and the turns that hold a unit in ``keep``; the rest left out."""
    units, every = _unit_of(task), turns(task)
    chosen = [
        turn
        for i, turn in enumerate(every)
        if i >= len(every) - k or any(units.get(m["tool_call_id"], -1) in keep for m in turn if "tool_call_id" in m)
    ]
    kept = tuple(sorted(units[m["tool_call_id"]] for turn in chosen for m in turn if m["role"] == "tool"))
    return Context(_frame(task, [to_wire(m) for turn in chosen for m in turn]), units=kept)


def _count(name: str, key: str, value: Any) -> int:
    """A baseline's parameter: a whole number >= 0, else a usage error naming it."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"method.{key}={value!r}: {name} needs a whole number >= 0")
    return value


def kind_of(method: str) -> str:
    """The kind in an arm's method name: ``mask`` for ``mask M=10`` (:attr:`Baseline.name`), any
    other method's name as it is."""
    return method.split(" ")[0]


@dataclass(frozen=True)
class Baseline:
    """A baseline's method: builds its own context (``build``) rather than a ``Summary:`` carrier."""

    kind: str
    params: dict[str, int] = field(default_factory=dict)
    whole: bool = False
    checked: bool = False

    @property
    def name(self) -> str:
        """The arm's name, its parameters in it: ``mask M=10``, ``recency K=4``, ``hybrid M=10 budget=4000``
        (:func:`kind_of` reads the kind back)."""
        return " ".join([self.kind, *(f"{k}={v}" for k, v in self.params.items())])

    @property
    def role(self) -> str:
        return "S" if self.kind == "hybrid" else self.kind

    @property
    def spec(self) -> dict[str, Any]:
        return {"name": self.kind, **self.params}

    @property
    def summarizes(self) -> bool:
        return self.kind == "hybrid"

    def build(
        self, cache: FrozenCache, task: Task, generation: int, allowance: int, keep: list[int]
    ) -> Made[tuple[Context, str | None]]:
        """This generation's context and the summary in it (the hybrid's S, when it was asked)."""
        p = self.params
        if self.kind == "recency":
            return Made((recency_context(task, p["K"], tuple(keep)), None))
        masked = masked_context(task, p["M"], tuple(keep))
        if self.kind == "mask" or masked.input_tokens <= p["budget"]:
            return Made((masked, None))
        made = cache.summary(task, generation, allowance)  # over budget: S, fused with the same Top N
        if not made.ok or made.value is None:
            return Made(None, made.failure, made.keys)
        return Made((fused_context(task, made.value, keep), made.value), None, made.keys)

    def part(self, cache, task, generation, allowance):  # pragma: no cover - build is asked instead
        raise NotImplementedError("a baseline builds its own context")

    def context(self, task):  # pragma: no cover - never asked: not whole
        raise NotImplementedError("a baseline builds its own context")

    def describe(self, cp):  # pragma: no cover - unchecked
        return {}


KINDS = BASELINES
"""Each baseline's parameters, as ``method.<key>`` sets them (declared in :mod:`washexp.compaction.methods.table`)."""


def baseline(kind: str, values: dict[str, Any]) -> Baseline:
    """The baseline ``kind`` with its parameters (unset ones at :data:`DEFAULTS`); a bad value raises."""
    params = {}
    for key in KINDS[kind]:
        value = values.get(key)
        params[key] = _count(kind, key, DEFAULTS[key] if value is None else value)
    return Baseline(kind, params)


def from_config(config: Any, roles: Any = None) -> Baseline:
    """The baseline the ``method`` config node names, with the parameters it sets (it needs no roles)."""
    return baseline(config.name, {key: getattr(config, key) for key in KINDS[config.name]})
