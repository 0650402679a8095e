"""Where and how long a record's runs ran: the machine they recorded and their summed wall time."""

from __future__ import annotations

import pandas as pd

from washexp.export.selection import tag


def run_facts(arms: pd.DataFrame) -> dict[str, str]:
    """Provenance lines for ``arms`` (one row per arm or measurement run). A run from before the
    ``washexp.machine`` tag says so rather than naming a machine it may not have run on."""
    machines = sorted({str(v) for v in tag(arms, "washexp.machine").dropna()})
    spans = (arms["end_time"] - arms["start_time"]).dropna()
    minutes = spans.dt.total_seconds().sum() / 60
    return {
        "machine (as the runs recorded it)": "; ".join(machines) or "not recorded (runs before washexp.machine)",
        "wall time (arm runs, summed)": f"{minutes:.1f} min over {len(spans)} of {len(arms)} runs",
    }
