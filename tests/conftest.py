"""Shared helpers: run the real command line in a subprocess against a store in tmp_path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

from washexp.models.llama_server import SERVER_COUNTS

ROOT = Path(__file__).resolve().parent.parent


def run_cli(
    args: list[str], store: Path, cwd: Path | None = None, env: dict | None = None, check: bool = True
) -> subprocess.CompletedProcess:
    """``python run.py ARGS`` with tracking in ``store``, from a directory that is not the root."""
    tracking = [
        f"tracking.uri=sqlite:///{store / 'mlflow.db'}",
        f"tracking.artifacts={store / 'mlruns'}",
        f"hydra.sweep.dir={store / 'multirun'}",
        f"hydra.run.dir={store / 'outputs'}",
    ]
    tracking = [t for t in tracking if t.partition("=")[0] not in {a.partition("=")[0] for a in args}]
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


CALL_COUNTS = ("calls_live", "calls_replayed", *SERVER_COUNTS)
"""Metrics a replay changes by design: its calls are replayed, not live (counted apart), and it
starts no model server."""


def without_calls(metrics: dict[str, float]) -> dict[str, float]:
    """``metrics`` but the call counts: what a strict replay must reproduce exactly."""
    return {k: v for k, v in metrics.items() if k not in CALL_COUNTS}


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path


# Property tests run the same examples every time: a green suite stays green on the next clone
# (hypothesis' own random search is for a developer's exploratory run: HYPOTHESIS_PROFILE=explore).
settings.register_profile("fixed", derandomize=True, database=None)
settings.register_profile("explore")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fixed"))
