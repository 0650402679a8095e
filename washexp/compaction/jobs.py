"""The compaction benchmark's job: its ``measurement`` option picks what one Hydra job runs."""

from __future__ import annotations

from washexp.errors import ConfigError

MEASUREMENTS = ("single", "cycles", "cliff")
"""``single``: one compaction per task (:mod:`washexp.compaction.study`); ``cycles``: repeated
compaction (:mod:`washexp.compaction.cycles_job`); ``cliff``: retention against budget and length over
generated sets (:mod:`washexp.compaction.cliff_job`)."""


def run_job(cfg, job, sweep) -> None:
    # a wash measurement (measurement=ceiling) under this benchmark: app.check_family refused it
    name = cfg.compaction.measurement.name
    if name == "cycles":
        from washexp.compaction import cycles_job

        cycles_job.run_job(cfg, job, sweep)
    elif name == "cliff":
        from washexp.compaction import cliff_job

        cliff_job.run_job(cfg, job, sweep)
    elif name == "single":
        from washexp.compaction import study

        study.run_job(cfg, job, sweep)
    else:
        raise ConfigError(f"measurement={name}: the compaction benchmark's measurements: {', '.join(MEASUREMENTS)}")
