"""``washexp power RECORD --delta 0.10``: how many tasks, generations and answers a comparison
needs to detect a difference of ``delta`` with the given power, from a record's own variance.

The record's per-task values (``data.compaction_tasks``) give the spread of the per-task
differences of each pair in a family (default: S vs H on the primary cohort); its nested scores
(``data.compaction_nested``: generations -> answers per arm and task) split that spread into
components:

- answers: the variance of answer scores within a generation (pooled);
- generations: the variance of generation means within a task, less what its answers explain;
- tasks: the variance of the per-task differences, less what two arms' generations and answers
  explain (never below 0).

A task's difference with ``G`` generations of ``A`` answers then varies by
``v = s2_task + 2 (s2_gen / G + s2_ans / (G A))``, and the test at Holm's strictest level in a
family of ``m`` comparisons (``alpha / m``) needs about ``n = ((z(1 - alpha / 2m) + z(power)) sqrt(v)
/ delta)^2`` tasks, never fewer than the sign-flip test's discreteness allows (``2 / 2^n <
alpha / m``). A component the record cannot estimate (one generation per task, one answer per
generation, retention's one value per generation) is said and left out. docs/guide/decisions.md
shows the arithmetic; tests/test_power.py checks it by simulation.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

import numpy as np

from washexp.compaction.records import decisions as record_decisions
from washexp.errors import ConfigError, Parser, WashexpError, fail
from washexp.export import decide


def _fraction(name: str):
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} {text!r} is not a number") from None
        if not 0 < v < 1:
            raise argparse.ArgumentTypeError(f"{name} {text} is outside (0, 1)")
        return v

    return parse


@dataclass(frozen=True)
class Components:
    """Variances of one family's per-task differences; None: the record cannot estimate it."""

    tasks: float
    generations: float | None
    answers: float | None
    n_tasks: int
    per_task: float
    """The observed variance of a task's difference (every component at the record's sizes)."""
    G: int
    A: int

    def variance(self, G: int, A: int) -> float:
        v = self.tasks
        if self.generations is not None:
            v += 2 * self.generations / G
        if self.answers is not None:
            v += 2 * self.answers / (G * A)
        return v


def family_pairs(rows: list[dict], family: str) -> list[tuple[str, str]]:
    for name, pairs in record_decisions.families(rows):
        if name == family:
            return pairs
    known = ", ".join(n for n, _ in record_decisions.families(rows))
    raise ConfigError(f"family {family!r}: not in this record (it has: {known})")


def components(record: dict, family: str, cohort: str) -> Components:
    rows = record["data"]["compaction_tasks"]
    metric = "fact_accuracy" if "fact_accuracy" in record_decisions.metrics_of(rows) else "retention"
    values = record_decisions.per_task(rows, metric, cohort, False)
    diffs = []
    for a, b in family_pairs(rows, family):
        tasks = sorted(values.get(a, {}).keys() & values.get(b, {}).keys())
        if len(tasks) >= 2:
            diffs.append([values[a][t] - values[b][t] for t in tasks])
    if not diffs:
        raise ConfigError(f"family {family!r}, cohort {cohort}: fewer than 2 tasks in common in every pair")
    per_task = float(np.mean([np.var(d, ddof=1) for d in diffs]))
    nested = [
        r["scores"]
        for r in record["data"].get("compaction_nested", [])
        if r["cohort"] == cohort and r["metric"] == metric
    ]
    gens = [len(s) for s in nested]
    answers = [len(g) for s in nested for g in s]
    G = int(round(np.mean(gens))) if gens else 1
    A = int(round(np.mean(answers))) if answers else 1
    s2_ans = _pooled([g for s in nested for g in s]) if answers and max(answers) > 1 else None
    means = [[float(np.mean(g)) for g in s] for s in nested]
    s2_gen = None
    if gens and max(gens) > 1:
        s2_gen = max(0.0, _pooled(means) - (s2_ans or 0.0) / A)
    explained = 2 * ((s2_gen or 0.0) / G + (s2_ans or 0.0) / (G * A))
    return Components(max(0.0, per_task - explained), s2_gen, s2_ans, max(len(d) for d in diffs), per_task, G, A)


