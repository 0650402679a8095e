"""A SQLite store's runs written with ``sqlite3`` (``washexp.tracking.literuns``): only at the schema
the installed MLflow makes, and then without importing MLflow at all.

What the rows hold is held to MLflow's own calls in ``tests/test_tracking_store.py``; here: when
the path is taken, that it never imports MLflow, that MLflow reads what it wrote, and that it
refuses what MLflow's validation refuses.
"""

from __future__ import annotations

import json
import math
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import ROOT
from washexp.tracking import open_tracker
from washexp.tracking.literuns import LiteRuns
from washexp.tracking.reader import has_run_tagged
from washexp.tracking.sqlite import schema_head
from washexp.tracking.views import VIEW_KEY, save_view, view_state


@pytest.fixture
def store(tmp_path) -> Path:
    """A store MLflow made (schema, experiment ``t``) holding one finished run tagged sweep=s1."""
    tracker = open_tracker(True, f"sqlite:///{tmp_path / 'mlflow.db'}", str(tmp_path / "mlruns"), "t", tmp_path)
    with tracker.open("first", "h1", {"topn": 2}, {"sweep": "s1"}) as run:
        run.finish({"retention": 0.5}, {"a.txt": "a\n"})
    tracker.close()
    return tmp_path / "mlflow.db"


def test_the_schema_head_is_the_revision_mlflow_leaves_a_new_store_at(store):
    with sqlite3.connect(store) as con:
        assert con.execute("SELECT version_num FROM alembic_version").fetchall() == [(schema_head(),)]
    uri = f"sqlite:///{store}"
    assert schema_head() and LiteRuns.of(uri, "t") is not None and LiteRuns.of(uri, "other") is None


@pytest.mark.parametrize(
    "change",
    [
        "UPDATE alembic_version SET version_num = 'a0000000000b'",  # an older (or newer) schema
        "ALTER TABLE runs ADD COLUMN extra TEXT",  # a column this module does not write
        "ALTER TABLE tags DROP COLUMN value",
    ],
)
def test_any_other_schema_is_left_to_mlflow(store, change):
    with sqlite3.connect(store) as con:
        con.execute(change)
    assert LiteRuns.of(f"sqlite:///{store}", "t") is None


def test_an_existing_store_is_written_without_importing_mlflow(store):
    """A second sweep into the store: lookups, a run with params, metrics, a step series, tags and
    artifacts, an orphan marked KILLED, the closing lines' lookup and view: no MLflow module loaded."""
    script = textwrap.dedent(
        f"""
        import json, sys
        from pathlib import Path
        from washexp.tracking import open_tracker
        from washexp.tracking.reader import has_run_tagged
        from washexp.tracking.views import save_view
        from washexp.tracking.writer import FoundRun
        root = Path({str(store.parent)!r})
        uri = f"sqlite:///{{root / 'mlflow.db'}}"
        tracker = open_tracker(True, uri, None, "t", root)
        found = tracker.find("h1")
        with tracker.open("second", "h2", {{"topn": 3, "roles": {{"read": "x"}}}}, {{"sweep": "s2"}}) as run:
            run.finish({{"retention": 0.25, "nan": float("nan")}}, {{"b/c.txt": "c\\n"}}, series={{"kept": [3.0, 2.0]}})
        orphan = tracker.open("orphan", "h3", {{}}, {{}})
        tracker.mark_killed(FoundRun(orphan.run_id, "RUNNING", {{}}, None), "its process is gone")
        orphan.closed = True
        tracker.close()
        out = {{"found": found.finished.run_id, "run": run.run_id, "orphan": orphan.run_id,
                "tagged": has_run_tagged(uri, "t", "sweep", "s2"), "untagged": has_run_tagged(uri, "t", "sweep", "s9"),
                "view": save_view(uri, "t", "compaction"),
                "mlflow": sorted(m for m in sys.modules if m == "mlflow" or m.startswith(("mlflow.", "sqlalchemy")))}}
        print(json.dumps(out))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True)
    out = json.loads(done.stdout)
    assert out["mlflow"] == [] and out["tagged"] is True and out["untagged"] is False
    client = MlflowClient(f"sqlite:///{store}")
    experiment = client.get_experiment_by_name("t")
    first = client.search_runs([experiment.experiment_id], "tags.sweep = 's1'")[0]
    assert out["found"] == first.info.run_id and out["view"] == experiment.experiment_id
    run = client.get_run(out["run"])
    assert run.info.status == "FINISHED" and run.info.run_name == "second"
    assert run.data.params == {"topn": "3", "roles": '{"read":"x"}'}
    assert run.data.metrics["retention"] == 0.25 and run.data.metrics["kept"] == 2.0
    assert [m.value for m in client.get_metric_history(out["run"], "kept")] == [3.0, 2.0]
    assert math.isnan(run.data.metrics["nan"])
    local = Path(client.download_artifacts(out["run"], "", str(store.parent / "down")))
    assert (local / "b" / "c.txt").read_text() == "c\n" and (local / "manifest.json").is_file()
    killed = client.get_run(out["orphan"])
    assert killed.info.status == "KILLED" and killed.data.tags["washexp.error"] == "its process is gone"
    assert killed.info.end_time
    assert json.loads(experiment.tags[f"mlflow.sharedViewState.{VIEW_KEY}"]) == view_state("compaction")


def test_what_mlflow_refuses_is_refused(store):
    lite = LiteRuns.of(f"sqlite:///{store}", "t")
    run_id, _ = lite.create("r", {})
    with pytest.raises(ValueError, match="at most 8000"):
        lite.complete(run_id, {}, [], {"long": "x" * 8001}, "FINISHED", 1)
    with pytest.raises(ValueError, match="at most 6000"):
        lite.complete(run_id, {"long": "x" * 6001}, [], {}, "FINISHED", 1)
    with pytest.raises(ValueError, match="1 to 250"):
        lite.complete(run_id, {}, [("k" * 251, 1.0, 1, 0)], {}, "FINISHED", 1)
    assert MlflowClient(f"sqlite:///{store}").get_run(run_id).info.status == "RUNNING"  # nothing half-written


def test_the_closing_lines_lookups_agree_with_mlflows(store, monkeypatch):
    uri = f"sqlite:///{store}"
    lite = [has_run_tagged(uri, "t", "sweep", s) for s in ("s1", "s2")] + [save_view(uri, "t", "wash")]
    monkeypatch.setattr(LiteRuns, "of", classmethod(lambda cls, *args: None))
    assert lite == [has_run_tagged(uri, "t", "sweep", s) for s in ("s1", "s2")] + [save_view(uri, "t", "wash")]
    assert lite[:2] == [True, False] and lite[2] == MlflowClient(uri).get_experiment_by_name("t").experiment_id
