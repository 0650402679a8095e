"""``measurement=infinity``, the seed's measurement 2: rounds well past fat exhaustion; fact loss per
round and cumulative, split by phase."""

from washexp.measurements import Measurement

MEASUREMENT = Measurement(
    family="wash",
    run="washexp.wash.measure.study:plan_rounds",
    bounds={"rounds": (1, 1000), "dry_stop": (0, 1000)},
    headline=("off/muscle_lost", "configured/muscle_lost", "configured/fat_removed_pct"),
    record="washexp.wash.records.measurements:infinity_part",
    order=20,
)
