"""The compaction benchmark's job: its ``measurement`` option picks what one Hydra job runs
(:mod:`washexp.measurements`: ``single``, the study, by default; ``cycles``; any other declared there)."""

from __future__ import annotations

from washexp import measurements


def check(cfg) -> None:
    """The compaction job's refusals that its config alone decides, nothing read or started (a
    sweep runs this on every job before the first: ``washexp.app.check_job``)."""
    # a wash measurement (measurement=ceiling) under this benchmark: app.check_family refused it
    measurements.get(cfg.compaction.measurement.name, "compaction")
    measurements.check_bounds("compaction", cfg.compaction.measurement)
    if cfg.model.backend == "local":
        from washexp.models import local  # llama.cpp's wrapper: only for a local model

        local.check(cfg.model, cfg.endpoint)


def run_job(cfg, job, sweep) -> None:
    """One compaction job; its config has passed :func:`check` (``washexp.app.check_job``)."""
    measurement = measurements.get(cfg.compaction.measurement.name, "compaction")
    measurements.use(measurement.run)(cfg, job, sweep)
