"""Repeated compaction (``measurement=cycles``): a trajectory compacted again and again.

A task's collection history is split into ``k`` contiguous segments of whole turns (a turn: an
assistant message and the tool results after it; :func:`segments`), by a split rule: ``turns``
(as equal in number of turns as they go) or ``tokens`` (the largest segment as small in tokens as
whole turns allow). Cycle 1 compacts segment 1 as a single
compaction would; cycle ``i`` compacts the input made of cycle ``i-1``'s context and segment ``i``
(:func:`cycle_input`). Each cycle's input is a task of its own (same id, query and needles), so
every method runs through the very code a single compaction runs (``condition.task_sizes`` and
``condition.outcome``: the allowance, the ceiling and H's validity sized from that input), and
with ``k = 1`` the one cycle *is* the single compaction.

After every cycle each graded fact is checked as retention checks it (every needle in the
context, ``retention.retained_fields``). A fact whose needles have not all been appended yet (in
the segments seen so far) is *not yet seen*: it enters the count at the first cycle after which
every needle of it has appeared, never counted as lost before (:class:`FactCycle` ``seen``).

How a previous context enters the next input: its messages stay as they are (masking and the
recency window keep the history's shape), except a ``Summary:`` carrier (S, H, the hybrid's S),
which enters as the result of one tool call, ``compacted_context``: a unit S summarises and H's
writer reads like any other tool result.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from washexp.compaction.condition import Arm, outcome, task_sizes
from washexp.compaction.frozen import FrozenCache
from washexp.compaction.inputs.context import Context, full_context
from washexp.compaction.inputs.fixtures import Task, Unit
from washexp.compaction.methods.baselines import Baseline, turns
from washexp.compaction.methods.method import Method
from washexp.compaction.scoring.retention import retained_fields
from washexp.errors import ConfigError
from washexp.hashing import canonical_hash
from washexp.tokens import count_chat

SPLITS = ("turns", "tokens")
"""The split rules (``cycles.split``): ``turns``, contiguous turns as equal in number as they go;
``tokens``, contiguous turns with the largest segment's tokens as small as it can be."""
CARRIER_TOOL = "compacted_context"
"""The tool call a previous cycle's ``Summary:`` carrier enters the next input as."""
TABLE = "cycles.json"
"""The per-fact x per-cycle table of a cycles condition (an MLflow table)."""


def check(ks: list[int], split: str) -> list[int]:
    """The k values, each >= 1, sorted once each; a bad one is a usage error naming it."""
    if split not in SPLITS:
        raise ConfigError(f"cycles.split={split!r}: expected one of {', '.join(SPLITS)}")
    if not ks:
        raise ConfigError("cycles.k=[]: name at least one segment count (e.g. [1,2,3,4,5])")
    for k in ks:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError(f"cycles.k: {k!r} is not a whole number >= 1")
    return sorted(set(ks))


def segments(task: Task, k: int, split: str = "turns") -> list[list[dict]]:
    """The history split into ``k`` contiguous segments of whole turns by the ``split`` rule (see
    :data:`SPLITS`); a task with fewer turns than ``k`` cannot be split."""
    every = turns(task)
    if k > len(every):
        raise ConfigError(f"cycles.k={k}: task {task.id} has {len(every)} turns, fewer than k segments")
    sizes = _by_tokens([count_chat(t) for t in every], k) if split == "tokens" else _by_number(len(every), k)
    out, at = [], 0
    for n in sizes:
        out.append([m for turn in every[at : at + n] for m in turn])
        at += n
    return out


def _by_number(n: int, k: int) -> list[int]:
    """Turns per segment, as equal as they go (the earlier segments take one more)."""
    size, extra = divmod(n, k)
    return [size + (i < extra) for i in range(k)]


def _by_tokens(weights: list[int], k: int) -> list[int]:
    """Turns per segment (each at least one) whose largest token sum is the smallest any split into
    ``k`` contiguous segments has; among equal splits, each segment from the last back starts as
    late as it can (the earlier segments take the extra, as :func:`_by_number`'s do)."""
    n = len(weights)
    prefix = [0]
    for w in weights:
        prefix.append(prefix[-1] + w)
    # best[j][m]: the smallest largest sum splitting the first m turns into j segments; cut[j][m]: where
    # its last segment starts (the latest such start)
    inf = float("inf")
    best = [[inf] * (n + 1) for _ in range(k + 1)]
    cut = [[0] * (n + 1) for _ in range(k + 1)]
    best[0][0] = 0
    for j in range(1, k + 1):
        for m in range(j, n - (k - j) + 1):
            for start in range(j - 1, m):
                value = max(best[j - 1][start], prefix[m] - prefix[start])
                if value <= best[j][m]:
                    best[j][m], cut[j][m] = value, start
    sizes, m = [], n
    for j in range(k, 0, -1):
        sizes.append(m - cut[j][m])
        m = cut[j][m]
    return sizes[::-1]


