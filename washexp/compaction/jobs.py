"""The compaction benchmark's job: its ``measurement`` option picks what one Hydra job runs
(:mod:`washexp.measurements`: ``single``, the study, by default; ``cycles``; any other declared there)."""

from __future__ import annotations

from washexp import measurements


def run_job(cfg, job, sweep) -> None:
    # a wash measurement (measurement=ceiling) under this benchmark: app.check_family refused it
    measurement = measurements.get(cfg.compaction.measurement.name, "compaction")
    measurements.check_bounds("compaction", cfg.compaction.measurement)
    measurements.use(measurement.run)(cfg, job, sweep)
