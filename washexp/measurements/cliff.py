"""``measurement=cliff``: retention against the compaction budget and against trajectory length,
over task sets it generates itself (``docs/guide/tasksets.md``, "The cliff")."""

from washexp.measurements import Measurement

MEASUREMENT = Measurement(
    family="compaction",
    run="washexp.compaction.cliff_job:run_job",
    record="washexp.compaction.records.cliff:records",
    order=30,
)
