"""``measurement=controlled``: CoalWash's controlled experiment, arms cut to the same size
(``washexp.wash.measure.fidelity``)."""

from washexp.measurements import Measurement

MEASUREMENT = Measurement(
    family="wash",
    run="washexp.wash.measure.study:plan_fidelity",
    bounds={"target_pct": (1, 99), "repeats": (1, 100)},
    headline=tuple(f"headline/{role}_recall_pct" for role in ("gated", "truncate", "plain")),
    record="washexp.wash.records.measurements:controlled_part",
    order=40,
)
