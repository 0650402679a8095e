"""The arm tables' API figures: computed the same whatever order the store lists runs and metrics in."""

import itertools

import pandas as pd

from washexp.compaction.records.tables import api_by_arm

FULL = 7269.0
SIZES = {"a": (5076, 6344, 6384), "b": (6384, 5076, 6344), "c": (6344, 6384, 5076)}
"""Per task, its three generations' API input sizes: summed naively, their cuts against Full give
55.06947310496629 in one order and 55.0694731049663 in another."""


def _conds(tasks, gens) -> pd.DataFrame:
    rows = [{"label": "Full", "cohort": "primary", "task": t, "metrics.api_input_tokens": FULL} for t in SIZES]
    for t in tasks:
        row = {"label": "S top1", "cohort": "primary", "task": t, "metrics.contexts": 3.0}
        row.update({f"metrics.api_input_tokens/g{g}": float(SIZES[t][g]) for g in gens})
        rows.append(row)
    return pd.DataFrame(rows)


def test_the_api_reduction_does_not_hang_on_the_order_of_runs_or_generations():
    seen = {
        api_by_arm(_conds(tasks, gens))["S top1", "primary"]["api_reduction_pct"]
        for tasks in itertools.permutations(SIZES)
        for gens in itertools.permutations(range(3))
    }
    assert len(seen) == 1
    (reduction,) = seen
    cuts = [100.0 * (FULL - s) / FULL for t in SIZES for s in SIZES[t]]
    assert abs(reduction - sum(cuts) / len(cuts)) < 1e-9
