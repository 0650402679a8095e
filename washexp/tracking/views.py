"""The view the MLflow UI opens an experiment's runs table on.

MLflow 3.x keeps a shared view of the runs table as an experiment tag
(``mlflow.sharedViewState.<key>``, a JSON object) and opens it from the URL
``#/experiments/<id>/runs?viewStateShareKey=<key>``: the search filter, the sort, the visible
columns and which runs show. The column picker is otherwise the only way to a metric column
(an arm run carries over a hundred metrics), and child runs would fill the first page.
"""

from __future__ import annotations

import json

from washexp import measurements
from washexp.tracking.kinds import KIND_TAG, Kind

VIEW_KEY = "washexp"
"""The share key washexp's view is saved under (one per experiment)."""

RUN_KINDS = {"compaction": Kind.ARM, "wash": Kind.MEASUREMENT}
"""Per family: the run kind the table shows (its headline columns are its measurements', the first
found: :func:`washexp.measurements.headlines`)."""


def view_state(family: str) -> dict:
    """The shared view for one family's experiment: its top-level runs, sorted by name, with the
    headline metrics as columns and every run shown (not the first 10). The sweep's id is a
    column beside the name: arms of two sweeps share a name (``S top1 · arm``)."""
    kind, metrics = RUN_KINDS.get(family, Kind.ARM), measurements.headlines(family) if family in RUN_KINDS else []
    columns = ["tags.`mlflow.runName`", "tags.`sweep`", *(f"metrics.`{m}`" for m in metrics)]
    return {
        "searchFilter": f"tags.`{KIND_TAG}` = '{kind.value}'",
        "orderByKey": "tags.`mlflow.runName`",
        "orderByAsc": True,
        "selectedColumns": columns,
        "columnOrder": columns,  # the headline first, in this order (the UI otherwise sorts by name)
        "columnWidths": {c: 140 for c in columns[2:]} | {columns[1]: 220},  # `primary/retention`; a sweep id
        "runsHiddenMode": "SHOW_ALL",
    }


def save_view(uri: str, experiment: str, family: str) -> str | None:
    """Save the view on ``experiment`` (replacing washexp's earlier one); its id, or None if the
    store has no such experiment."""
    from washexp.tracking.reader import client as open_client
    from washexp.tracking.reader import quiet_mlflow

    key, value = f"mlflow.sharedViewState.{VIEW_KEY}", json.dumps(view_state(family), separators=(",", ":"))
    with quiet_mlflow():
        client = open_client(uri)
        found = client.get_experiment_by_name(experiment)
        if found is None:
            return None
        if found.tags.get(key) != value:
            client.set_experiment_tag(found.experiment_id, key, value)
    return found.experiment_id


def runs_url(base: str, experiment_id: str) -> str:
    """The runs table on washexp's view (MLflow 3.x otherwise lands on an experiment's empty GenAI
    traces page)."""
    return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs?viewStateShareKey={VIEW_KEY}"
