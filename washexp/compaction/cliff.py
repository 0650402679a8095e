"""The cliff (``measurement=cliff``): where a method's retention falls under half of Full's.

Two axes over generated sets (:mod:`washexp.tasks.generate`, one set per length, every task of a
set that length, from the config's seed):

- budget: the compaction budget in Qwen tokens at one length (``budget_length``): S's and H's
  allowance (what the study sizes from the evidence, here given), masking's latest tool outputs
  that fit in it (:func:`mask_keep`);
- length: the trajectory's tool results from about 1k to 64k tokens at one budget
  (``length_budget``).

Each grid point's per-task value is ``d = retention - FULL_SHARE * Full's retention`` on the same
task; the point is *under* when ``mean(d) < 0``. Ordered from the gentle end of an axis (the
largest budget, the shortest length) to the harsh end, the crossing is the first point under; its
interval, on the grid, runs from the last gentler point whose ``d`` interval (the records' own
sign-flip interval, :func:`washexp.export.decide.interval`) lies wholly above 0 to the first
point from the crossing on whose interval lies wholly below 0. No point under: the method never
crosses within the grid, said as such and never extrapolated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from washexp.compaction.fixtures import Task
from washexp.errors import ConfigError
from washexp.export import decide
from washexp.tasks.generate import LIMITS, Params, generate
from washexp.tokens import count

FULL_SHARE = 0.5
"""The cliff's edge: retention under this share of Full's."""
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


@dataclass(frozen=True)
class Point:
    """One grid point of one axis: its value and the per-task ``d`` (see the module docstring)."""

    x: int
    d: tuple[float, ...]

    @property
    def mean(self) -> float:
        return sum(self.d) / len(self.d)

    @property
    def interval(self) -> tuple[float, float]:
        return decide.interval(list(self.d))

    @property
    def under(self) -> bool:
        return self.mean < 0


@dataclass(frozen=True)
class Crossing:
    """Where an axis's points, gentle to harsh, first fall under (None: never within the grid)."""

    at: int | None
    sure_over: int | None
    """The last point before ``at`` whose interval lies wholly above 0 (None: none is sure)."""
    sure_under: int | None
    """The first point from ``at`` on whose interval lies wholly below 0 (None: none is sure)."""

    gentlest: bool = False
    """The crossing is the grid's gentle end: under already at every point measured."""

    def describe(self, unit: str) -> str:
        if self.at is None:
            return "never crosses within the grid"
        if self.gentlest:
            return f"under already at the grid's gentle end, {self.at} {unit} (the crossing lies outside the grid)"
        over = "no gentler point surely above" if self.sure_over is None else f"surely above at {self.sure_over}"
        under = "no point surely under" if self.sure_under is None else f"surely under at {self.sure_under}"
        return f"{self.at} {unit} ({over}; {under})"


def crossing(points: Sequence[Point]) -> Crossing:
    """The crossing of ``points`` ordered from the gentle end to the harsh end of an axis."""
    first = next((i for i, p in enumerate(points) if p.under), None)
    if first is None:
        return Crossing(None, None, None)
    over = [p.x for p in points[:first] if p.interval[0] > 0]
    under = [p.x for p in points[first:] if p.interval[1] < 0]
    return Crossing(points[first].x, over[-1] if over else None, under[0] if under else None, first == 0)
