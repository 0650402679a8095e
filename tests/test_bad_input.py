"""Bad input, everywhere a user can hand us something (issue 12): one table, one row per fault.

Every row goes through the real entry point (``run.py``'s ``washexp.app.main`` with real Hydra, or
``washexp.cli.main``) on copied fixture folders in a project made in ``tmp_path``, and asserts the
contract: exit 2, stderr exactly one line naming what is wrong and where, no traceback, and nothing
half-written (no tracking store, no output folder, the fixture folders byte for byte as they were).
The in-process entry points print and return exactly what ``python run.py`` / ``washexp`` do.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from washexp import cli
from washexp.app import main as run_py
from washexp.hashing import sha256_bytes

REAL = Path(__file__).resolve().parent.parent
TASK, STORE, FEED = "backup", "lean", "dispatch-team"


def make_project(tmp_path: Path) -> Path:
    """A washexp project with the real config and a copy of one task, one store and one feed."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "conf").symlink_to(REAL / "conf")
    shutil.copy(REAL / "run.py", root / "run.py")
    for family, name in (("compaction", TASK), ("wash", STORE), ("wash-feed", FEED)):
        shutil.copytree(REAL / "fixtures" / family / name, root / "fixtures" / family / name)
    return root


def snapshot(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): sha256_bytes(p.read_bytes()) for p in folder.rglob("*") if p.is_file()}


# --- how each row breaks the copied fixtures (the project root is the argument) ---------------------


def task_file(root: Path, name: str = "task.yaml") -> Path:
    return root / "fixtures" / "compaction" / TASK / name


def store_file(root: Path, name: str) -> Path:
    return root / "fixtures" / "wash" / STORE / name


def edit_task_yaml(change: Callable[[dict], None]) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        spec = yaml.safe_load(task_file(root).read_text(encoding="utf-8"))
        change(spec)
        task_file(root).write_text(yaml.safe_dump(spec, allow_unicode=True, sort_keys=False), encoding="utf-8")

    return apply


def edit_trajectory(change: Callable[[list], None]) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        path = task_file(root, "trajectory.json")
        data = json.loads(path.read_text(encoding="utf-8"))
        change(data["messages"])
        path.write_text(json.dumps(data), encoding="utf-8")

    return apply


def edit_expected(change: Callable[[dict], None]) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        path = store_file(root, "expected.json")
        data = json.loads(path.read_text(encoding="utf-8"))
        change(data)
        path.write_text(json.dumps(data), encoding="utf-8")

    return apply


def write(path_of: Callable[[Path], Path], data: bytes) -> Callable[[Path], None]:
    return lambda root: path_of(root).write_bytes(data)


def insert_byte(path_of: Callable[[Path], Path], at: int = 10) -> Callable[[Path], None]:
    """A Latin-1 byte in an otherwise UTF-8 file: what an editor on the wrong code page leaves."""

    def apply(root: Path) -> None:
        data = path_of(root).read_bytes()
        path_of(root).write_bytes(data[:at] + b"\xe9" + data[at:])

    return apply


def nothing(root: Path) -> None:
    pass


def _dup_call_id(messages: list) -> None:
    calls = [m for m in messages if m.get("tool_calls")]
    calls[1]["tool_calls"][0]["id"] = calls[0]["tool_calls"][0]["id"]


def _dup_needle_id(data: dict) -> None:
    data["muscle"][1]["id"] = data["muscle"][0]["id"]


def _absent_needle(spec: dict) -> None:
    spec["needles"]["repo"].append("the sparks-data repo needs hourly backups")


WASH = ["benchmark=wash", f"store={STORE}", "rounds=1"]
SAWTOOTH = ["benchmark=wash", "measurement=sawtooth", "sessions=1"]
FEED_FILE = lambda root: root / "fixtures" / "wash-feed" / FEED / "sessions.yaml"  # noqa: E731

