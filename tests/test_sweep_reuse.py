"""A sweep owns every arm it covers, run or reused. The trap (issue 50): a second sweep that
reused the arms a first one finished (``-m method=S,H topn=0,3``, then ``-m method=S,H,mask
topn=0,3`` in the same store) exported only its new arms with no note, ``compare`` of the two found
"no cell in common", ``washexp runs`` listed it as 2 arms, and its closing lines printed "finished
already" with no numbers. Real multiruns into one SQLite store; what they wrote is read back."""

from __future__ import annotations

import re
import shlex
import sqlite3
import subprocess

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import ROOT, run_cli, washexp_cli
from washexp.errors import WashexpError
from washexp.export import ExportOptions, build
from washexp.listing import render, sweep_rows
from washexp.tracking.reader import search

pytestmark = pytest.mark.slow  # three real sweeps and five commands: minutes on a shared machine

TASK = "task=[payment]"
FIRST = ["-m", "method=S,H", "topn=0,3", TASK]
SECOND = ["-m", "method=S,H,mask", "topn=0,3", TASK]
THIRD = ["-m", "method=S", "topn=0", TASK]  # every arm it covers reused


def _sweep_id(stdout: str) -> str:
    m = re.search(r"^washexp: sweep (\S+) · ", stdout, re.M)
    assert m, stdout
    return m.group(1)


def _washexp(*args: str) -> subprocess.CompletedProcess:
    return washexp_cli(*args)


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    store = tmp_path_factory.mktemp("reuse")
    outs = [
        run_cli([*args, f"hydra.sweep.dir={store / name}"], store, premade=(name == "one"))
        for name, args in (("one", FIRST), ("two", SECOND), ("three", THIRD))
    ]
    uri = f"sqlite:///{store / 'mlflow.db'}"
    return store, uri, [_sweep_id(o.stdout) for o in outs], [o.stdout + o.stderr for o in outs]


def _labels(record) -> set[str]:
    return {row["arm"] for row in record.data["compaction_tasks"]}


def test_the_reusing_sweep_exports_all_six_arms_and_names_the_reuse(sweeps):
    _, uri, (one, two, _), _ = sweeps
    (record,) = build(ExportOptions(uri=uri, sweeps=(two,)))
    assert _labels(record) == {"S top0", "S top3", "H top0", "H top3", "mask M=10 top0", "mask M=10 top3"}
    reused = [n for n in record.notes if "reused from sweep" in n]
    assert len(reused) == 4 and all(f"reused from sweep {one}," in n and f"sweep {two} links it" in n for n in reused)
    (first,) = build(ExportOptions(uri=uri, sweeps=(one,)))
    assert _labels(first) == {"S top0", "S top3", "H top0", "H top3"}
    assert not [n for n in first.notes if "reused from sweep" in n]  # the sweep that ran them owns them too


def test_compare_of_the_two_sweeps_finds_their_cells_in_common(sweeps):
    _, uri, (one, two, _), _ = sweeps
    same = _washexp("compare", one, two, "--tracking-uri", uri)
    assert same.returncode == 0 and same.stdout.startswith("no regression: 0 needle(s) lost"), same.stdout
    # the other way round B lacks only the mask arms: the S and H cells are found in both
    fewer = _washexp("compare", two, one, "--tracking-uri", uri)
    assert fewer.returncode == 1, fewer.stdout + fewer.stderr
    missing = re.findall(r"^MISSING in B: (.+)$", fewer.stdout, re.M)
    assert missing and all(m.startswith("mask M=10") for m in missing), fewer.stdout


def test_runs_lists_the_reusing_sweep_with_every_arm_and_says_the_reuse(sweeps):
    _, uri, (one, two, three), _ = sweeps
    rows = {r.sweep: r for r in sweep_rows(search(uri, "compaction"), "compaction")}
    assert (rows[one].arms, rows[one].units, rows[one].reused) == (4, 4, {})
    assert (rows[two].arms, rows[two].units, rows[two].reused) == (6, 6, {one: 4})
    assert (rows[three].arms, rows[three].units, rows[three].reused) == (1, 1, {one: 1})
    assert rows[two].status == {"FINISHED": 12}  # its 2 arms and 2 conditions, and the 4 + 4 it reused
    assert "method=H,S,mask" in rows[two].overrides
    line = next(li for li in render(list(rows.values())) if li.startswith(two + " "))
    assert f"reused 4 arms from {one}" in line


def test_the_closing_lines_give_the_reused_arms_numbers(sweeps):
    _, _, (one, two, _), (_, said, _) = sweeps
    assert f"washexp: sweep {two} · 6 arms · 6 conditions: 2 run, 4 reused, 0 failed" in said
    assert f"  reused:   4 arms finished in sweep {one}" in said
    assert f"  records:  washexp -C {shlex.quote(str(ROOT))} export --sweep {two}" in said
    for arm in ("S top0", "S top3", "H top0", "H top3"):
        reused = rf"{arm}: finished already.* · 1 condition reused from sweep {re.escape(one)} · retention primary \d"
        assert re.search(reused, said), arm


def test_a_sweep_of_reused_arms_alone_exports_verifies_and_fails_closed(sweeps, tmp_path):
    store, uri, (one, _, three), (_, _, said) = sweeps
    assert f"  records:  washexp -C {shlex.quote(str(ROOT))} export --sweep {three}" in said
    done = _washexp("export", "--sweep", three, "--tracking-uri", uri, "--out", str(tmp_path), "--bundle")
    assert done.returncode == 0, done.stderr
    (path,) = tmp_path.glob("compaction-*.json")
    verified = _washexp("verify", str(path))
    assert verified.returncode == 0 and verified.stdout.startswith("verified "), verified.stdout + verified.stderr

    # the run a link names is gone: the sweep's record is an error, never one arm fewer
    copy = tmp_path / "copy.db"
    with sqlite3.connect(store / "mlflow.db") as src, sqlite3.connect(copy) as dst:
        src.backup(dst)  # the whole database, what its write-ahead log holds too
    client = MlflowClient(f"sqlite:///{copy}")
    exp = client.get_experiment_by_name("compaction")
    (link,) = client.search_runs([exp.experiment_id], f"tags.`washexp.kind` = 'link' and tags.sweep = '{three}'")
    client.delete_run(link.data.tags["washexp.link"])
    with pytest.raises(WashexpError, match="link run.* name runs this experiment lacks"):
        build(ExportOptions(uri=f"sqlite:///{copy}", sweeps=(three,)))
