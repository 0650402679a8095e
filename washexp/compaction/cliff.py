"""The cliff (``measurement=cliff``): where a method's retention falls under half of Full's.

Two axes over generated sets (:mod:`washexp.tasks.generate`, one set per length, every task of a
set that length, from the config's seed):

- budget: the compaction budget in Qwen tokens at one length (``budget_length``): S's and H's
  allowance (what the study sizes from the evidence, here given), masking's latest tool outputs
  that fit in it (:func:`mask_keep`);
- length: the trajectory's tool results from about 1k to 64k tokens at one budget
  (``length_budget``).

Where a method falls under half of Full's is the record's rule
(:mod:`washexp.compaction.records.cliff`): it reads what these conditions logged.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from washexp.compaction.inputs.fixtures import Task
from washexp.errors import ConfigError
from washexp.tasks.generate import LIMITS, Params, generate
from washexp.tokens import count

METHODS = ("S", "H", "mask")
"""The methods a budget means something for: S's and H's allowance, masking's kept outputs."""
BUDGET_RANGE = (1, 65536)


@dataclass(frozen=True)
class Grid:
    """The cliff's stated grid and the sets it generates (checked before anything is written)."""

    seed: int
    tasks: int
    budgets: tuple[int, ...]
    budget_length: int
    lengths: tuple[int, ...]
    length_budget: int

    @classmethod
    def of(cls, m) -> Grid:
        """The grid of ``cfg.compaction.measurement``; a value out of range is a ConfigError naming it."""
        grid = cls(m.seed, m.tasks, tuple(m.budgets), m.budget_length, tuple(m.lengths), m.length_budget)
        grid.check()
        return grid

    def check(self) -> None:
        low, high = LIMITS["min_tokens"]
        for key, values, (lo, hi) in (
            ("tasks", [self.tasks], LIMITS["n"]),
            ("budgets", self.budgets, BUDGET_RANGE),
            ("budget_length", [self.budget_length], (low, high)),
            ("lengths", self.lengths, (low, high)),
            ("length_budget", [self.length_budget], BUDGET_RANGE),
        ):
            if not values:
                raise ConfigError(f"cliff.{key}=[]: needs at least one value")
            for v in values:
                if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                    raise ConfigError(f"cliff.{key}={v!r}: must be a whole number within {lo:g}..{hi:g}")
            if len(set(values)) < len(values):
                raise ConfigError(f"cliff.{key}={list(values)}: a value twice")

    def set_params(self, length: int) -> Params:
        """The generator's parameters of the set at ``length`` (its defaults otherwise)."""
        return Params(n=self.tasks, min_tokens=length, max_tokens=length)

    @property
    def points(self) -> list[tuple[int, int]]:
        """Every (length, budget) measured: the budget axis, then the length axis (their shared point once)."""
        both = [(self.budget_length, b) for b in self.budgets] + [(n, self.length_budget) for n in self.lengths]
        return list(dict.fromkeys(both))

    @property
    def set_lengths(self) -> list[int]:
        return sorted({n for n, _ in self.points})


def generate_sets(grid: Grid, into: Path) -> dict[int, tuple[Path, str]]:
    """Generate one set per length into ``into/L<length>`` (never under fixtures/: the caller's
    output folder); each set's folder and its manifest's sha256."""
    from washexp.tasks import manifest

    out = {}
    into.mkdir(parents=True, exist_ok=True)
    for length in grid.set_lengths:
        folder = into / f"L{length}"
        generate(grid.set_params(length), grid.seed, folder)
        out[length] = (folder, manifest.digest(folder / manifest.NAME))
    return out


def mask_keep(task: Task, budget: int) -> int:
    """Masking at a token budget: the most latest tool outputs whose rendered tokens fit in it."""
    spent, m = 0, 0
    for unit in reversed(task.units):
        spent += count(unit.render())
        if spent > budget:
            break
        m += 1
    return m
