"""A tracking store that is damaged, empty, read-only or not MLflow's is one line naming the file,
exit 2, before any work: never MLflow's ~100 s of retries and a traceback, never a 0-byte file
silently made a new empty store (which orphans every artifact folder beside it).

Each case starts from a real store a real sweep wrote, damaged as a disk or a user would damage it.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli, washexp_cli

CELL = ["method=S", "topn=0", "task=payment"]


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("good")
    run_cli(CELL, store)
    con = sqlite3.connect(store / "mlflow.db")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the whole store in the one file, as after a clean close
    con.close()
    return store


def _copy(good: Path, tmp: Path) -> Path:
    store = tmp / "store"
    shutil.copytree(good, store)
    return store


def _truncate(db: Path) -> None:
    with db.open("r+b") as f:
        f.truncate(db.stat().st_size // 3)


def _empty(db: Path) -> None:
    db.write_bytes(b"")


def _not_mlflow(db: Path) -> None:
    db.unlink()
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE notes (text)")
    con.commit()
    con.close()


def _one_line(proc: subprocess.CompletedProcess, expected: str, code: int = 2) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == code and len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith("washexp: ") and expected in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (_truncate, "the tracking store is damaged (database disk image is malformed)"),
        (_empty, "an empty file (0 bytes), not a tracking store"),
        (_not_mlflow, "not an MLflow tracking store"),
    ],
)
def test_a_damaged_store_is_one_line_before_any_work(good, tmp_path, damage, expected):
    store = _copy(good, tmp_path)
    db = store / "mlflow.db"
    damage(db)
    before = db.read_bytes()
    line = _one_line(run_cli(["method=S", "topn=1", "task=payment"], store, check=False), expected)
    assert str(db) in line and db.read_bytes() == before  # nothing written: an empty file stays empty
    export = washexp_cli("export", "--tracking-uri", f"sqlite:///{db}", "--out", str(tmp_path))
    _one_line(export, expected)
    assert db.read_bytes() == before and not list(tmp_path.glob("*.json"))


def test_a_store_on_a_read_only_mount_is_one_line(good, tmp_path):
    if shutil.which("unshare") is None:
        pytest.skip("no unshare: cannot mount the store read-only here")
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"unshare --mount is not permitted here: {probe.stderr.decode().strip()}")
    store = _copy(good, tmp_path)
    ro = tmp_path / "ro"
    ro.mkdir()
    args = ["method=S", "topn=1", "task=payment", f"tracking.uri=sqlite:///{ro / 'mlflow.db'}"]
    args += [f"tracking.artifacts={ro / 'mlruns'}", f"hydra.run.dir={tmp_path / 'out'}"]
    script = f'mount --bind "{store}" "{ro}" && mount -o remount,bind,ro "{ro}" && exec "$@"'
    proc = subprocess.run(
        ["unshare", "--mount", "sh", "-c", script, "sh", sys.executable, str(ROOT / "run.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    _one_line(proc, f"{ro / 'mlflow.db'}: the tracking store cannot be written (Read-only file system)")


@pytest.mark.parametrize("form", ["file", "path"])
def test_a_file_store_is_one_line_before_any_work(tmp_path, form):
    """MLflow's file store refuses new runs: said before the sweep starts, not as a failure mid-run."""
    where = tmp_path / "mlruns"
    uri = where.as_uri() if form == "file" else str(where)
    env = {"MLFLOW_ALLOW_FILE_STORE": "false"}  # as if unset, whatever the machine's environment says
    proc = run_cli([*CELL, f"tracking.uri={uri}"], tmp_path, env=env, check=False)
    _one_line(proc, f"{uri}: MLflow's file store takes no new runs")
    assert not where.exists()  # every other command's refusal: test_bad_input's FILE_STORE_ROWS


@pytest.mark.parametrize(
    ("uri", "refused"),
    [
        ("file:///srv/mlruns", True),
        ("/srv/mlruns", True),
        ("mlruns", True),
        ("C:/mlruns", True),
        ("sqlite:///srv/mlflow.db", False),
        ("http://127.0.0.1:5000", False),
        ("postgresql://u@db/mlflow", False),
        ("databricks", False),
    ],
)
def test_only_the_file_store_is_refused_and_mlflows_own_opt_in_lets_it_through(monkeypatch, uri, refused):
    from washexp.errors import ConfigError
    from washexp.tracking.reader import refuse_file_store

    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    if refused:
        with pytest.raises(ConfigError, match="MLflow's file store takes no new runs"):
            refuse_file_store(uri)
    else:
        refuse_file_store(uri)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    refuse_file_store(uri)


FULL = """
mount -t tmpfs -o size=7m tmpfs "$MOUNT" || exit 97
"$PY" "$RUN" -m method=S,H topn=0..5 $ARGS > "$OUT/full.out" 2> "$OUT/full.err"; echo $? > "$OUT/full.rc"
"$PY" -c "$COUNT" > "$OUT/full.status"
mount -o remount,size=64m "$MOUNT"
"$PY" "$RUN" -m method=S,H topn=0..5 $ARGS > "$OUT/again.out" 2> "$OUT/again.err"; echo $? > "$OUT/again.rc"
"$PY" -c "$COUNT" > "$OUT/again.status"
"""


