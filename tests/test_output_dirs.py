"""Two sweeps started in the same second get a folder each (issue 37): the sweep's folder is its id
(the ``sweep`` tag ``washexp export --sweep`` takes), so a shared folder mixed two sweeps' runs,
logs and ``multirun.yaml``. Hydra's ``${now:%H-%M-%S}`` is frozen here, so "the same second" is
certain, not a race."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from tests.conftest import ROOT, run_cli
from washexp.config import register
from washexp.project import CLAIMED_ENV, new_command, new_dir


@pytest.fixture(autouse=True)
def _fresh_claims(monkeypatch):
    monkeypatch.delenv(CLAIMED_ENV, raising=False)


def test_a_second_command_with_the_same_base_gets_its_own_folder(tmp_path):
    base = str(tmp_path / "multirun" / "2026-12-04" / "06-30-00")
    first = new_dir(base)
    assert new_dir(base) == first == base  # asked again in one command: the folder it claimed
    new_command()
    second = new_dir(base)
    new_command()
    third = new_dir(base)
    assert (second, third) == (f"{base}-2", f"{base}-3")
    assert all(Path(p).is_dir() for p in (first, second, third))


def test_a_folder_made_by_anyone_else_is_never_shared(tmp_path):
    base = tmp_path / "outputs" / "06-30-00"
    base.mkdir(parents=True)  # another process (or a Hydra of before) made it this second
    assert new_dir(str(base)) == f"{base}-2"


@pytest.fixture
def frozen_now(monkeypatch):
    """Hydra's ``now`` resolver reads one instant, whatever the clock does."""
    from hydra.core import utils

    class Frozen(datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime(2026, 12, 4, 6, 30, 0)

    monkeypatch.setattr(utils, "datetime", Frozen)


@pytest.mark.parametrize("mode", ["sweep", "run"])
def test_the_projects_config_gives_two_commands_in_one_second_two_folders(tmp_path, monkeypatch, frozen_now, mode):
    monkeypatch.setenv("WASHEXP_PROJECT", str(tmp_path))
    register()
    folders = []
    for _ in range(2):
        new_command()  # what washexp.app does as each command starts
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
            cfg = compose("config", return_hydra_config=True)
            folders.append(cfg.hydra[mode].dir)
    assert folders[0].endswith("/2026-12-04/06-30-00")  # the same second, certainly
    assert folders[1] == folders[0] + "-2"
    assert all(Path(f).is_dir() and Path(f).parent.parent.parent == tmp_path for f in folders)


@pytest.mark.slow
def test_two_real_sweeps_into_one_base_keep_their_runs_apart(tmp_path):
    """End to end: Hydra makes the folder, the runs carry it as their sweep id."""
    from mlflow.tracking import MlflowClient

    base = "${washexp.new_dir:" + str(tmp_path / "multirun" / "same-second") + "}"
    args = ["-m", "method=S", "topn=1", "task=payment", f"hydra.sweep.dir={base}"]
    first = run_cli([*args, "rerun=true"], tmp_path, env={"CI": "1"})
    second = run_cli([*args, "rerun=true"], tmp_path, env={"CI": "1"})
    assert "multirun/same-second ·" in first.stdout and "multirun/same-second-2 ·" in second.stdout
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = client.get_experiment_by_name("compaction")
    sweeps = {r.data.tags.get("sweep") for r in client.search_runs([exp.experiment_id])}
    assert {os.path.basename(s) for s in sweeps if s} >= {"same-second", "same-second-2"}
