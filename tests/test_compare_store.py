"""``washexp compare`` on sides read from a real tracking store: a sweep id, a run id, ``model:NAME``.

One store is built per session by two real offline sweeps (``run.py``, the reference backend):

- sweep ``sweep-a``: model ``reference``, ``method=S topn=0,1 task=payment`` (two arms, 20 cells);
- sweep ``sweep-b``: ``topn=0`` only (one value fewer), as two models ``other`` and ``third`` (the same
  reference backend under two names), so one sweep covers several models.

Each test reads a copy of it, in process. Traps guarded: a run id read as an unknown sweep; a side
that lacks an arm of A read as "no regression" (B must have every cell of A); a sweep of several
models read as one model's; ``--sweep`` or ``--experiment`` not reaching a side, so a model is read
from runs the user did not name.

``WASHEXP_TEST_STORE_CACHE=DIR`` keeps the built store in DIR across sessions, keyed by the code and
configuration that build it (docs/mutation.md: a mutation run starts a session per mutant).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import ROOT, run_cli
from washexp import compare as compare_cli

SWEEP = ["-m", "method=S", "task=payment"]


def _key() -> str:
    """A digest of everything a sweep's store depends on: the code, the config, the fixtures, Python."""
    digest = hashlib.sha256(sys.version.encode())
    for part, pattern in (("washexp", "*.py"), ("conf", "*"), ("fixtures/compaction", "*")):
        for path in sorted((ROOT / part).rglob(pattern)):  # washexp: its code only (mutmut keeps notes beside it)
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    digest.update((ROOT / "run.py").read_bytes())
    return digest.hexdigest()[:16]


def _build(into: Path) -> None:
    store = into / "store"
    store.mkdir(parents=True)
    # mutmut's stats session: the sweeps run the code as written (a "stats" trampoline in a
    # subprocess would look for mutmut's configuration in the store folder and fail)
    env = {"MUTANT_UNDER_TEST": ""} if os.environ.get("MUTANT_UNDER_TEST") == "stats" else None
    run_cli([*SWEEP, "topn=0,1", f"hydra.sweep.dir={into / 'sweep-a'}"], store, env=env, premade=True)
    run_cli([*SWEEP, "topn=0", "model.name=other,third", f"hydra.sweep.dir={into / 'sweep-b'}"], store, env=env)


@pytest.fixture(scope="session")
def built(tmp_path_factory) -> Path:
    """The folder holding ``store/`` (its ``mlflow.db`` and ``mlruns/``) after both sweeps."""
    cache = os.environ.get("WASHEXP_TEST_STORE_CACHE")
    done = Path(cache) / f"compare-store-{_key()}" if cache else None
    if done and (done / "complete").is_file():
        return done
    # a store kept for later sessions is built only from the code as written: not under one of
    # mutmut's mutants (MUTANT_UNDER_TEST), whose build is its own
    if not done or os.environ.get("MUTANT_UNDER_TEST", "stats") != "stats":
        where = tmp_path_factory.mktemp("compare-store")
        _build(where)
        return where
    # built in place (its artifact paths are absolute), marked complete last: a half-built store
    # (a session killed mid-build) is built again
    shutil.rmtree(done, ignore_errors=True)
    _build(done)
    (done / "complete").write_text("")
    return done


@pytest.fixture
def store(built, tmp_path) -> str:
    """A copy of the built store for this test (its artifacts are read where the sweeps wrote them)."""
    shutil.copytree(built / "store", tmp_path / "store", ignore=shutil.ignore_patterns("mlruns"))
    return f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"


def _run_id(built: Path, sweep: str) -> str:
    db = sqlite3.connect(built / "store" / "mlflow.db")
    try:
        (run,) = db.execute(
            "SELECT run_uuid FROM tags WHERE key = 'sweep' AND value LIKE ? LIMIT 1", (f"%/{sweep}",)
        ).fetchone()
    finally:
        db.close()
    return run


def _sweep_tag(built: Path, sweep: str) -> str:
    db = sqlite3.connect(built / "store" / "mlflow.db")
    try:
        (tag,) = db.execute("SELECT DISTINCT value FROM tags WHERE key = 'sweep' AND value LIKE ?", (f"%/{sweep}",))
    finally:
        db.close()
    return tag[0]


def _main(capsys, *args: str) -> tuple[int, list[str], str]:
    code = compare_cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


SAME = ["no regression: 0 needle(s) lost in B, worst mean drop +0.000"]


