"""``measurement=single`` (the default): one compaction of each whole trajectory, the study."""

from washexp.measurements import Measurement

MEASUREMENT = Measurement(
    family="compaction",
    run="washexp.compaction.study:run_job",
    headline=(
        "primary/retention",
        "control/retention",
        "primary/fact_accuracy",
        "control/fact_accuracy",
        "all/input_tokens",
        "primary/reduction_pct",
    ),
    record="washexp.compaction.records.arms:study_records",
    order=10,
)