def _pooled(groups: list[list[float]]) -> float:
    """The within-group variance pooled over groups of two values or more."""
    num = sum(float(np.var(g, ddof=1)) * (len(g) - 1) for g in groups if len(g) > 1)
    den = sum(len(g) - 1 for g in groups if len(g) > 1)
    return num / den if den else 0.0


def plan(c: Components, delta: float, power: float, m: int) -> list[tuple[int, int, int]]:
    """(generations, answers, tasks needed) for the record's sizes and a few around them."""
    level = decide.ALPHA / m
    sizes = dict.fromkeys([(c.G, c.A), (1, 1), (3, 2), (5, 2), (5, 4)])
    return [(G, A, decide.tasks_for(delta, math.sqrt(c.variance(G, A)), alpha=level, power=power)) for G, A in sizes]


def detectable(c: Components, n: int, power: float, m: int) -> float | None:
    """The smallest difference ``n`` tasks detect with ``power`` (None: none, the test's discreteness)."""
    level = decide.ALPHA / m
    if n < decide.min_tasks(level):
        return None
    z = decide.NormalDist().inv_cdf(1 - level / 2) + decide.NormalDist().inv_cdf(power)
    return z * math.sqrt(c.variance(c.G, c.A) / n)


def report(path: str, record: dict, delta: float, power: float, family: str, cohort: str) -> list[str]:
    c = components(record, family, cohort)
    m = len(family_pairs(record["data"]["compaction_tasks"], family))
    out = [
        f"{path}: family {family!r} ({m} comparisons, Holm's strictest level {decide.ALPHA}/{m}), cohort {cohort}, "
        f"{c.n_tasks} tasks, {c.G} generation(s) x {c.A} answer(s)",
        f"  variance of a task's difference: {c.per_task:.4f} observed; components: tasks {c.tasks:.4f}, "
        + (
            f"generations {c.generations:.4f}"
            if c.generations is not None
            else "generations not estimable (one per task): left out"
        )
        + ", "
        + (
            f"answers {c.answers:.4f}"
            if c.answers is not None
            else "answers not estimable (one value per generation): left out"
        ),
        f"  to detect {delta:g} with {power:.0%} power at two-sided {decide.ALPHA} after Holm over {m}:",
    ]
    out += [f"    {G} generation(s) x {A} answer(s): about {n} tasks" for G, A, n in plan(c, delta, power, m)]
    d = detectable(c, c.n_tasks, power, m)
    if d is None:
        out.append(
            f"  this record ({c.n_tasks} tasks) cannot decide any difference in this family: its smallest exact p, "
            f"2/2^{c.n_tasks} = {2 / 2**c.n_tasks:g}, is above {decide.ALPHA}/{m}; "
            f"{decide.min_tasks(decide.ALPHA / m)} tasks are the fewest that can"
        )
    else:
        out.append(
            f"  this record ({c.n_tasks} tasks) detects a difference of about {d:.3f} or more with {power:.0%} power"
        )
    return out


def main(argv: list[str]) -> int:
    from washexp.verify import load_record

    p = Parser(prog="washexp power", description=__doc__.split("\n\n")[0].replace("``", ""))
    p.add_argument("record", help="a compaction record .json (or its .md)")
    p.add_argument("--delta", type=_fraction("--delta"), default=0.10, help="the difference to detect (default 0.10)")
    p.add_argument("--power", type=_fraction("--power"), default=decide.POWER, help="default 0.80")
    p.add_argument("--family", default="S vs H", help="the family of comparisons (default: S vs H)")
    p.add_argument("--cohort", choices=record_decisions.COHORTS, default="primary")
    try:
        args = p.parse_args(argv)
        path, record = load_record(args.record)
        if not record["data"].get("compaction_tasks"):
            raise ConfigError(
                f"{path}: no per-task values (data.compaction_tasks): not a compaction record of this washexp"
            )
        lines = report(str(path), record, args.delta, args.power, args.family, args.cohort)
    except WashexpError as err:
        return fail("washexp power", err)
    print("\n".join(lines))
    return 0
