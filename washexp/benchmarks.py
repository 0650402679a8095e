"""The benchmark families: name -> the job that runs one Hydra job of it, and its record builder."""

from __future__ import annotations

from washexp.registry import Registry

FAMILIES = {"compaction": "washexp.compaction.jobs", "wash": "washexp.wash.measure.study"}
"""``benchmark.name`` -> the module of its job: ``run_job(cfg, job, sweep)`` and ``check(cfg)``."""

JOBS = Registry("benchmark", {name: f"{module}:run_job" for name, module in FAMILIES.items()})
"""``benchmark.name`` -> ``run_job(cfg, job, sweep)``, for a config that passed its ``check``."""

CHECKS = Registry("benchmark", {name: f"{module}:check" for name, module in FAMILIES.items()})
"""``benchmark.name`` -> ``check(cfg)``: the job's refusals its config alone decides, nothing read
or started (a sweep runs it on every job before the first)."""

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
