"""Bring your own washer (issue 13): ``washer=plugin washer.target=...`` and ``washexp.washers``.

A plugin washer is built like the built-in ones; what it was built from enters the spec (and so
the run's identity); a bad factory is one line; a ``propose`` that crashes or returns garbage is a
FAILED round (:class:`WasherError`), never a traceback.
"""

from __future__ import annotations

import textwrap

import pytest

from tests.conftest import run_cli
from washexp.errors import ConfigError
from washexp.wash.plan import Plan
from washexp.wash.washer import Proposal
from washexp.wash.washers import WasherError, make_washer, washer_spec

SOURCE = textwrap.dedent(
    """
    from washexp.wash.plan import Plan
    from washexp.wash.washer import Proposal

    class Idle:
        name = "idle"
        def __init__(self, *, mode="ok"):
            self.mode = mode
        def propose(self, files, keeps, scratch):
            if self.mode == "crash":
                raise KeyError("boom")
            if self.mode == "garbage":
                return {"plan": []}
            return Proposal(Plan((), washer=self.name))

    def make(*, mode="ok"):
        return Idle(mode=mode)

    def raises(**kw):
        raise RuntimeError("cannot start")

    def wrong(**kw):
        return 7
    """
)


@pytest.fixture
def plug(tmp_path, monkeypatch):
    (tmp_path / "mywasher.py").write_text(SOURCE)
    info = tmp_path / "mywasher-0.3.dist-info"  # what pip would install: metadata + an entry point
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mywasher\nVersion: 0.3\n")
    (info / "entry_points.txt").write_text("[washexp.washers]\nidle = mywasher:make\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_plugin_washer_is_built_like_the_builtins_and_its_spec_names_it(plug, tmp_path):
    w = make_washer({"name": "plugin", "target": "mywasher:make"})
    assert w.name == "idle" and w.propose({}, (), tmp_path) == Proposal(Plan((), washer="idle"))
    spec = washer_spec({"name": "plugin", "target": "mywasher:make", "mode": "ok"})
    assert spec["plugin"]["target"] == "mywasher:make" and len(spec["plugin"]["module_sha256"]) == 64
    with pytest.raises(ConfigError, match="unknown washer make argument 'nope'"):
        make_washer({"name": "plugin", "target": "mywasher:make", "nope": 1})


@pytest.mark.parametrize(("mode", "text"), [("crash", "KeyError: 'boom'"), ("garbage", "returned dict")])
def test_a_crashing_or_garbage_washer_is_a_failed_round(plug, tmp_path, mode, text):
    w = make_washer({"name": "plugin", "target": "mywasher:make", "mode": mode})
    with pytest.raises(WasherError) as err:
        w.propose({}, (), tmp_path)
    assert str(err.value).startswith("washer idle (mywasher:make): ") and text in str(err.value)


@pytest.mark.parametrize(
    ("target", "text"),
    [
        ("mywasher:raises", "the factory raised RuntimeError: cannot start"),
        ("mywasher:wrong", "the factory returned a int, which has no propose(...)"),
        ("mywasher:absent", "cannot load it: AttributeError"),
    ],
)
def test_a_bad_factory_is_one_line_naming_the_target(plug, target, text):
    with pytest.raises(ConfigError) as err:
        make_washer({"name": "plugin", "target": target})
    assert str(err.value).startswith(f"washer.target={target}: ") and text in str(err.value)


def test_unknown_washer_says_did_you_mean():
    with pytest.raises(ConfigError, match="did you mean 'plain'"):
        make_washer({"name": "plainn"})


def test_plugin_washer_runs_a_wash_and_a_bad_one_exits_2_before_any_run(plug, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    env = {"PYTHONPATH": str(plug), "CI": "1"}
    base = ["benchmark=wash", "measurement=ceiling", "rounds=1", "washer=plugin", "washer.target=mywasher:make"]
    ok = run_cli([*base, "store=lean"], store, env=env, check=False)
    assert ok.returncode == 0 and "Traceback" not in ok.stderr, ok.stderr[-2000:]
    bad = run_cli([*base[:-1], "washer.target=mywasher:raises"], store, env=env, check=False)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0
    assert "washer.target=mywasher:raises: the factory raised RuntimeError" in bad.stderr


def test_an_installed_washer_is_a_washer_option_with_its_version(plug, tmp_path):
    spec = washer_spec({"name": "idle"})
    assert spec["plugin"]["package"] == "mywasher" and spec["plugin"]["version"] == "0.3"
    store = tmp_path / "store"
    store.mkdir()
    env = {"PYTHONPATH": str(plug), "CI": "1"}
    base = ["benchmark=wash", "measurement=ceiling", "rounds=1", "store=lean"]
    ok = run_cli([*base, "washer=idle"], store, env=env, check=False)
    assert ok.returncode == 0 and "Traceback" not in ok.stderr, ok.stderr[-2000:]
    typo = run_cli([*base, "washer=idel"], store, env=env, check=False)
    assert typo.returncode == 2 and "did you mean 'idle'?" in typo.stderr