CLIFF = ["measurement=cliff", "method=S", "cliff.tasks=1", "cliff.lengths=[1000]", "cliff.budget_length=1000"]
RUN_PY_ROWS = {
    # row id: (how the fixtures are broken, the overrides, what the one line must say)
    "empty range": (nothing, ["topn=5..0"], "topn=5..0: empty range (5 > 0)"),
    "unknown task": (nothing, ["task=bakup"], "unknown task 'bakup'; did you mean 'backup'?"),
    "task id ../": (nothing, ["task=[../x]"], "task id '../x': a bare folder name under"),
    "task id absolute": (nothing, ["task=/etc"], "task id '/etc': a bare folder name under"),
    "task named twice": (nothing, [f"task=[{TASK},{TASK}]"], "a task is named twice"),
    "no fixtures folder": (nothing, ["benchmark.fixtures=fixtures/nope"], "benchmark.fixtures: "),
    "task.yaml malformed": (
        write(task_file, b"id: backup\nquery: [unclosed\n"),
        [f"task={TASK}"],
        "task.yaml: not valid YAML at line 3 column 1",
    ),
    "task.yaml not UTF-8": (insert_byte(task_file), [f"task={TASK}"], "task.yaml: not UTF-8 (byte 0xe9 at offset 10)"),
    "task.yaml year-0 date": (
        write(task_file, b"id: 0000-01-01\n"),
        [f"task={TASK}"],
        "task.yaml: not usable YAML",
    ),
    "task.yaml id ../": (
        edit_task_yaml(lambda s: s.update(id="../x")),
        [f"task={TASK}"],
        "task.yaml: id: '../x' differs from the folder 'backup'",
    ),
    "task.yaml key missing": (
        edit_task_yaml(lambda s: s.pop("needles")),
        [f"task={TASK}"],
        "task.yaml: needles: missing",
    ),
    "needle absent": (
        edit_task_yaml(_absent_needle),
        [f"task={TASK}"],
        "task.yaml: needles.repo: 'the sparks-data repo needs hourly backups' is in no tool result",
    ),
    "trajectory.json malformed": (
        write(lambda r: task_file(r, "trajectory.json"), b'{"messages": [\n'),
        [f"task={TASK}"],
        "trajectory.json: not valid JSON: Expecting value at line 2 column 1",
    ),
    "trajectory.json not UTF-8": (
        insert_byte(lambda r: task_file(r, "trajectory.json")),
        [f"task={TASK}"],
        "trajectory.json: not UTF-8 (byte 0xe9 at offset 10)",
    ),
    "trajectory message not an object": (
        edit_trajectory(lambda m: m.insert(1, 42)),
        [f"task={TASK}"],
        "trajectory.json: messages[1]: must be an object",
    ),
    "trajectory duplicate call id": (
        edit_trajectory(_dup_call_id),
        [f"task={TASK}"],
        "is used twice",
    ),
    "unknown store": (nothing, ["benchmark=wash", "store=laen"], "unknown store 'laen'; did you mean 'lean'?"),
    "store path to nowhere": (
        nothing,
        ["benchmark=wash", "store=../../nowhere"],
        "store '../../nowhere': no such folder",
    ),
    "store path without ground truth": (
        nothing,
        ["benchmark=wash", "store=/etc"],
        "/etc/expected.json: missing: a scored store states its ground truth here",
    ),
    "expected.json malformed": (
        write(lambda r: store_file(r, "expected.json"), b'{"fixture": "lean",}'),
        WASH,
        "expected.json: not valid JSON: Expecting property name enclosed in double quotes at line 1 column 20",
    ),
    "expected.json not UTF-8": (
        insert_byte(lambda r: store_file(r, "expected.json")),
        WASH,
        "expected.json: not UTF-8 (byte 0xe9 at offset 10)",
    ),
    "expected.json duplicate id": (
        edit_expected(_dup_needle_id),
        WASH,
        "expected.json: muscle[1].id: 'm01' is used twice (first by muscle[0])",
    ),
    "store needle absent": (
        edit_expected(lambda d: d["muscle"][2].update(needle="escalation policy `dispatch-p2`")),
        WASH,
        "expected.json: muscle[2].needle: 'escalation policy `dispatch-p2`' is not in the store's .md files",
    ),
    "store file not UTF-8": (
        insert_byte(lambda r: store_file(r, "conventions.md")),
        WASH,
        "conventions.md: not UTF-8 (byte 0xe9 at offset 10)",
    ),
    "feed path to nowhere": (nothing, [*SAWTOOTH, "feed=./no/such/feed"], "feed './no/such/feed': no such folder"),
    "unknown feed": (nothing, [*SAWTOOTH, "feed=dispatch"], "unknown feed 'dispatch'; did you mean 'dispatch-team'?"),
    "feed malformed": (
        write(FEED_FILE, b"feed: dispatch-team\nsessions: [\n"),
        SAWTOOTH,
        "sessions.yaml: not valid YAML at line 3 column 1",
    ),
    "feed not UTF-8": (insert_byte(FEED_FILE), SAWTOOTH, "sessions.yaml: not UTF-8 (byte 0xe9 at offset 10)"),
    # a sweep checks every job's config before the first job runs: the reference washer's job would
    # run, then its coalwash twin refuse the model, and the store would hold a half sweep
    "a later job's model": (
        nothing,
        ["-m", "benchmark=wash", "store=lean", "washer=reference,coalwash", "model=local", "model.weights=null"]
        + ["model.gguf=/no/such.gguf"],
        "model.gguf='/no/such.gguf': no such file",
    ),
    "a later job's family": (
        nothing,
        ["-m", "benchmark=wash", "store=lean", "measurement=ceiling,cycles"],
        "measurement=cycles is the compaction benchmark's (benchmark=compaction), not wash's",
    ),
    # the cliff generates its own sets: a setting the arm's plan refuses is found before the first one
    "cliff with a bad setting": (nothing, [*CLIFF, "model.repeats=0"], "model.repeats=0: must be >= 1"),
}


