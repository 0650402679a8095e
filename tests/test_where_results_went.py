"""A command says where its results went: the sweep id it prints is the one ``washexp export
--sweep`` and ``washexp compare`` take, its next commands run as printed, ``washexp runs`` lists
the sweep, and the UI's saved view shows metrics the arm runs have."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import ROOT, run_cli

ARMS = ["-m", "method=S", "topn=0,1", "task=[payment,backup]"]


def _washexp(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "washexp.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def _closing(stdout: str) -> dict[str, str]:
    """The closing block: the sweep line's id and counts, then each ``name: command`` line."""
    m = re.search(r"^washexp: sweep (\S+) · (\d+) arms? · (\d+) conditions?: (\d+) run, (\d+) reused", stdout, re.M)
    assert m, stdout
    out = dict(zip(("sweep", "arms", "units", "run", "reused"), m.groups(), strict=True))
    out |= dict(re.findall(r"^  (records|compare|browse):\s+(.+)$", stdout, re.M))
    return out


@pytest.fixture(scope="module")
def two_sweeps(tmp_path_factory):
    store = tmp_path_factory.mktemp("closing")
    first = run_cli([*ARMS, f"hydra.sweep.dir={store / 'one'}"], store, premade=True)
    second = run_cli([*ARMS, "rerun=true", f"hydra.sweep.dir={store / 'two'}"], store)
    again = run_cli([*ARMS, f"hydra.sweep.dir={store / 'three'}"], store)
    return store, _closing(first.stdout), _closing(second.stdout), again.stdout


def test_the_printed_sweep_id_is_accepted_by_export_and_compare(two_sweeps, tmp_path):
    store, a, b, _ = two_sweeps
    assert (a["arms"], a["units"], a["run"], a["reused"]) == ("2", "4", "4", "0")
    uri = f"sqlite:///{store / 'mlflow.db'}"
    # the commands exactly as printed (only the placeholder filled and the output folder moved); the
    # sweep ran from the store's folder, outside the project, so each names the project with -C
    export = shlex.split(b["records"])
    assert export[:6] == ["washexp", "-C", str(ROOT), "export", "--sweep", b["sweep"]]
    assert f"--tracking-uri {uri}" in b["records"]
    done = _washexp([*export[1:], "--out", str(tmp_path)])
    assert done.returncode == 0, done.stderr
    record = json.loads(next(tmp_path.glob("compaction-*.json")).read_text())
    assert list(record["provenance"]["sweeps (overrides)"]) == [b["sweep"]]  # that sweep's runs, no other
    compare = shlex.split(a["compare"].replace("<another sweep id>", b["sweep"]))
    assert compare[1:4] == ["-C", str(ROOT), "compare"] and compare[4:6] == [a["sweep"], b["sweep"]]
    found = _washexp(compare[1:])
    assert found.returncode == 0, found.stderr  # the same arms again: no regression
    assert found.stdout.startswith("no regression: 0 needle(s) lost")


def test_a_sweep_of_reused_arms_covers_them_and_says_where_they_were_made(two_sweeps):
    _, _, b, again = two_sweeps
    counts = _closing(again)
    assert (counts["run"], counts["reused"]) == ("0", "4")
    # its arms are the second sweep's (the newest finished): linked, so its own commands find them
    assert f"  reused:   2 arms finished in sweep {b['sweep']}" in again
    assert f"export --sweep {counts['sweep']}" in counts["records"]


def test_a_sweep_says_what_it_started_before_any_arm_ends(two_sweeps):
    """The trap: the main job printed nothing until its first arm ended (20 s and more). Its first
    line, once its config and inputs are valid, names the first arm; each arm's line follows."""
    _, _, _, again = two_sweeps
    lines = [line for line in again.splitlines() if line.strip()]
    assert lines[0].endswith(" - started S top0 (2 conditions); a line follows as each arm ends"), again
    assert sum(" - started " in line for line in lines) == 1  # once a sweep, not once an arm


def test_runs_lists_the_sweeps_newest_first(two_sweeps):
    store, a, b, again = two_sweeps
    listed = _washexp(["runs", "--tracking-uri", f"sqlite:///{store / 'mlflow.db'}"])
    assert listed.returncode == 0, listed.stderr
    rows = [line.split()[0] for line in listed.stdout.splitlines()[1:]]
    assert rows[:3] == [_closing(again)["sweep"], b["sweep"], a["sweep"]]  # the last reused b's arms: its links
    row = next(line for line in listed.stdout.splitlines() if line.startswith(a["sweep"] + " "))
    assert "compaction.topn=0,1 method=S" in row and "6 FINISHED" in row  # 2 arms + 4 conditions


