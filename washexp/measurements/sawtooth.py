"""``measurement=sawtooth``, the seed's measurement 3: a store grown by the feed, washed when the gauge
fires (arm A) or never (arm B); always-loaded tokens per session."""

from washexp.measurements import Measurement

MEASUREMENT = Measurement(
    family="wash",
    run="washexp.wash.measure.study:plan_sawtooth",
    bounds={"sessions": (1, 10_000)},
    headline=("delta_pct",),
    record="washexp.wash.records.measurements:sawtooth_part",
    feed=True,
    order=30,
)
