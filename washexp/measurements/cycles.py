"""``measurement=cycles``: repeated compaction, each trajectory split into k segments
(``docs/guide/cycles.md``)."""

from washexp.measurements import Measurement

MEASUREMENT = Measurement(
    family="compaction",
    run="washexp.compaction.cycles_job:run_job",
    record="washexp.compaction.records.cycles:records",
    order=20,
)