def test_the_ui_view_shows_the_arm_runs_headline_metrics(two_sweeps):
    store, a, _, _ = two_sweeps
    assert f"washexp -C {shlex.quote(str(ROOT))} ui --tracking-uri" in a["browse"]
    assert "viewStateShareKey=washexp" in a["browse"]
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    exp = client.get_experiment_by_name("compaction")
    view = json.loads(exp.tags["mlflow.sharedViewState.washexp"])
    arm = client.search_runs([exp.experiment_id], "tags.`washexp.kind` = 'arm'")[0]
    assert view["searchFilter"] == "tags.`washexp.kind` = 'arm'"
    shown = [c.removeprefix("metrics.`").removesuffix("`") for c in view["selectedColumns"] if c.startswith("metrics.")]
    assert {"primary/retention", "control/retention", "all/input_tokens"} <= set(shown) & set(arm.data.metrics)


def test_one_condition_is_singular(store):
    out = run_cli(
        ["-m", "method=S", "topn=1", "task=payment", "tracking=off"], store
    )  # -m: Hydra logs its own way after
    assert "S top1: 1 condition (1 run" in out.stdout + out.stderr
    assert "· 1 arm · 1 condition: 1 run, 0 reused, 0 failed" in out.stdout
    assert "tracking=off: nothing was recorded" in out.stdout
    assert "[HYDRA] S top1" not in out.stdout + out.stderr  # the closing line of the last arm is washexp's own


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["method=s"], "did you mean 'S'?"),
        (["benchmark=wash", "washer=Reference"], "did you mean 'reference'?"),
        (["benchmark=wash", "measurement=ceilng"], "did you mean 'ceiling'?"),
        (["-m", "hydra/launcher=jobliblocal", "method=S"], "did you mean 'joblib_local'"),
        (["method=S,H"], "add -m (python run.py -m method=S,H)"),
        (["benchmark=wash", "rounds=0"], "rounds=0: must be from 1 to 1000"),
        (["benchmark=wash", "measurement=controlled", "controlled.target_pct=100"], "target_pct=100: must be from"),
    ],
)
def test_a_slip_is_answered_with_the_fix(store, args, says):
    out = run_cli(args, store, check=False)
    assert out.returncode == 2 and says in out.stderr and out.stderr.count("\n") == 1, out.stderr


def test_help_is_washexps_own(store):
    out = run_cli(["--help"], store)
    assert "powered by Hydra" not in out.stdout and "local_schema" not in out.stdout
    assert "topn=0..5 is 0,1,2,3,4,5" in out.stdout
    options = r"full \| H \| hybrid \| mask \| none \| plugin \| recency \| S"
    assert re.search(rf"^  method .*\n\s+{options}$", out.stdout, re.M)
    assert "python run.py -m method=S,H topn=0..5" in out.stdout


def test_a_password_in_a_store_uri_is_never_printed():
    from washexp.engine.ledger import shown

    assert shown("postgresql+psycopg://user:s3cret@db:5432/mlflow") == "postgresql+psycopg://user:***@db:5432/mlflow"
    assert shown("sqlite:////tmp/x/mlflow.db") == "sqlite:////tmp/x/mlflow.db"


@pytest.mark.slow
def test_from_another_folder_outputs_land_in_the_project_and_each_printed_command_runs(tmp_path):
    """The user stands outside the project: the sweep's folder is the project's own, and each
    printed command (``washexp -C <project> ...``) exits 0 pasted as printed, from where they stand."""
    from tests.test_bad_input import TASK, make_project

    root = make_project(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = [sys.executable, str(root / "run.py"), "method=S", "topn=1", f"task={TASK}"]
    out = subprocess.run(run, cwd=elsewhere, capture_output=True, text=True, timeout=300, env={**os.environ, "CI": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    closing = dict(re.findall(r"^  (records|compare|browse):\s+(.+)$", out.stdout, re.M))
    sweep = re.search(r"^washexp: sweep (\S+)", out.stdout, re.M).group(1)
    assert sweep.startswith("outputs/") and (root / sweep).is_dir() and not list(elsewhere.iterdir())
    for name, line in closing.items():
        argv = shlex.split(line.partition("   (then")[0].replace("<another sweep id>", sweep))
        assert argv[:3] == ["washexp", "-C", str(root)], line
        if argv[3] == "ui":
            continue  # a server that runs until stopped; its -C is the same as the others'
        done = subprocess.run(
            [sys.executable, "-m", "washexp.cli", *argv[1:]], cwd=elsewhere, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, f"{name}: {done.stderr}"
    assert list((root / "results").glob("compaction-*.json"))  # export's default folder is the project's
