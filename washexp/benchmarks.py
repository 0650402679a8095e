"""The benchmark families: name -> the job that runs one Hydra job of it, and its record builder."""

from __future__ import annotations

from washexp.registry import Registry

JOBS = Registry(
    "benchmark", {"compaction": "washexp.compaction.jobs:run_job", "wash": "washexp.wash.measure.study:run_job"}
)
"""``benchmark.name`` -> ``run_job(cfg, job, sweep)``."""

RECORDS = Registry(
    "record builder",
    {"compaction": "washexp.compaction.records.arms:build", "wash": "washexp.wash.records.measurements:build"},
)
"""topic -> ``build(runs: DataFrame, options: ExportOptions) -> list[Record]``."""

COMPARERS = Registry(
    "comparer",
    {
        "compaction": "washexp.compaction.records.compare:compare",
        "compaction-cycles": "washexp.compaction.records.compare_cycles:compare",
        "wash": "washexp.wash.records.compare:compare",
    },
)
"""record kind (:func:`washexp.compare.kind`) -> ``compare(a: record dict, b: record dict) ->
washexp.compare.Findings``."""

CROSS_RECORDS = Registry(
    "cross-model record builder",
    {"compaction": "washexp.compaction.records.cross_model:build", "wash": "washexp.wash.records.cross_model:build"},
)
"""topic -> ``build(runs: DataFrame, options: ExportOptions) -> Record``: ``options.models`` side by side."""
