"""What CoalWash release each ported part of a wash follows: every wash run's tags, every record's provenance.

The scorer, the fidelity gate and the caliper each state the release they port (``FOLLOWS``); a
band gauge states its own in its option file (``pins``, required: ``washexp.wash.coalwash.gauge``).
"""

from __future__ import annotations

from washexp.wash.coalwash import caliper, gate, score

PARTS = ("scorer", "fidelity gate", "caliper", "band gauge")
"""The ported parts, in the order a record lists them."""


def tag(part: str) -> str:
    """The run tag that names ``part``'s release (``coalwash.fidelity-gate``)."""
    return "coalwash." + part.replace(" ", "-")


def releases(gauge_pins: str) -> dict[str, str]:
    """Run tags: each ported part -> the release it follows (the gauge's from its ``pins``)."""
    follows = {"scorer": score.FOLLOWS, "fidelity gate": gate.FOLLOWS, "caliper": caliper.FOLLOWS}
    return {tag(part): follows.get(part, gauge_pins) for part in PARTS}
