"""Bring your own compaction method (issue 13): a plugin runs beside S and H under their rules.

The example package (``examples/firstlast``) is installed by the tests into a temporary target and
put on the subprocess' ``PYTHONPATH``, never into the shared environment. In-process tests build a
:class:`~washexp.compaction.methods.plugin.Plugin` from a local class and run real fixtures through it.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import run_cli
from washexp.compaction.backends.roles import roles_for
from washexp.compaction.condition import Arm, run_condition
from washexp.compaction.frozen import FrozenCache
from washexp.compaction.inputs.fixtures import load_task
from washexp.compaction.methods import plugin as plugins
from washexp.config import ModelConfig
from washexp.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "compaction"
EXAMPLE = ROOT / "examples" / "firstlast"


def _env(*paths: Path) -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join([*map(str, paths), os.environ.get("PYTHONPATH", "")]), "CI": "1"}


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    target, source = tmp_path_factory.mktemp("site"), tmp_path_factory.mktemp("src") / "firstlast"
    shutil.copytree(EXAMPLE, source)  # pip builds in place: keep the build folders out of the tree
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target)]
    subprocess.run([*cmd, str(source)], check=True, capture_output=True, timeout=300)
    return target


# ---- in process: the rules a plugin answers to -------------------------------------------------


class Scripted:
    """A plugin whose reply is chosen per test: a body, a crash or garbage."""

    name = "scripted"

    def __init__(self, reply):
        self.reply = reply
        self.requests = []

    def compact(self, request):
        self.requests.append(request)
        return self.reply(request) if callable(self.reply) else self.reply


_SPECS = itertools.count()


def _plugin(reply) -> plugins.Plugin:
    # Bodies are frozen per spec (as across a sweep's N): each test's plugin is a spec of its own.
    return plugins.Plugin(
        "scripted", Scripted(reply), {"name": "scripted", "target": "tests:Scripted", "n": next(_SPECS)}
    )


@pytest.fixture(scope="module")
def cache():
    return FrozenCache(roles_for(ModelConfig(name="reference")))


def _run(task_id: str, reply, cache, topn: int = 0):
    method = _plugin(reply)
    out = run_condition(load_task(FIXTURES / task_id), Arm("scripted", topn), cache, 1, 0, method=method)
    return out, method.compactor


def test_plugin_sees_query_units_tokens_and_allowance(cache):
    task = load_task(FIXTURES / "backup")
    out, compactor = _run("backup", lambda r: "\n".join(u.text.splitlines()[0] for u in r.units), cache)
    request = compactor.requests[0]
    assert request.query == task.query and request.model is None  # offline: no chat model
    assert [u.index for u in request.units] == [u.index for u in task.units]
    assert all(u.tokens > 0 for u in request.units) and request.allowance == out.metrics["allowance"]
    assert out.metrics["valid"] == 1.0 and "summary/g0.txt" in out.artifacts
    record = json.loads(out.artifacts["summary/g0.checkpoint.json"])
    assert record["impl"] == "plugin" and record["valid"] and len(record["attempts"]) == 1


def test_body_over_the_allowance_is_invalid_and_scores_zero(cache):
    """The trap: a plugin that ignores the allowance must not be fused and credited (as H)."""
    out, _ = _run("backup", lambda r: "\n".join(u.text for u in r.units), cache, topn=2)
    assert out.metrics["valid"] == 0.0 and out.metrics["retention"] == 0.0
    assert out.metrics["contexts_failed"] == 0.0  # invalid, not failed
    record = json.loads(out.artifacts["summary/g0.checkpoint.json"])
    assert not record["valid"] and "> allowance" in record["failure"]
    assert "contexts/g0.json" not in out.artifacts


def test_body_not_fewer_tokens_than_full_is_invalid(cache, monkeypatch):
    from washexp.compaction.inputs import budget

    monkeypatch.setattr(budget, "ALLOWANCE_MAX", 10**6)
    monkeypatch.setattr(budget, "ALLOWANCE_MIN", 10**6)  # the allowance no longer guards: Full's rule must
    out, _ = _run("backup", lambda r: "\n".join(u.text for u in r.units) * 2, cache)
    assert out.metrics["valid"] == 0.0


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (lambda r: 1 / 0, "scripted: ZeroDivisionError: division by zero"),
        ({"facts": 1}, "scripted: TypeError: compact() returned dict, expected str"),
    ],
)
def test_crash_or_garbage_is_a_failed_zero_credit_context(cache, reply, reason):
    out, _ = _run("backup", reply, cache)
    assert out.metrics["valid"] == 0.0 and out.metrics["contexts_failed"] == 1.0
    assert json.loads(out.artifacts["failures.json"]) == {"g0": {"role": "scripted", "reason": reason}}


def test_empty_body_is_invalid(cache):
    out, _ = _run("backup", "   ", cache)
    assert out.metrics["valid"] == 0.0 and out.metrics["contexts_failed"] == 0.0


def test_build_names_the_target_in_one_line(tmp_path, monkeypatch):
    (tmp_path / "badplug.py").write_text(
        textwrap.dedent(
            """
            def raises(**kw):
                raise RuntimeError("no GPU here\\nsecond line")
            def garbage(**kw):
                return 42
            NOT_CALLABLE = 3
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    cases = {
        "badplug:raises": "the factory raised RuntimeError: no GPU here",
        "badplug:garbage": "the factory returned a int, which has no compact(request)",
        "badplug:NOT_CALLABLE": "is a int, not a factory",
        "badplug:absent": "cannot load it: AttributeError",
        "nosuchmodule:make": "cannot load it: ModuleNotFoundError",
    }
    for target, text in cases.items():
        with pytest.raises(ConfigError) as err:
            plugins.build("plugin", target, {})
        assert str(err.value).startswith(f"method.target={target}: ") and text in str(err.value)
        assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="method=plugin needs method.target=package.module:factory"):
        plugins.build("plugin", None, {})


