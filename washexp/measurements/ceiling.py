"""``measurement=ceiling``, the seed's measurement 1: rounds of the full tier with no rest; the first
bad round per store bounds the washer's consecutive-run ceiling."""

from washexp.measurements import Measurement

MEASUREMENT = Measurement(
    family="wash",
    run="washexp.wash.measure.study:plan_rounds",
    bounds={"rounds": (1, 1000), "dry_stop": (0, 1000)},
    headline=("off/ceiling", "off/muscle_lost", "off/fat_removed_pct"),
    record="washexp.wash.records.measurements:ceiling_part",
    order=10,
)