def _in_a_small_mount(tmp_path: Path, script: str, mount: Path, db: Path, **extra: str) -> Path:
    """Run ``script`` in a mount namespace of its own (``$MOUNT`` gets a tmpfs there, ``$ARGS`` the
    sweep's tracking and folder), skipping where the machine cannot; the folder of its outputs."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "--mount", "true"]).returncode != 0:
        pytest.skip("unshare --mount is not available here: cannot give the store a small filesystem")
    out = tmp_path / "out"
    mount.mkdir()
    out.mkdir()
    env = {
        "MOUNT": str(mount),
        "OUT": str(out),
        "PY": sys.executable,
        "RUN": str(ROOT / "run.py"),
        "ARGS": f"tracking.uri=sqlite:///{db} tracking.artifacts={mount / 'mlruns'} hydra.sweep.dir={tmp_path / 'm'}",
        "PATH": "/usr/bin:/bin:/usr/sbin:/sbin",
        **extra,
    }
    proc = subprocess.run(["unshare", "--mount", "sh", "-c", script], env=env, cwd=tmp_path, timeout=900)
    if proc.returncode == 97:
        pytest.skip("cannot mount a tmpfs here")
    return out


@pytest.mark.slow
def test_a_store_that_fills_mid_run_is_one_line_and_the_next_start_recovers(tmp_path):
    """A 7 MB filesystem (tmpfs, in a mount namespace of its own) fills while the main job writes:
    one line, exit 1, no traceback; the runs it could not end (those it could end FAILED while
    SQLite still had room) stay RUNNING and the next start, with room again, marks them KILLED and
    finishes the sweep."""
    store = tmp_path / "store"
    db = store / "mlflow.db"
    count = f"import sqlite3, json; print(json.dumps(dict(sqlite3.connect('{db}').execute("
    count += "'select status, count(*) from runs group by status').fetchall())))"
    out = _in_a_small_mount(tmp_path, FULL, store, db, COUNT=count)
    err = (out / "full.err").read_text()
    lines = [line for line in err.splitlines() if line.startswith("washexp: ")]  # beside the progress lines
    assert (out / "full.rc").read_text().strip() == "1" and len(lines) == 1, err[-3000:]
    assert "Traceback" not in err and "ERROR" not in err, err[-3000:]
    reasons = ("(No space left on device)", "(database or disk is full)")  # the artifact folder's, or SQLite's
    assert lines[0].startswith(f"washexp: sqlite:///{db}: the tracking store failed mid-run ")
    assert lines[0].endswith(reasons), lines[0]
    status = json.loads((out / "full.status").read_text())
    assert status.get("FINISHED", 0) < 180 and set(status) <= {"FINISHED", "RUNNING", "FAILED"}
    assert (out / "again.rc").read_text().strip() == "0", (out / "again.err").read_text()[-3000:]
    again = json.loads((out / "again.status").read_text())
    # 180 conditions and arms, plus a link run for each finished condition a redone arm reuses
    assert again.pop("FINISHED") >= 180
    expected = {"KILLED": status["RUNNING"]} if status.get("RUNNING") else {}
    expected |= {"FAILED": status["FAILED"]} if status.get("FAILED") else {}  # ended while SQLite had room
    assert again == expected


ARTIFACTS_FULL = """
mount -t tmpfs -o size=100k tmpfs "$MOUNT" || exit 97
"$PY" "$RUN" -m method=S,H topn=0..2 $ARGS > "$OUT/full.out" 2> "$OUT/full.err"; echo $? > "$OUT/full.rc"
"""


def test_a_full_disk_under_the_artifacts_ends_the_runs_in_progress_failed(tmp_path):
    """The artifact folder fills mid-sweep (a 100 KB tmpfs) while the database can still be written:
    one line, exit 1, and no run is left RUNNING: those in progress end FAILED, naming why (issue 37)."""
    db = tmp_path / "mlflow.db"
    out = _in_a_small_mount(tmp_path, ARTIFACTS_FULL, tmp_path / "art", db)
    err = (out / "full.err").read_text()
    lines = [line for line in err.splitlines() if line.startswith("washexp: ")]
    assert (out / "full.rc").read_text().strip() == "1" and len(lines) == 1, err[-3000:]
    assert lines[0] == f"washexp: sqlite:///{db}: the tracking store failed mid-run (No space left on device)"
    assert "Traceback" not in err, err[-3000:]
    with sqlite3.connect(db) as con:
        status = dict(con.execute("select status, count(*) from runs group by status").fetchall())
        errors = {v for (v,) in con.execute("select value from tags where key = 'washexp.error'")}
    assert "RUNNING" not in status and status.get("FAILED", 0) >= 1, status
    # The message goes on to name the file MLflow could not write (a temporary copy, then the store).
    assert any(
        e.startswith("its artifacts could not be stored: OSError: [Errno 28] No space left on device") for e in errors
    ), errors