def test_a_sweep_against_a_run_id_of_itself_is_no_regression(built, store, capsys):
    """A run id stands for the sweep it belongs to (on either side); so does the sweep's full tag."""
    uri = ["--tracking-uri", store]
    assert _main(capsys, _run_id(built, "sweep-a"), "sweep-a", *uri) == (0, SAME, "")
    code, out, err = _main(capsys, "sweep-a", _sweep_tag(built, "sweep-a"), "--json", *uri)
    assert code == 0 and '"cells_a": 20' in "".join(out) and '"regression": false' in "".join(out), (out, err)


def test_a_side_that_lacks_an_arm_of_a_is_a_regression_naming_the_arm(store, capsys):
    """Sweep a has S top0 and S top1; model ``other`` (all its runs: sweep b) has top0 only."""
    uri = ["--tracking-uri", store]
    lacking = [
        "REGRESSION: 0 needle(s) lost in B, worst mean drop +0.000; B lacks 10 of A's 20 cells",
        "MISSING in B: S top1",
    ]
    assert _main(capsys, "sweep-a", "model:other", *uri) == (1, lacking, "")
    assert _main(capsys, "model:reference", "model:other", "--experiment", "compaction", *uri) == (1, lacking, "")
    code, out, _ = _main(capsys, "sweep-a", "model:other", "--allow-subset", *uri)
    assert code == 0 and out[0] == "SUBSET: only the 10 of A's 20 cells that B has were compared (--allow-subset)"
    # two models of one sweep, named by --sweep: the same cells, each side its own model
    assert _main(capsys, "model:other", "model:third", "--sweep", "sweep-b", *uri) == (0, SAME, "")


def test_a_sweep_of_several_models_is_refused_naming_how_to_pick_one(built, store, capsys):
    tag = _sweep_tag(built, "sweep-b")
    # the sweep as named, or for a run id the sweep it belongs to
    for side, sweep in (("sweep-b", "sweep-b"), (_run_id(built, "sweep-b"), tag)):
        refusal = f"washexp compare: {side}: covers several models; compare one model's: model:NAME --sweep {sweep}\n"
        assert _main(capsys, side, "sweep-a", "--tracking-uri", store) == (2, [], refusal)


def test_a_model_sweep_or_experiment_the_store_lacks_is_one_line_naming_what_is_there(store, capsys, tmp_path):
    """Exit 2, nothing on stdout; the line names the side, the scope asked and what the store has.
    ``--sweep`` and ``--experiment`` reach both sides: B is refused for what only B lacks."""
    uri = ["--tracking-uri", store]
    record = tmp_path / "a.json"
    record.write_text(json.dumps(compare_cli.load_side("sweep-a", store, "compaction")), encoding="utf-8")
    runs = "no compaction runs of that model"
    cases = [
        (["model:nosuch", "sweep-a"], f"model:nosuch: {runs} in {store} (models there: other, reference, third)"),
        (
            ["model:other", "model:reference", "--sweep", "sweep-b"],
            f"model:reference: {runs} in sweep sweep-b in {store} (models there: other, third)",
        ),
        (
            ["model:reference", "model:other", "--sweep", "sweep-a"],
            f"model:other: {runs} in sweep sweep-a in {store} (models there: reference)",
        ),
        (
            ["model:nosuch", "sweep-a", "--sweep", "sweep-a", "--sweep", "sweep-b"],
            f"model:nosuch: {runs} in sweep sweep-a, sweep-b in {store} (models there: other, reference, third)",
        ),
        (
            ["model:reference", "model:other", "--sweep", "no-such-sweep"],
            f"model:reference: {runs} in sweep no-such-sweep in {store} (models there: none)",
        ),
        # a sweep id is matched by whole path parts: "a" is not sweep-a
        (["sweep-a", "a"], f"a: neither a record .json file nor a sweep or run id in {store} (compaction)"),
        ([str(record), "sweep-a", "--experiment", "wash"], f"no experiment 'wash' in {store}"),
    ]
    for sides, message in cases:
        assert _main(capsys, *sides, *uri) == (2, [], f"washexp compare: {message}\n"), sides
    # the record a store side gives is the one its export would: compared with it, nothing differs
    assert _main(capsys, str(record), "sweep-a", *uri) == (0, SAME, "")


def test_an_experiment_with_no_runs_yet_names_the_sweep_not_found(store, capsys):
    """A store whose wash experiment exists but holds no run (made in this test's copy only)."""
    MlflowClient(store).create_experiment("wash")
    refusal = f"washexp compare: sweep-a: neither a record .json file nor a sweep or run id in {store} (wash)\n"
    assert _main(capsys, "sweep-a", "sweep-a", "--experiment", "wash", "--tracking-uri", store) == (2, [], refusal)