def assert_one_line(code: int, err: str, says: str, expected_code: int = 2) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == expected_code, err
    assert len(lines) == 1, err
    assert "Traceback" not in err and says in lines[0], lines[0]


@pytest.mark.parametrize("row", list(RUN_PY_ROWS))
def test_run_py_bad_input_is_one_line_exit_2(row, tmp_path, capfd):
    root = make_project(tmp_path)
    breaks, overrides, says = RUN_PY_ROWS[row]
    breaks(root)
    before = snapshot(root / "fixtures")
    store = tmp_path / "store"
    code = run_py(
        [
            *overrides,
            f"tracking.uri=sqlite:///{store / 'mlflow.db'}",
            f"tracking.artifacts={store / 'mlruns'}",
            f"hydra.run.dir={tmp_path / 'outputs'}",
            f"hydra.sweep.dir={tmp_path / 'multirun'}",
        ],
        root=root,
    )
    out, err = capfd.readouterr()
    assert_one_line(code, err, says)
    assert err.startswith("washexp: ")
    assert not store.exists(), "a refused command opens no tracking store, so no run"
    assert snapshot(root / "fixtures") == before, "no fixture is ever written"
    assert not list((tmp_path / "outputs").rglob("manifest.json")), "no task set is generated"


def test_the_cliff_checks_its_store_before_it_generates_a_set(tmp_path, capfd):
    """An unusable store (an empty file here) is found before the cliff writes its sets."""
    root = make_project(tmp_path)
    db = tmp_path / "store" / "mlflow.db"
    db.parent.mkdir()
    db.write_bytes(b"")
    code = run_py([*CLIFF, f"tracking.uri=sqlite:///{db}", f"hydra.run.dir={tmp_path / 'outputs'}"], root=root)
    assert_one_line(code, capfd.readouterr().err, "mlflow.db: an empty file (0 bytes), not a tracking store")
    assert not list((tmp_path / "outputs").rglob("manifest.json")), "no task set is generated"
    assert db.read_bytes() == b""


def _feed_cli(root: Path, tmp_path: Path) -> list[str]:
    FEED_FILE(root).write_bytes(b"feed: dispatch-team\ndescription: x\nsessions: 7\n")
    return ["feed", str(root / "fixtures" / "wash-feed" / FEED), "--sessions", "1", "--out", str(tmp_path / "out")]


def _wash_cli(root: Path, tmp_path: Path) -> list[str]:
    bad = tmp_path / "expected.json"
    bad.write_bytes(b"\xff\xfe{}")
    store = root / "fixtures" / "wash" / STORE
    return ["wash", str(store), "--operator", "benchmark", "--expected", str(bad), "--in-place-fixture"]


