"""A sweep's record is the sweep's: the README's single-cell and list-of-tasks commands after the
main job reuse its finished conditions without taking them out of its arms (the trap: they used
to move the runs into their own small arms, and the main record lost tasks)."""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import run_cli
from washexp.export import ExportOptions, build


def _cells(uri: str, sweeps: tuple[str, ...] = ()):
    """Every table cell and machine row of the one record (notes aside: they may name newer runs)."""
    (record,) = build(ExportOptions(uri, sweeps=sweeps))
    return {t.key: t.rows for t in record.tables}, record.data


@pytest.mark.slow
def test_the_readme_sequence_leaves_the_main_sweeps_record_as_it_was(store):
    uri = f"sqlite:///{store / 'mlflow.db'}"
    run_cli(["-m", "method=S,H", "topn=0..3"], store)
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("compaction").experiment_id
    (main,) = {r.data.tags["sweep"] for r in client.search_runs([exp])}
    before, before_sweep = _cells(uri), _cells(uri, (main,))
    assert before == before_sweep
    under = {
        r.info.run_id: r.data.tags["mlflow.parentRunId"]
        for r in client.search_runs([exp], "tags.`washexp.kind` = 'condition'")
    }

    run_cli(["method=S", "topn=3", "task=payment"], store)  # one cell
    run_cli(["method=H", "task=[payment,backup]"], store)  # a list of tasks

    runs = client.search_runs([exp], max_results=1000)
    conditions = [r for r in runs if r.data.tags["washexp.kind"] == "condition"]
    assert {r.info.run_id: r.data.tags["mlflow.parentRunId"] for r in conditions} == under  # nothing moved or redone
    links = [r for r in runs if r.data.tags["washexp.kind"] == "link"]
    assert len(links) == 3 and {r.data.tags["washexp.link"] for r in links} <= set(under)
    assert _cells(uri) == before  # the newest arms planned fewer tasks: the record keeps the whole arms
    assert _cells(uri, (main,)) == before

    (cell,) = {
        r.data.tags["sweep"]
        for r in runs
        if r.data.tags.get("task") == "payment"
        and r.data.tags["washexp.kind"] == "link"
        and r.data.tags["method"] == "S"
    }
    tables, _ = _cells(uri, (cell,))
    assert {r["task"] for r in tables["per_task_retention"]} == {"backup", "payment"}  # that sweep's own arms
