"""Benchmark name -> runner. A runner gets the typed config and the job's Hydra facts."""

from __future__ import annotations

from washexp.registry import Registry

RUNNERS: Registry = Registry("benchmark")


@RUNNERS.register("compaction")
def _compaction(cfg, job) -> None:
    from washexp.compaction.study import run_arm

    run_arm(cfg, job, lambda: _tracker(cfg))


def _tracker(cfg):
    from washexp.tracking import open_tracker

    t = cfg.tracking
    return open_tracker(t.enabled, t.uri, t.artifacts, t.experiment or cfg.benchmark.name)


def run_benchmark(cfg, job) -> None:
    RUNNERS.get(cfg.benchmark.name)(cfg, job)
