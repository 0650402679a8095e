"""``measurement=chain``: CoalWash's chain study, passes of an ungated compressor each seeing only the
previous output (``washexp.wash.measure.fidelity``)."""

from washexp.measurements import Measurement

MEASUREMENT = Measurement(
    family="wash",
    run="washexp.wash.measure.study:plan_fidelity",
    bounds={"passes": (1, 100), "pass_keep_pct": (1, 99)},
    headline=tuple(f"headline/{role}_recall_pct" for role in ("gated", "truncate", "plain")),
    record="washexp.wash.records.measurements:chain_part",
    order=50,
)
