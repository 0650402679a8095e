"""Shared helpers: run the real command line in a subprocess against a store in tmp_path."""

from __future__ import annotations

import atexit
import contextlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

from washexp.models.llama_server import SERVER_COUNTS
from washexp.tracking.sqlite import ensure_store

ROOT = Path(__file__).resolve().parent.parent


_TEMPLATE: list[Path] = []


def new_store_copy(db: Path) -> None:
    """``db`` as a copy of an empty store that washexp's own maker (``ensure_store``) made once in
    this process: making one costs a child process that imports MLflow and migrates (~4 s of
    CPU), which every sweep paid again. Only for a sweep whose store is not what its test checks
    (``premade=True`` of :func:`run_cli`): a store made by the command (its first run, and no store
    at all after a usage error) is what every other run checks."""
    if not _TEMPLATE:
        folder = Path(tempfile.mkdtemp(prefix="washexp-empty-store-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        ensure_store(folder / "mlflow.db")
        _TEMPLATE.append(folder / "mlflow.db")
    db.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_TEMPLATE[0], db)


def run_cli(
    args: list[str],
    store: Path,
    cwd: Path | None = None,
    env: dict | None = None,
    check: bool = True,
    premade: bool = False,
    child: bool = False,
) -> subprocess.CompletedProcess:
    """``python run.py ARGS`` with tracking in ``store``, from a directory that is not the root:
    run in this process (:func:`run_py_here`), or as a child process where ``child`` asks for one
    or ``env`` sets ``PYTHONPATH`` (imports a new interpreter must make). ``premade``: a store not
    there yet starts as a copy of an empty one (:func:`new_store_copy`)."""
    tracking = [
        f"tracking.uri=sqlite:///{store / 'mlflow.db'}",
        f"tracking.artifacts={store / 'mlruns'}",
        f"hydra.sweep.dir={store / 'multirun'}",
        f"hydra.run.dir={store / 'outputs'}",
    ]
    given = {a.partition("=")[0] for a in args}
    tracking = [t for t in tracking if t.partition("=")[0] not in given]
    if premade and not (store / "mlflow.db").exists():
        assert not given & {"tracking", "tracking.uri"}, "premade is for the store in ``store``"
        new_store_copy(store / "mlflow.db")
    if not child and "PYTHONPATH" not in (env or {}):
        proc = run_py_here([*args, *tracking], cwd or store, env or {})
    else:
        proc = subprocess.run(
            [sys.executable, str(ROOT / "run.py"), *args, *tracking],
            cwd=cwd or store,
            capture_output=True,
            text=True,
            env={**os.environ, **(env or {})},
            timeout=600,
        )
    if check and proc.returncode != 0:
        raise AssertionError(f"run.py {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc


def run_py_here(argv: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    """``python run.py ARGV`` from ``cwd`` with ``env`` added, run in this process (the entry point
    ``run.py`` calls, real Hydra): its exit code and what it printed, without the seconds a new
    interpreter spends importing Hydra and MLflow. What it cannot give is a child's own: the
    output of jobs a parallel launcher runs in other processes (they write to the descriptors),
    ``run.py``'s exit path (``leave``), a signal's effect; those tests ask for ``child=True``."""
    from washexp.app import main

    saved_env, saved_argv = dict(os.environ), sys.argv[:]
    os.environ.update(env)
    sys.argv = [str(ROOT / "run.py")]
    try:
        return _here(lambda: main(argv, root=ROOT), cwd, ["run.py", *argv])
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        sys.argv = saved_argv


def washexp_cli(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """``washexp ARGV`` from ``cwd``, run in this process (see :func:`run_py_here`); MLflow's log
    lines are in its stderr (MLflow's handler writes to the ``sys.stderr`` of the moment)."""
    from washexp.cli import main

    return _here(lambda: main(list(argv)), cwd, ["washexp", *argv])


def _here(command, cwd: Path, args: list[str]) -> subprocess.CompletedProcess:
    """``command()`` from ``cwd``, what it printed captured, as a child's result."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = command()
        except SystemExit as exit_:  # argparse's usage errors and --help
            code = exit_.code
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


SCRIPTED_ENV = {"OPENAI_API_KEY": "sk-test-0", "CI": "1"}
"""The environment of a sweep against the scripted server: a placeholder key, and CI's plain output."""


def scripted_model(
    url: str,
    recordings: Path,
    name: str = "scripted",
    *,
    platform: str | None = "scripted-test-server",
    generations: int | None = 1,
    answers: int | None = 1,
) -> list[str]:
    """The overrides that point a sweep at the scripted OpenAI-compatible server of
    ``tests/openai_server.py`` at ``url``, recording its calls in ``recordings``: one generation
    and one answer per context unless asked (None leaves the config's default)."""
    args = ["model=openai", f"endpoint.base_url={url}", f"model.name={name}", f"endpoint.recordings={recordings}"]
    if platform is not None:
        args.append(f"model.platform={platform}")
    if generations is not None:
        args.append(f"model.generations={generations}")
    if answers is not None:
        args.append(f"model.answers_per_context={answers}")
    return args


def scripted_sweep(
    url: str, store: Path, tasks: tuple[str, ...], *args: str, recordings: Path | None = None, **model
) -> subprocess.CompletedProcess:
    """A multirun (``-m``) of ``args`` on ``tasks`` against the scripted server at ``url``
    (:func:`scripted_model`, ``model`` its options), recorded in ``recordings`` (default
    ``store/rec``), into ``store``: a container, so it starts premade."""
    overrides = scripted_model(url, recordings or store / "rec", **model)
    return run_cli(["-m", *args, *overrides, f"task=[{','.join(tasks)}]"], store, env=SCRIPTED_ENV, premade=True)


CALL_COUNTS = ("calls_live", "calls_replayed", *SERVER_COUNTS)
"""Metrics a replay changes by design: its calls are replayed, not live (counted apart), and it
starts no model server."""


def without_calls(metrics: dict[str, float]) -> dict[str, float]:
    """``metrics`` but the call counts and each role's spend (``role/...``: a call is charged to the
    first condition that names it, which concurrent conditions may reach in either order): what a
    strict replay must reproduce exactly."""
    return {k: v for k, v in metrics.items() if k not in CALL_COUNTS and not k.startswith("role/")}


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path


# Property tests run the same examples every time: a green suite stays green on the next clone
# (hypothesis' own random search is for a developer's exploratory run: HYPOTHESIS_PROFILE=explore).
settings.register_profile("fixed", derandomize=True, database=None)
settings.register_profile("explore")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fixed"))


def copy_record(record: Path, to: Path) -> Path:
    """A copy of ``record``, its markdown, plots and bundle in ``to``, to break."""
    for path in record.parent.glob(record.stem + "*"):
        (shutil.copytree if path.is_dir() else shutil.copy)(path, to / path.name)
    return to / record.name
