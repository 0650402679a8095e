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
    facts = {
        "machine (as the runs recorded it)": "; ".join(machines) or "not recorded (runs before washexp.machine)",
        "wall time (arm runs, summed)": f"{minutes:.1f} min over {len(spans)} of {len(arms)} runs",
    }
    live, replayed = (_summed(arms, f"metrics.calls_{kind}") for kind in ("live", "replayed"))
    if replayed:  # a replay's wall time is the harness's, not the model's: the record says so
        facts["model calls (arm runs, summed)"] = (
            f"{live} sent to the model, {replayed} answered from its recordings (endpoint.recordings):"
            " a replayed call takes none of the model's time, so the wall time above is not the model's"
        )
    return facts


def _summed(arms: pd.DataFrame, column: str) -> int:
    """A metric summed over the runs that logged it (0 when none did)."""
    return int(arms[column].dropna().sum()) if column in arms.columns else 0