def _from_wire(message: dict, cycle: int) -> list[dict]:
    """A context message back in the trajectory shape; a ``Summary:`` carrier as one tool call
    and its result."""
    if message["role"] == "tool":
        return [{"role": "tool", "tool_call_id": message["tool_call_id"], "content": message["content"]}]
    if message["role"] == "assistant":
        calls = [
            {"id": c["id"], "name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])}
            for c in message.get("tool_calls") or []
        ]
        return [{"role": "assistant", "content": message.get("content") or "", "tool_calls": calls}]
    call = {"id": f"cycle{cycle}", "name": CARRIER_TOOL, "arguments": {"cycle": cycle}}
    return [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": message.get("content") or ""},
    ]


def _units(history: tuple[dict, ...]) -> tuple[Unit, ...]:
    calls = {c["id"]: c for m in history if m["role"] == "assistant" for c in m.get("tool_calls") or []}
    units: list[Unit] = []
    for m in history:
        if m["role"] == "tool":
            c = calls[m["tool_call_id"]]
            units.append(Unit(len(units), c["id"], c["name"], c["arguments"], m["content"]))
    return tuple(units)


def cycle_input(task: Task, previous: Context | None, segment: list[dict], cycle: int) -> Task:
    """Cycle ``cycle``'s input: the previous context's middle (none for cycle 1) and the segment,
    as a task of its own (its digest names its history, so frozen parts are never shared with
    another input)."""
    carried = [] if previous is None else [m for msg in previous.messages[2:-1] for m in _from_wire(msg, cycle - 1)]
    history = (*carried, *segment)
    files = {"cycle_input": canonical_hash({"task": task.digest, "history": list(history)})}
    return replace(task, history=history, units=_units(history), files=files)


class FactCycle(NamedTuple):
    """One graded fact after one cycle."""

    task: str
    k: int
    cycle: int
    field: str
    seen: bool
    """Every needle of it has appeared in the segments appended so far (else not counted)."""
    kept: bool
    """Every needle of it is in this cycle's context (False when there is none)."""
    missing: list[str]


@dataclass(frozen=True)
class CycleRun:
    """A task compacted over ``k`` cycles."""

    facts: list[FactCycle]
    contexts: list[Context | None]
    """Each cycle's context; None where a cycle produced none (invalid, failed part): the chain
    then ends and every later cycle keeps nothing."""
    failures: list[str | None]
    input_tokens: list[int]
    """Each cycle's context size (0 where there is none)."""
    keys: tuple[str, ...] = ()
    """The recordings behind its parts (a served model's calls: what the condition is charged)."""

    def survival(self) -> list[float | None]:
        """Per cycle: the fraction of the facts seen so far that are kept (None: none seen)."""
        out = []
        for c in range(1, len(self.contexts) + 1):
            seen = [f for f in self.facts if f.cycle == c and f.seen]
            out.append(sum(f.kept for f in seen) / len(seen) if seen else None)
        return out


def run_cycles(
    task: Task, k: int, arm: Arm, cache: FrozenCache, method: Method, generations: int = 1, split: str = "turns"
) -> CycleRun:
    """Compact ``task`` over ``k`` cycles with ``method`` and check every fact after every cycle.
    One chain, generation 0's (its sizes, like a single compaction's, count every generation's S)."""
    parts = segments(task, k, split)
    previous: Context | None = None
    facts: list[FactCycle] = []
    contexts: list[Context | None] = []
    failures: list[str | None] = []
    tokens: list[int] = []
    appended: list[dict] = []
    digests: set[str] = set()
    for cycle, segment in enumerate(parts, 1):
        appended += segment
        seen = retained_fields(task, full_context(replace(task, history=tuple(appended))).evidence_text)
        if cycle > 1 and previous is None:  # the chain broke: nothing is carried on
            ctx, why = None, failures[-1]
        else:
            step = cycle_input(task, previous, segment, cycle)
            digests.add(step.digest)
            sizes = task_sizes(step, cache, generations, method.whole or isinstance(method, Baseline), arm.ranker)
            out = outcome(step, arm, cache, 0, sizes, method=method)
            ctx, why = out.context, out.invalid
        missing = retained_fields(task, ctx.evidence_text) if ctx else {f: list(n) for f, n in task.needles.items()}
        kept = {f: ctx is not None and not m for f, m in missing.items()}
        facts += [FactCycle(task.id, k, cycle, f, not seen[f], kept[f], m) for f, m in missing.items()]
        contexts.append(ctx)
        failures.append(None if ctx else why or "no context")
        tokens.append(ctx.input_tokens if ctx else 0)
        previous = ctx
    return CycleRun(facts, contexts, failures, tokens, _keys(cache, digests))


def _keys(cache: FrozenCache, digests: set[str]) -> tuple[str, ...]:
    """The recordings of every part made for these cycle inputs. The cache's items are keyed
    ``(part, task digest, ...)``; read here rather than through a new cache method, so the code a
    single compaction's identity hashes stays as it is."""
    items = dict(cache._items)  # a snapshot: other conditions may add parts meanwhile
    return tuple(dict.fromkeys(k for key, made in items.items() if key[1] in digests for k in made.keys))


def condition_result(run: CycleRun) -> tuple[dict[str, float], dict[str, list[float]], list[dict[str, Any]]]:
    """A cycles condition's metrics (its last cycle's), step series (``step = cycle``) and table."""
    survival = run.survival()
    nan = float("nan")
    k = len(run.contexts)
    per = [[f for f in run.facts if f.cycle == c] for c in range(1, k + 1)]
    series = {
        "survival": [nan if s is None else s for s in survival],
        "facts_seen": [float(sum(f.seen for f in p)) for p in per],
        "facts_kept": [float(sum(f.seen and f.kept for f in p)) for p in per],
        "input_tokens": [float(t) for t in run.input_tokens],
    }
    metrics: dict[str, float] = {
        "cycles": float(k),
        "facts": float(len(per[-1])),
        "failed_cycles": float(sum(f is not None for f in run.failures)),
    }
    if survival[-1] is not None:  # the series' last step: the value MLflow shows as the run's
        metrics["survival_last"] = survival[-1]
    table = [f._asdict() for f in run.facts]
    return metrics, series, table
