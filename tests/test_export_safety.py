"""``washexp export`` writes inside ``--out`` only, builds a record only from what its bundle holds,
and leaves nothing half-written. Real sweep, real store.

Traps guarded: a symlink at ``OUT/.<stem>.bundle.tmp``, ``OUT/<stem>.md`` (with ``--overwrite``) or
``OUT/<stem>.bundle`` made export write outside ``--out`` (or left a temp folder and a traceback);
a record whose note named a newer partial rerun failed ``verify`` ("DIFFERS ... notes"), the rerun
not being in the bundle; ``--bundle`` while a sweep ran wrote the record, then refused its bundle.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import run_cli
from washexp.cli import main as washexp
from washexp.verify import main as verify


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """A sweep of two arms on two tasks, then one arm rerun on one task (a newer run that planned
    fewer tasks than the record covers)."""
    store = tmp_path_factory.mktemp("store")
    run_cli(["-m", "method=S", "topn=0,1", "task=[backup,refactor]"], store, env={"CI": "1"}, premade=True)
    run_cli(["method=S", "topn=0", "task=backup", "rerun=true"], store, env={"CI": "1"})
    return store


def export(store: Path, out: Path, *extra: str) -> int:
    return washexp(["export", "--tracking-uri", f"sqlite:///{store / 'mlflow.db'}", "--out", str(out), *extra])


@pytest.fixture(scope="module")
def stem(store, tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("first")
    assert export(store, out) == 0
    (record,) = out.glob("*.json")
    return record.stem


def snapshot(folder: Path) -> dict[str, tuple[str, int]]:
    """Every entry under ``folder``: its sha256 (files) and its mtime."""
    found = {}
    for path in sorted(folder.rglob("*")):
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "folder"
        found[str(path.relative_to(folder))] = (digest, path.lstat().st_mtime_ns)
    return found


@pytest.fixture
def sentinel(tmp_path) -> Path:
    """A folder outside ``--out`` that export must not change."""
    folder = tmp_path / "outside"
    (folder / "inner").mkdir(parents=True)
    (folder / "victim.md").write_text("mine\n")
    (folder / "inner" / "keep.txt").write_text("keep\n")
    return folder


def test_a_fresh_export_after_a_partial_rerun_verifies(store, tmp_path, capsys):
    out = tmp_path / "out"
    assert export(store, out, "--bundle") == 0
    (record,) = out.glob("*.json")
    assert "newer runs planned fewer tasks" in record.read_text()  # the note the bundle must explain
    capsys.readouterr()
    assert verify([str(record)]) == 0, capsys.readouterr().out


def test_a_link_at_the_bundles_temp_name_is_not_followed(store, stem, sentinel, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / f".{stem}.bundle.tmp").symlink_to(sentinel, target_is_directory=True)
    before = snapshot(sentinel)
    assert export(store, out, "--bundle") == 0
    assert snapshot(sentinel) == before
    bundle = out / f"{stem}.bundle"
    assert bundle.is_dir() and not bundle.is_symlink() and (bundle / "runs.json").is_file()
    assert verify([str(out / f"{stem}.json")]) == 0
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == [f".{stem}.bundle.tmp"]  # left alone


@pytest.mark.parametrize(
    ("name", "flags"),
    [
        ("{stem}.md", ("--overwrite",)),
        ("{stem}.md", ()),
        ("{stem}.bundle", ("--bundle",)),
        ("{stem}.bundle", ("--bundle", "--overwrite")),
    ],
)
def test_a_link_at_a_name_export_writes_is_refused_and_nothing_is_written(
    store, stem, sentinel, tmp_path, capsys, name, flags
):
    out = tmp_path / "out"
    out.mkdir()
    link = out / name.format(stem=stem)
    link.symlink_to(sentinel / "victim.md" if name.endswith(".md") else sentinel)
    before = snapshot(sentinel)
    capsys.readouterr()
    assert export(store, out, *flags) == 2
    err = capsys.readouterr().err
    assert err == f"washexp: --out {out}: {link.name} is a symlink; export writes no file through one (remove it)\n"
    assert snapshot(sentinel) == before
    assert [p.name for p in out.iterdir()] == [link.name]  # no record, no temp folder


def test_a_dangling_link_is_refused_too(store, stem, sentinel, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / f"{stem}.json").symlink_to(sentinel / "new.json")  # exists() is False: it was written through
    assert export(store, out) == 2
    assert not (sentinel / "new.json").exists()


def test_bundle_while_a_sweep_is_running_says_so_and_writes_nothing(store, tmp_path, capsys):
    """A run still RUNNING (here: opened through MLflow's API, as a sweep's arm is): the record was
    written, then its bundle refused as "rebuilt alone ... differs (name one --model)"."""
    copy = tmp_path / "store"
    shutil.copytree(store, copy, ignore=shutil.ignore_patterns("*.lock", "*.claims"))
    client = MlflowClient(f"sqlite:///{copy / 'mlflow.db'}")
    exp = client.get_experiment_by_name("compaction")
    (arm,) = client.search_runs([exp.experiment_id], "tags.`washexp.kind` = 'arm'", max_results=1)
    assert arm.data.tags["topn"] != "5"
    tags = {k: v for k, v in arm.data.tags.items() if not k.startswith("mlflow.")}
    tags |= {"sweep": "multirun/still/running", "topn": "5"}  # an arm of its own, still running
    running = client.create_run(exp.experiment_id, tags=tags)
    out = tmp_path / "out"
    capsys.readouterr()
    assert export(copy, out, "--bundle") == 2
    err = capsys.readouterr().err
    assert "sweep multirun/still/running is still running" in err and running.info.run_id in err, err
    assert err.count("\n") == 1
    assert not out.exists() or list(out.iterdir()) == []
    assert os.path.exists(copy / "mlflow.db")