# ---- end to end: the example package from its entry point --------------------------------------


def _runs(store: Path):
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    exp = client.get_experiment_by_name("compaction")
    runs = client.search_runs([exp.experiment_id], max_results=5000) if exp else []
    return [r for r in runs if r.data.tags["washexp.kind"] != "decisions"]  # arms and units only


@pytest.fixture(scope="module")
def sweep(site, tmp_path_factory):
    store = tmp_path_factory.mktemp("byo")
    proc = run_cli(["-m", "method=S,H,firstlast", "topn=0..5"], store, env=_env(site))
    out = store / "results"
    subprocess.run(
        [sys.executable, "-m", "washexp.cli", "export", "--tracking-uri", f"sqlite:///{store / 'mlflow.db'}"]
        + ["--out", str(out)],
        check=True,
        capture_output=True,
        timeout=300,
        env={**os.environ, **_env(site)},
    )
    return store, proc, _runs(store), out


@pytest.mark.slow
def test_example_plugin_runs_from_its_entry_point_beside_s_and_h(sweep):
    _, proc, runs, _ = sweep
    arms = [r for r in runs if r.data.tags["washexp.kind"] == "arm"]
    assert len(arms) == 18 and all(r.info.status == "FINISHED" for r in runs)
    assert len(runs) == 18 * 15  # each arm and its fourteen conditions
    mine = [r for r in arms if r.data.tags["method"] == "firstlast"]
    assert sorted(int(r.data.tags["topn"]) for r in mine) == list(range(6))
    for r in mine:
        assert r.data.tags["washexp.plugin.package"] == "washexp-firstlast"
        assert r.data.tags["washexp.plugin.version"] == "0.1.0"
        spec = json.loads(r.data.params["plugin"])
        assert spec["target"] == "washexp_firstlast:make" and spec["module_sha256"]
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_record_shows_the_plugin_beside_s_and_h_with_the_same_columns(sweep):
    _, _, _, out = sweep
    (record,) = out.glob("compaction-*.json")
    data = json.loads(record.read_text())
    text = json.dumps(data)
    assert "firstlast top5" in text and "S top5" in text and "H top5" in text
    assert data["provenance"]["plugin methods (spec)"][0]["package"] == "washexp-firstlast"
    md = next(out.glob("compaction-*.md")).read_text()
    rows = {line.split("|")[1].strip(): line.count("|") for line in md.splitlines() if line.startswith("| ")}
    for n in range(6):
        assert rows[f"firstlast top{n}"] == rows[f"S top{n}"] == rows[f"H top{n}"]


def test_unknown_method_says_did_you_mean_before_any_run(site, store):
    proc = run_cli(["method=firstlst", "task=backup"], store, env=_env(site), check=False)
    assert proc.returncode == 2 and "did you mean 'firstlast'?" in proc.stderr
    assert proc.stderr.count("\n") == 1 and _runs(store) == []


def test_bad_factory_is_one_line_exit_2_before_any_run(site, store):
    proc = run_cli(["method=firstlast", "method.args={lines: 0}", "task=backup"], store, env=_env(site), check=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "method.target=washexp_firstlast:make: the factory raised ValueError: lines must be >= 1" in proc.stderr
    assert _runs(store) == []


@pytest.mark.slow
def test_a_new_plugin_version_or_args_never_shares_a_run(tmp_path):
    """The trap: an identity without the plugin's spec would reuse the old version's numbers."""
    pkg = tmp_path / "plug"
    pkg.mkdir()
    source = "class M:\n    def compact(self, r):\n        return r.units[0].text.splitlines()[0]\n"
    (pkg / "myplug.py").write_text(source + "def make(**kw):\n    return M()\n")
    store = tmp_path / "store"
    store.mkdir()
    args = ["method=plugin", "method.target=myplug:make", "task=backup"]

    def said(extra=()):
        proc = run_cli([*args, *extra], store, env=_env(pkg))
        return proc.stdout + proc.stderr

    assert "1 run, 0 reused" in said()
    assert "finished already" in said()
    assert "1 run, 0 reused" in said(["method.args={x: 1}"])
    (pkg / "myplug.py").write_text(source + "def make(**kw):\n    return M()  # v2\n")
    assert "1 run, 0 reused" in said()
    arms = [r for r in _runs(store) if r.data.tags["washexp.kind"] == "arm"]
    assert len(arms) == 3 and {r.data.tags["method"] for r in arms} == {"make"}
