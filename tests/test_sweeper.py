"""The default sweeper (``hydra/sweeper=washexp``) composes each job's config once, and a bad
override in any job still fails before the first job runs (Hydra's basic sweeper composes every
job twice: once to validate the sweep, once to run it)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT

COUNTED = textwrap.dedent(
    """
    import json, sys
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from washexp.app import main

    calls = []
    compose = ConfigLoaderImpl.load_sweep_config
    def counted(self, *args, **kwargs):  # Hydra passes them by name or by position
        calls.append(list(kwargs.get("sweep_overrides", args[-1] if args else [])))
        return compose(self, *args, **kwargs)
    ConfigLoaderImpl.load_sweep_config = counted
    code = main(sys.argv[1:], root=None)
    print(json.dumps({"code": code, "composed": calls}))
    """
)


def _sweep(tmp_path, *args: str) -> dict:
    command = [sys.executable, "-c", COUNTED, "-m", "method=S", "topn=0,1,2", "task=backup", "tracking=off"]
    command += [f"hydra.sweep.dir={tmp_path / 'multirun'}", *args]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "stderr": done.stderr}


@pytest.mark.parametrize(("sweeper", "per_job"), [((), 1), (("hydra/sweeper=basic",), 2)])
def test_each_job_is_composed_once(tmp_path, sweeper, per_job):
    out = _sweep(tmp_path, *sweeper)
    assert out["code"] == 0, out["stderr"]
    composed = [o for o in map(" ".join, out["composed"]) if "compaction.topn" in o]
    assert len(composed) == 3 * per_job and len(set(composed)) == 3


def test_a_bad_value_in_the_last_job_fails_before_the_first_runs(tmp_path):
    out = _sweep(tmp_path, "model=reference,nosuchmodel")
    assert out["code"] == 2 and "nosuchmodel" in out["stderr"]
    assert not (tmp_path / "multirun" / "0").exists()  # no job ran (each would make its folder)
