"""The benchmark families: name -> the job that runs one Hydra job of it, and its record builder."""

from __future__ import annotations

from washexp.registry import Registry

JOBS = Registry("benchmark", {"compaction": "washexp.compaction.study:run_job", "wash": "washexp.wash.study:run_job"})
"""``benchmark.name`` -> ``run_job(cfg, job, sweep)``."""

RECORDS = Registry(
    "record builder", {"compaction": "washexp.compaction.record:build", "wash": "washexp.wash.record:build"}
)
"""topic -> ``build(runs: DataFrame, options: ExportOptions) -> list[Record]``."""

COMPARERS = Registry(
    "comparer", {"compaction": "washexp.compaction.compare:compare", "wash": "washexp.wash.compare:compare"}
)
"""topic -> ``compare(a: record dict, b: record dict) -> washexp.compare.Findings``."""

CROSS_RECORDS = Registry(
    "cross-model record builder",
    {"compaction": "washexp.compaction.record_models:build", "wash": "washexp.wash.record_models:build"},
)
"""topic -> ``build(runs: DataFrame, options: ExportOptions) -> Record``: ``options.models`` side by side."""
