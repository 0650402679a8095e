"""A record's notes are about its own model's runs. Trap guarded: an unreachable endpoint's FAILED
arms (another model) were listed as "left out" in the notes of the offline reference record."""

from __future__ import annotations

from tests.conftest import run_cli
from tests.test_endpoint_down import _closed_port
from washexp.export import ExportOptions, build


def test_another_models_failed_runs_are_not_in_a_records_notes(store):
    run_cli(["method=S", "topn=1", "task=[backup]"], store, premade=True)
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    down = ["model=openai", f"endpoint.base_url={url}", "model.name=m", "endpoint.max_retries=0"]
    assert (
        run_cli(
            [*down, "method=S", "topn=1", "task=[backup]", f"endpoint.recordings={store / 'rec'}"], store, check=False
        ).returncode
        == 1
    )
    uri = f"sqlite:///{store / 'mlflow.db'}"
    [record] = build(ExportOptions(uri=uri))
    assert not [n for n in record.notes if "FAILED" in n or " m " in n], record.notes