def _export_into_a_file(root: Path, tmp_path: Path) -> list[str]:
    (tmp_path / "out").write_text("a file, not a folder\n", encoding="utf-8")
    return ["export", "--tracking-uri", f"sqlite:///{tmp_path / 'none.db'}", "--out", str(tmp_path / "out" / "results")]


def _file_store(tmp_path: Path) -> str:
    """A plain file store, which MLflow refuses to open (from 3.13): it once ended in MLflow's traceback."""
    return (tmp_path / "mlruns").as_uri()


def _record(root: Path) -> str:
    (root / "record.json").write_text('{"schema": 1, "topic": "compaction", "tables": {}, "data": {}}\n')
    return str(root / "record.json")


FILE_STORE_SAYS = "MLflow's file store takes no new runs"
FILE_STORE_ROWS: dict[str, Callable[[Path, Path], list[str]]] = {
    "compare": lambda root, tmp_path: ["compare", "sweep-a", "sweep-b", "--tracking-uri", _file_store(tmp_path)],
    "export": lambda root, tmp_path: ["export", "--tracking-uri", _file_store(tmp_path), "--out", str(tmp_path / "o")],
    "runs": lambda root, tmp_path: ["runs", "--tracking-uri", _file_store(tmp_path)],
    "verify": lambda root, tmp_path: ["verify", _record(root), "--tracking-uri", _file_store(tmp_path)],
    "import": lambda root, tmp_path: (
        ["import", "mlflow", _file_store(tmp_path), "--experiment", "e"]
        + ["--plant", "1", "--out", str(tmp_path / "o")]
    ),
    # checked before the server starts: no child, no port taken
    "server": lambda root, tmp_path: ["server", "--backend-store-uri", _file_store(tmp_path), "--port", "9"],
}


CLI_ROWS = {
    "washexp feed: sessions not a list": (_feed_cli, "washexp feed: ", "sessions.yaml: sessions: expected a non-empty"),
    "washexp wash: --expected not UTF-8": (_wash_cli, "washexp wash: ", "expected.json: not UTF-8 (byte 0xff"),
    "washexp export: --out under a file": (_export_into_a_file, "washexp: ", "is not a folder"),
    **{
        f"washexp {name}: a file store for its store": (argv, "washexp", f"mlruns: {FILE_STORE_SAYS}")
        for name, argv in FILE_STORE_ROWS.items()
    },
}


@pytest.mark.parametrize("row", list(CLI_ROWS))
def test_washexp_commands_bad_input_is_one_line_exit_2(row, tmp_path, capfd, monkeypatch):
    root = make_project(tmp_path)
    monkeypatch.chdir(root)
    argv_for, prefix, says = CLI_ROWS[row]
    argv = argv_for(root, tmp_path)
    before = snapshot(root / "fixtures")
    listing = sorted(p.name for p in tmp_path.iterdir())
    code = cli.main(argv)
    out, err = capfd.readouterr()
    assert_one_line(code, err, says)
    assert err.startswith(prefix) and not out
    assert snapshot(root / "fixtures") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == listing, "nothing new is written"


def _make_read_only(folder: Path) -> Callable[[], None]:
    """Read-only for real: ``chattr +i`` as root (whom permission bits do not stop), else chmod."""
    if hasattr(__import__("os"), "geteuid") and __import__("os").geteuid() == 0:
        if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(folder)]).returncode != 0:
            pytest.skip("running as root on a file system without chattr +i: cannot make a folder read-only")
        return lambda: subprocess.run(["chattr", "-i", str(folder)], check=True)
    folder.chmod(0o555)
    return lambda: folder.chmod(0o755)


def test_read_only_results_is_one_line_exit_2_before_any_work(tmp_path, capfd, monkeypatch):
    root = make_project(tmp_path)
    monkeypatch.chdir(root)
    results = root / "results"
    results.mkdir()
    restore = _make_read_only(results)
    try:
        code = cli.main(["export", "--tracking-uri", f"sqlite:///{tmp_path / 'none.db'}", "--out", str(results)])
    finally:
        restore()
    out, err = capfd.readouterr()
    assert_one_line(code, err, f"washexp: --out {results}: cannot write there")
    assert not list(results.iterdir()) and not (tmp_path / "none.db").exists()
