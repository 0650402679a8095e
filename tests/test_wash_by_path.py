"""The wash benchmark on a store or feed given by path, as a user runs it on their own memory: a
real Hydra run into a real SQLite MLflow store. A store's identity is its content, never its path:
by name, by absolute and by relative path it is one condition with one result; a store without
ground truth is refused before any work; the user's folder is never written."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import ROOT, run_cli

STORES = ROOT / "fixtures" / "wash"
FEEDS = ROOT / "fixtures" / "wash-feed"
CEILING = ["benchmark=wash", "measurement=ceiling", "rounds=3"]


def _runs(track: Path, kind: str) -> dict[str, tuple[str, dict[str, float]]]:
    """name -> (identity hash, metrics) of the runs of one kind (store runs by store, arms by arm)."""
    client = MlflowClient(f"sqlite:///{track / 'mlflow.db'}")
    exp = client.get_experiment_by_name("wash")
    key = {"wash-store": "store", "wash-arm": "arm", "measurement": "measurement"}[kind]
    runs = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("washexp.kind") == kind]
    assert all(r.info.status == "FINISHED" for r in runs)
    return {r.data.tags[key]: (r.data.tags["washexp.hash"], r.data.metrics) for r in runs}


def _tree(folder: Path) -> dict[str, tuple[bytes, int, int]]:
    """Every entry under the folder with its bytes, mode and mtime: what "never written" means."""
    out = {}
    for p in sorted(folder.rglob("*")):
        st = p.lstat()
        out[p.relative_to(folder).as_posix()] = (p.read_bytes() if p.is_file() else b"", st.st_mode, st.st_mtime_ns)
    return out


@pytest.mark.slow
def test_a_store_by_name_by_absolute_and_by_relative_path_is_one_condition(tmp_path):
    named, absolute, track = tmp_path / "named", tmp_path / "absolute", tmp_path / "track"
    for folder in (named, absolute, track):
        folder.mkdir()
    run_cli([*CEILING, "store=superseded"], named)
    by_name = _runs(named, "wash-store")
    assert list(by_name) == ["superseded"] and by_name["superseded"][1]["muscle_total"] > 0

    run_cli([*CEILING, f"store={STORES / 'superseded'}"], absolute)
    assert _runs(absolute, "wash-store") == by_name  # same identity, same numbers, same name

    # By relative path from the directory the user runs in, with Hydra moving the job's directory.
    run_cli([*CEILING, "store=fixtures/wash/superseded", "hydra.job.chdir=true"], track, cwd=ROOT)
    assert _runs(track, "wash-store") == by_name

    # A copy elsewhere is the same content, so the same condition (store run and measurement run):
    # in the same tracking store it is reused, not run again.
    copy = shutil.copytree(STORES / "superseded", tmp_path / "elsewhere" / "superseded")
    copied = tmp_path / "copied"
    copied.mkdir()
    run_cli([*CEILING, f"store={copy}"], copied)
    for kind in ("wash-store", "measurement"):
        assert _runs(copied, kind) == _runs(named, kind)
    proc = run_cli([*CEILING, f"store={copy}"], track)
    assert "finished already" in proc.stdout, proc.stdout
    assert _runs(track, "wash-store") == by_name


def test_a_users_store_in_a_list_is_washed_on_a_scratch_copy_and_never_written(tmp_path):
    mine = Path(shutil.copytree(STORES / "dup-heavy", tmp_path / "data" / "mine"))
    os.chmod(mine / "MEMORY.md", 0o640)
    before = _tree(mine)
    run_cli([*CEILING, f"store=[lean,{mine}]"], tmp_path)
    runs = _runs(tmp_path, "wash-store")
    assert sorted(runs) == ["lean", "mine"]
    assert runs["mine"][1]["fat_removed_pct"] > 0  # it was washed (a copy of it)
    assert _tree(mine) == before


def test_a_store_by_path_without_ground_truth_is_one_line_exit_2_before_any_work(tmp_path):
    mine = Path(shutil.copytree(STORES / "lean", tmp_path / "mine"))
    (mine / "expected.json").unlink()
    before = _tree(mine)
    proc = run_cli([*CEILING, "store=[lean,./mine]"], tmp_path, check=False)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("washexp: ")]
    assert lines == [
        f"washexp: {mine}/expected.json: missing: a scored store states its ground truth here "
        "(see docs/your-own-store.md)"
    ], proc.stderr
    assert "Traceback" not in proc.stderr
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = client.get_experiment_by_name("wash")
    assert exp is None or client.search_runs([exp.experiment_id]) == []  # nothing half-written
    assert _tree(mine) == before


@pytest.mark.slow
def test_a_feed_by_path_is_the_feed_by_name(tmp_path):
    named, track = tmp_path / "named", tmp_path / "track"
    named.mkdir()
    track.mkdir()
    sawtooth = ["benchmark=wash", "measurement=sawtooth", "sessions=4"]
    run_cli([*sawtooth, "feed=dispatch-team"], named)
    feed = Path(shutil.copytree(FEEDS / "dispatch-team", tmp_path / "feeds" / "dispatch-team"))
    before = _tree(feed)
    run_cli([*sawtooth, "feed=../feeds/dispatch-team"], track)
    by_name, by_path = _runs(named, "wash-arm"), _runs(track, "wash-arm")
    assert sorted(by_name) == ["A", "B"] and by_path == by_name
    assert _tree(feed) == before
