"""Security (issue 12): no key on disk or in output, servers on 127.0.0.1, paths stay in their folders.

The key test plants a distinctive fake key in ``OPENAI_API_KEY``, runs one small sweep on the model
path against the scripted server (which proves the key was really sent), exports its record, and
then reads every byte the sweep and the export wrote (the MLflow SQLite db and artifacts, the model
recordings, Hydra's outputs and log, the records) and everything printed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, scripted_model
from tests.openai_server import Script, serve
from tests.test_bad_input import TASK, make_project
from washexp import cli
from washexp.app import main as run_py
from washexp.models import llama_server
from washexp.tracking import server as tracking_server
from washexp.wash.plan import Plan, PlanError

KEY = "sk-washexp-PLANTED-5ecre7-c0ffee-0123456789abcdef"
LEAKS = (KEY.encode(), KEY[-16:].encode(), b"Bearer", b"Authorization")
"""The key, a tail of it (a truncated or masked copy is still a leak), and the header that carries it."""


def leaks_in(folder: Path) -> list[str]:
    return [
        f"{p.relative_to(folder)}: {leak.decode()}"
        for p in sorted(folder.rglob("*"))
        if p.is_file()
        for leak in LEAKS
        if leak in p.read_bytes()
    ]


def _one_arm(url: str, written: Path, store: Path) -> list[str]:
    """One small S arm on the model path: recordings and Hydra's outputs in ``written``, the
    tracking store in ``store``."""
    return [
        "method=S",
        "topn=1",
        f"task={TASK}",
        *scripted_model(url, written / "recordings", "qwen-test", platform=None),
        f"tracking.uri=sqlite:///{store / 'mlflow.db'}",
        f"tracking.artifacts={store / 'mlruns'}",
        f"hydra.run.dir={written / 'outputs'}",
    ]


def test_a_planted_key_reaches_the_endpoint_and_nothing_else(tmp_path, capfd, monkeypatch):
    root = make_project(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    written = tmp_path / "written"  # everything the sweep and the export may write lives here
    store = written / "store"
    script = Script(tasks_root=root / "fixtures" / "compaction")
    with serve(script) as url:
        code = run_py(
            _one_arm(url, written, store),
            root=root,
        )
    assert code == 0
    assert {r["headers"]["Authorization"] for r in script.requests} == {f"Bearer {KEY}"}, "the key was live"
    monkeypatch.chdir(root)
    export = ["export", "--tracking-uri", f"sqlite:///{store / 'mlflow.db'}", "--out", str(written / "results")]
    assert cli.main(export) == 0
    out, err = capfd.readouterr()

    kinds = {p.suffix for p in written.rglob("*") if p.is_file()}
    assert {".db", ".json", ".md", ".png", ".yaml", ".log"} <= kinds, kinds  # the grep saw every kind of output
    assert leaks_in(written) == []
    for leak in LEAKS:
        assert leak.decode() not in out + err


def test_servers_washexp_starts_bind_127_0_0_1():
    ui = tracking_server.command("sqlite:///mlflow.db", cli.UI_HOST, 5000)
    assert ui[ui.index("--host") + 1] == "127.0.0.1"
    assert cli._parser(ROOT).parse_args(["server"]).host == "127.0.0.1"  # washexp server, unless --host
    local = llama_server.server_command(sys.executable, Path("m.gguf"), "m", 8080, 2048, 2)
    assert local[local.index("--host") + 1] == "127.0.0.1"
    # and no module binds every interface on its own
    package = Path(cli.__file__).parent
    assert [p.name for p in package.rglob("*.py") if "0.0.0.0" in p.read_text(encoding="utf-8")] == []


def test_a_secret_that_appears_later_is_masked_from_then_on(monkeypatch):
    """Each name's verdict is decided once (a sweep reads the environment for every record it
    writes), yet a variable set later, or a name declared after it was read, is masked from then on."""
    from washexp import masking

    monkeypatch.setattr(masking, "_declared", set())  # this process's declarations and verdicts, left as they were
    monkeypatch.setattr(masking, "_verdicts", {})
    value = "later-value-c0ffee-42"
    monkeypatch.setenv("WASHEXP_TEST_PLAIN", value)
    assert masking.mask(f"x {value}") == f"x {value}"  # not a secret's name: kept, and its verdict remembered
    masking.declare("WASHEXP_TEST_PLAIN")  # a configured endpoint.api_key_env naming it
    assert masking.mask(f"x {value}") == "x ***"
    monkeypatch.setenv("WASHEXP_TEST_API_KEY", "set-after-the-first-read")
    assert masking.secret_values() == ["set-after-the-first-read", value]


@pytest.mark.parametrize("path", ["../notes.md", "/etc/notes.md", "sub/../../notes.md", "..\\notes.md"])
def test_a_plan_path_cannot_leave_the_store(path):
    item = {"file": path, "start": 1, "end": 1, "cls": "duplicate", "reason": "x", "op": "delete"}
    with pytest.raises(PlanError) as err:
        Plan.from_dict({"items": [item]})
    assert str(err.value).startswith("plan items[0].file: must be a bare file name")
    assert "\n" not in str(err.value)


def test_a_planted_key_reaches_the_washer_endpoint_and_nothing_else(tmp_path, capfd, monkeypatch):
    """The same grep for the wash family: a model washer's sweep (coalwash: outsider, insider and
    check calls) and its exported record."""
    from tests.conftest import run_cli
    from tests.wash_model_server import WashScript

    written = tmp_path / "written"
    store = written / "store"
    store.mkdir(parents=True)
    script = WashScript(fat={"settled baseline": "superseded", "matter of record": "done-point-in-time"})
    with serve(script) as url:
        proc = run_cli(
            [
                "-m",
                "benchmark=wash",
                "measurement=ceiling",
                "store=[superseded]",
                "washer=coalwash",
                "model=openai",
                "model.name=scripted-wash-model",
                f"endpoint.base_url={url}",
                f"endpoint.recordings={written / 'recordings'}",
            ],
            store,
            env={"OPENAI_API_KEY": KEY},
        )
    assert {r["headers"]["Authorization"] for r in script.requests} == {f"Bearer {KEY}"}, "the key was live"
    assert {r["kind"] for r in script.requests} >= {"outsider", "insider"}
    monkeypatch.chdir(ROOT)
    export = ["export", "--experiment", "wash", "--tracking-uri", f"sqlite:///{store / 'mlflow.db'}"]
    assert cli.main([*export, "--out", str(written / "results")]) == 0
    out, err = capfd.readouterr()
    assert {p.suffix for p in (written / "results").iterdir()} >= {".md", ".json"}
    assert leaks_in(written) == []
    for leak in LEAKS:
        assert leak.decode() not in proc.stdout + proc.stderr + out + err


@pytest.mark.parametrize("status", [pytest.param("401-echo", marks=pytest.mark.slow), "400-echo"])
def test_a_key_the_endpoint_echoes_is_masked_everywhere(tmp_path, status):
    """The trap: an endpoint that refuses the key and quotes it in its message. The message
    reaches stderr, the arm's and the parent's ``washexp.error`` tag and ``error.txt``, and the
    job log; each must hold ``***`` where the key was (and the message otherwise)."""
    from tests.conftest import run_cli

    written = tmp_path / "written"
    written.mkdir()
    script = Script()
    script.forced.extend(["429-echo"] + [status] * 50)  # a retry first: its warning is a log line
    with serve(script) as url:
        proc = run_cli(
            _one_arm(url, written, written),
            written,
            env={"OPENAI_API_KEY": KEY},
            check=False,
        )
    assert any(r["forced"] == status for r in script.requests), "the endpoint refused the key"
    assert proc.returncode == 1, proc.stderr
    assert "Incorrect API key provided: ***" in proc.stderr  # the message is kept, the key is not
    assert KEY not in proc.stdout + proc.stderr
    errors = [p for p in written.rglob("error.txt")]
    assert len(errors) >= 2 and all("Incorrect API key provided: ***" in p.read_text() for p in errors)
    logs = "".join(p.read_text() for p in written.rglob("*.log"))
    assert "Incorrect API key provided: ***" in logs  # the retry's warning, masked
    assert [p for p in written.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()] == []
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{written / 'mlflow.db'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    tags = [r.data.tags["washexp.error"] for r in runs if "washexp.error" in r.data.tags]
    assert len(tags) >= 2 and all("***" in t and KEY not in t for t in tags)
