"""``washexp import``: agent sessions (OpenAI chat, Claude Code JSONL, ATIF) as a compaction task
set, facts planted or named, secrets masked, bad input refused in one line with nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import washexp_cli
from washexp.cli import main
from washexp.compaction.inputs.fixtures import load_tasks
from washexp.needles import contains
from washexp.sessions.planting import KINDS, plant

SAMPLES = Path(__file__).parent / "sessions"
RECORD_SESSIONS = Path(__file__).parent.parent / "results" / "sessions-swe-agent" / "sessions.jsonl"
FORMATS = {
    "openai": "openai_chat.json",
    "claude-code": "claude_code.jsonl",
    "atif": "atif_trajectory.json",
    "otlp": "otlp_genai.json",  # made by the OpenTelemetry SDK: tests/sessions/otel_agent.py
}


def run(*args: str) -> int:
    return main(["import", *map(str, args)])


def imported(tmp_path: Path, fmt: str, *extra: str) -> Path:
    out = tmp_path / fmt
    assert run(fmt, SAMPLES / FORMATS[fmt], "--out", out, *extra) == 0
    return out


def refused(capsys, tmp_path: Path, *args) -> str:
    """The command exits 2 with one line, and leaves nothing beside ``--out``."""
    before = set(tmp_path.iterdir())
    assert run(*args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert set(tmp_path.iterdir()) == before  # no set, no temporary folder
    return err


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_format_becomes_loadable_tasks_with_its_query_units_and_planted_facts(tmp_path, capsys, fmt):
    out = imported(tmp_path, fmt, "--plant", "8", "--seed", "3")
    printed = capsys.readouterr().out
    tasks = load_tasks(out)
    first = tasks[0]
    assert first.query == "Why did the nightly batch run slowly?"
    assert [u.arguments for u in first.units][1:3] in (
        [{"path": "logs/worker.log"}, {"path": "conf/batch.yaml"}],
        [{"file_path": "/work/batch/logs/worker.log"}, {"file_path": "/work/batch/conf/batch.yaml"}],
    )
    assert first.declared_cohort == "primary" and len(first.units) == 4
    assert sorted(first.fields) == [f"fact_{i:02d}" for i in range(1, 9)]
    evidence = "\n".join(u.content for u in first.units)
    assert all(contains(evidence, n) for ns in first.needles.values() for n in ns)
    assert "sk-proj-" not in (out / first.id / "trajectory.json").read_text()  # the config's key is masked
    assert "secret(s) masked" in printed and "left out" in printed
    made = json.loads((out / first.id / "import.json").read_text())
    assert made["format"] == fmt and made["plant"] == {"n": 8, "seed": 3}
    assert [p["kind"] for p in made["planted"]] == list(KINDS)
    assert [p["supersedes"] for p in made["planted"]] == [k == "superseded" for k in KINDS]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["tasks"] == {t.id: t.digest for t in tasks}


def test_the_final_report_and_what_the_format_cannot_express(tmp_path, capsys):
    out = imported(tmp_path, "openai", "--plant", "2")
    one, two = load_tasks(out)
    assert json.loads((out / one.id / "trajectory.json").read_text())["messages"][-1] == {
        "role": "assistant",
        "content": "Worker 3 is slow; the timeout is 30 s.",
        "final": True,
    }
    assert "1 x missing final report (a placeholder stands in); 1 x system message" in capsys.readouterr().out
    assert two.declared_cohort == "control:short_fixture"  # under 2,000 characters of tool results
    assert all(m["role"] in ("assistant", "tool") for m in two.history)


def test_a_planted_kind_and_its_type_are_the_declared_ones(monkeypatch):
    """Fact kinds are declared once (washexp.tasks.facts); a second list in planting drifted apart."""
    from washexp.tasks import facts

    units = ["batch:\n  retries: 3\n  owner: platform\n" * 20]
    monkeypatch.setitem(facts.SESSION_KINDS, "number", "an integer, as declared")
    _, planted = plant(units, len(KINDS), seed=1)
    assert [f.kind for f in planted] == list(facts.SESSION_KINDS)
    assert [f.description.endswith(f"({facts.SESSION_KINDS[f.kind]}).") for f in planted] == [True] * len(KINDS)
    assert "(an integer, as declared)" in planted[KINDS.index("number")].description


def test_a_kind_declared_without_a_value_drawn_for_it_is_an_error(monkeypatch):
    """A kind added to the declaration but not to planting fails loudly; it was planted as a list."""
    from washexp.sessions import planting

    monkeypatch.setattr(planting, "KINDS", ("duration",))
    with pytest.raises(ValueError, match="no value is drawn for a fact of kind 'duration'"):
        plant(["batch:\n  retries: 3\n" * 20], 1, seed=1)


def test_planting_is_a_function_of_the_seed_and_follows_the_surrounding_form():
    units = [
        "2026-03-01T10:00:00Z worker up\n2026-03-01T10:00:01Z worker ready\n" * 20,
        "batch:\n  retries: 3\n  owner: platform\n" * 20,
        '{\n  "a": 1,\n  "b": 2,\n' * 20 + "}",
        "".join(f"{i:6d}|line {i}\n" for i in range(60)),
    ]
    a, facts = plant(units, 16, seed=5)
    assert plant(units, 16, seed=5) == (a, facts) and plant(units, 16, seed=6)[0] != a
    assert [f.kind for f in facts] == list(KINDS) * 2
    lines = {ln for text in a for ln in text.splitlines()} - {ln for text in units for ln in text.splitlines()}
    forms = {
        0: r"2026-03-01T10:00:0\dZ INFO \w+=",
        1: r"  \w+: ",
        2: r'  "\w+": ',
        3: r"\s+\d+\|line \d+$|\s+\d+\|\w+: ",
    }
    import re

    for f in facts:
        written = [ln for ln in lines if all(n in ln for n in f.needles)]
        assert written, f
        assert re.match(forms[f.unit], written[0]), (f.unit, written[0])
    assert sorted(f.depth for f in facts) == [f.depth for f in facts]  # spread from start to end


def test_named_facts_are_checked_in_the_session(tmp_path, capsys):
    facts = tmp_path / "facts.yaml"
    facts.write_text(
        yaml.safe_dump(
            {
                "atif_trajectory-001": {
                    "region": {
                        "description": "The region the batch runs in.",
                        "expected": "eu-west-1",
                        "needle": "eu-west-1",
                    }
                }
            }
        )
    )
    out = imported(tmp_path, "atif", "--facts", facts)
    (task,) = load_tasks(out)
    assert task.expected == {"region": "eu-west-1"} and task.needles == {"region": ("eu-west-1",)}
    facts.write_text(
        yaml.safe_dump(
            {
                "atif_trajectory-001": {
                    "region": {"description": "The region.", "expected": "us-east-2", "needle": "us-east-2"}
                }
            }
        )
    )
    err = refused(capsys, tmp_path, "atif", SAMPLES / FORMATS["atif"], "--out", tmp_path / "b", "--facts", facts)
    assert "facts.yaml: atif_trajectory-001.region: needle 'us-east-2' is in no tool result" in err
    facts.write_text(yaml.safe_dump({"other-001": {"x": {"description": "d", "expected": 1, "needle": "30"}}}))
    err = refused(capsys, tmp_path, "atif", SAMPLES / FORMATS["atif"], "--out", tmp_path / "c", "--facts", facts)
    assert "other-001: no such imported task" in err
    facts.write_text(
        yaml.safe_dump({"atif_trajectory-001": {"x": {"description": "d", "expected": 1, "needle": "ightly batch"}}})
    )
    err = refused(capsys, tmp_path, "atif", SAMPLES / FORMATS["atif"], "--out", tmp_path / "d", "--facts", facts)
    assert "needle 'ightly batch' is in the query or the description" in err


def test_a_set_the_loader_refuses_leaves_nothing(tmp_path, capsys, monkeypatch):
    from washexp.errors import FixtureError
    from washexp.sessions import writer

    def refuse(folder):
        assert folder.parent == tmp_path and folder.name.startswith(".set.")  # a temporary folder beside --out
        raise FixtureError(folder, None, "refused")

    monkeypatch.setattr(writer, "load_tasks", refuse)
    refused(capsys, tmp_path, "openai", SAMPLES / FORMATS["openai"], "--out", tmp_path / "set", "--plant", "1")


def test_a_secret_in_the_environment_is_masked_too(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BATCH_TOKEN", "platform")  # a declared secret's value, wherever it appears
    out = imported(tmp_path, "openai", "--plant", "1")
    assert "platform" not in (out / "openai_chat-001" / "trajectory.json").read_text()
    assert "washexp import: 2 task(s)" in capsys.readouterr().out


def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, capsys):
    cc, oa = SAMPLES / FORMATS["claude-code"], SAMPLES / FORMATS["openai"]
    out = ["--out", tmp_path / "set", "--plant", "2"]
    assert "not OpenAI chat messages" in refused(capsys, tmp_path, "openai", cc, *out)
    assert "not an ATIF trajectory" in refused(capsys, tmp_path, "atif", oa, *out)
    assert "openai_chat.json: line 1: not valid JSON" in refused(capsys, tmp_path, "claude-code", oa, *out)
    one_line = tmp_path / "one.jsonl"
    one_line.write_text(json.dumps(json.loads(oa.read_text())[0]) + "\n")
    assert "line 1: not a Claude Code session entry" in refused(capsys, tmp_path, "claude-code", one_line, *out)

    truncated = tmp_path / "cut.jsonl"
    lines = cc.read_text().splitlines()
    truncated.write_text("\n".join(lines[:5]) + "\n" + lines[5][:40])
    assert f"{truncated}: line 6: not valid JSON" in refused(capsys, tmp_path, "claude-code", truncated, *out)

    bare = tmp_path / "bare.json"
    bare.write_text(
        json.dumps({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]})
    )
    assert "no tool results" in refused(capsys, tmp_path, "openai", bare, *out)

    huge = tmp_path / "huge.json"
    with huge.open("wb") as f:  # sparse: 1 GB on paper, no blocks on disk
        f.truncate(1 << 30)
    assert "larger than" in refused(capsys, tmp_path, "openai", huge, *out)

    link = tmp_path / "link.json"
    link.symlink_to(oa)
    assert "symlink" in refused(capsys, tmp_path, "openai", link, *out)

    deep = tmp_path / "deep.json"
    deep.write_text(
        json.dumps(
            {
                "messages": [
                    {"role": "user", "content": "q", "x": [[[[[[[[[]]]]]]]]] * 1}
                    | {"x": json.loads("[" * 100 + "]" * 100)}
                ]
            }
        )
    )
    assert "nested deeper" in refused(capsys, tmp_path, "openai", deep, *out)

    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"messages": "caf\xe9"}')
    assert "not UTF-8" in refused(capsys, tmp_path, "openai", latin, *out)
    assert "no such file" in refused(capsys, tmp_path, "openai", tmp_path / "none.json", *out)
    assert "nothing to grade" in refused(capsys, tmp_path, "openai", oa, "--out", tmp_path / "set")
    (tmp_path / "taken").mkdir()
    assert "already exists" in refused(capsys, tmp_path, "openai", oa, "--out", tmp_path / "taken", "--plant", "1")


def test_an_unanswered_call_and_an_orphan_result(tmp_path, capsys):
    messages = json.loads((SAMPLES / FORMATS["openai"]).read_text())[0]["messages"]
    orphan = tmp_path / "orphan.json"
    orphan.write_text(json.dumps({"messages": [*messages[:3], {**messages[3], "tool_call_id": "nope"}]}))
    err = refused(capsys, tmp_path, "openai", orphan, "--out", tmp_path / "o", "--plant", "1")
    assert "a tool result answers no earlier call ('nope')" in err
    open_call = tmp_path / "open.json"
    open_call.write_text(json.dumps({"messages": [*messages[:7], *messages[8:]]}))  # call_03's result gone
    assert run("openai", open_call, "--out", tmp_path / "p", "--plant", "1") == 0
    assert "1 x tool call without a result" in capsys.readouterr().out
    (task,) = load_tasks(tmp_path / "p")
    assert [u.call_id for u in task.units] == ["call_01", "call_02", "call_04"]


def swept(out: Path, store: Path) -> list:
    """``method=full,S,H topn=0,3`` offline on the task set ``out`` into ``store`` (exit 0, five
    arms); returns Full's condition runs."""
    from mlflow.tracking import MlflowClient

    from tests.conftest import run_cli

    store.mkdir()
    run_cli(["-m", "method=full,S,H", "topn=0,3", f"benchmark.fixtures={out}"], store, env={"CI": "1"}, premade=True)
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    exp = client.get_experiment_by_name("compaction")
    arms = client.search_runs([exp.experiment_id], "tags.`washexp.kind` = 'arm'")
    assert len(arms) == 5  # Full, S top 0 and 3, H top 0 and 3
    return client.search_runs([exp.experiment_id], "tags.`washexp.kind` = 'condition' and tags.method = 'full'")


def test_swe_agent_quirks_a_list_of_one_call_id_and_a_replayed_id(tmp_path, capsys):
    """SWE-agent's histories: a tool message names its call in ``tool_call_ids``, and a replayed
    run reuses an answered call's id for a new call (renamed ``<id>#2``)."""
    messages = json.loads((SAMPLES / FORMATS["openai"]).read_text())[0]["messages"]
    for m in messages:
        if m["role"] == "tool":
            m["tool_call_ids"] = [m.pop("tool_call_id")]
        for c in m.get("tool_calls", []):
            c["id"] = "call_01" if c["id"] == "call_03" else c["id"]
    messages[7]["tool_call_ids"] = ["call_01"]
    session = tmp_path / "swe.json"
    session.write_text(json.dumps({"messages": messages}))
    assert run("openai", session, "--out", tmp_path / "set", "--plant", "1") == 0
    assert "1 x reused tool call id (renamed <id>#2, ...)" in capsys.readouterr().out
    (task,) = load_tasks(tmp_path / "set")
    assert [u.call_id for u in task.units] == ["call_01", "call_02", "call_01#2", "call_04"]
    assert task.units[2].arguments == {"path": "conf/batch.yaml"}
    pending = [*messages[:3], {**messages[2], "content": "again"}, *messages[3:]]  # two open calls, one id
    session.write_text(json.dumps({"messages": pending}))
    assert "'call_01' is used twice before a result" in refused(
        capsys, tmp_path, "openai", session, "--out", tmp_path / "x", "--plant", "1"
    )


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_sweep_on_each_imported_format_keeps_every_planted_needle_under_full(tmp_path, fmt):
    full = swept(imported(tmp_path, fmt, "--plant", "8", "--seed", "11"), tmp_path / "store")
    assert full and all(r.data.metrics["retention"] == 1.0 for r in full)


REAL = SAMPLES / "real"  # made by each format's own tool or spec, not for these tests: real/SOURCES.md
REAL_FORMATS = {
    "claude-code": "claude_code_spotter.jsonl",  # a Claude Code 2.1.39 session (spotter's fixture)
    "atif": "atif_rfc_example.json",  # the ATIF RFC's example trajectory
    "otlp": "otlp_genai_openai.jsonl",  # OpenTelemetry's GenAI instrumentation and JSON file exporter
}


def test_real_sessions_import_with_planted_facts(tmp_path, capsys):
    """One real sample a format: its query, calls and final report as the format wrote them, every
    planted needle in the evidence."""
    tasks = {}
    for fmt, name in REAL_FORMATS.items():
        out = tmp_path / fmt
        assert run(fmt, REAL / name, "--out", out, "--plant", "8", "--seed", "11") == 0
        (tasks[fmt],) = load_tasks(out)
        task = tasks[fmt]
        assert sorted(task.fields) == [f"fact_{i:02d}" for i in range(1, 9)]
        evidence = "\n".join(u.content for u in task.units)
        assert all(contains(evidence, n) for ns in task.needles.values() for n in ns), fmt
        final = json.loads((out / task.id / "trajectory.json").read_text())["messages"][-1]
        assert final["final"] and final["content"] != "", fmt
    printed = capsys.readouterr().out
    cc, atif, otlp = tasks["claude-code"], tasks["atif"], tasks["otlp"]
    assert cc.query.startswith("Work on bead spotter-dov.") and [u.tool for u in cc.units] == ["Bash"] * 4
    assert cc.declared_cohort == "primary"  # 9,353 characters of tool results
    assert "2 x assistant thinking block; 2 x file-history-snapshot entry; 28 x progress entry" in printed
    assert atif.query == "What is the current trading price of Alphabet (GOOGL)?"
    assert [(u.call_id, u.arguments["metric"]) for u in atif.units] == [
        ("call_price_1", "price"),
        ("call_volume_2", "volume"),
    ]
    assert [u.tool for u in otlp.units] == ["find_file", "open", "edit", "bash", "submit"]


def test_the_otel_export_of_a_trajectory_imports_as_the_trajectory_itself(tmp_path):
    """The OTLP sample is SWE-agent's ``function_calling_simple`` history replayed through
    OpenTelemetry's instrumentation: it becomes the same task as that history imported directly."""
    history = tmp_path / "history.jsonl"
    history.write_text(RECORD_SESSIONS.read_text().splitlines()[1] + "\n")
    assert run("openai", history, "--out", tmp_path / "direct", "--plant", "8", "--seed", "11") == 0
    assert run("otlp", REAL / REAL_FORMATS["otlp"], "--out", tmp_path / "otel", "--plant", "8", "--seed", "11") == 0
    (direct,), (otel,) = load_tasks(tmp_path / "direct"), load_tasks(tmp_path / "otel")
    assert otel.query == direct.query
    assert [(u.call_id, u.tool, u.arguments, u.content) for u in otel.units] == [
        (u.call_id, u.tool, u.arguments, u.content) for u in direct.units
    ]
    assert otel.needles == direct.needles


@pytest.mark.slow
@pytest.mark.parametrize("fmt", REAL_FORMATS)
def test_a_sweep_on_each_real_sample_keeps_every_planted_needle_under_full(tmp_path, fmt):
    out = tmp_path / "set"
    assert run(fmt, REAL / REAL_FORMATS[fmt], "--out", out, "--plant", "8", "--seed", "11") == 0
    full = swept(out, tmp_path / "store")
    assert len(full) == 1 and full[0].data.metrics["retention"] == 1.0


def test_the_command_is_listed(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "washexp.cli", "import", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ},
        timeout=60,
    )
    assert proc.returncode == 0 and "claude-code" in proc.stdout


def test_otlp_chat_spans_and_tool_spans_read_alike(tmp_path, capsys):
    chat, tools = load_tasks(imported(tmp_path, "otlp", "--plant", "1"))
    assert chat.query == tools.query
    assert [u.content for u in chat.units][:3] == [u.content for u in tools.units][:3]  # before planting
    assert [u.call_id for u in tools.units] == ["call_01", "call_02", "call_03", "call_04"]
    trajectory = json.loads((tmp_path / "otlp" / tools.id / "trajectory.json").read_text())
    assert trajectory["messages"][-1]["content"] == "Worker 3 is slow; the timeout is 30 s."
    assert "not OTLP JSON" in refused(
        capsys, tmp_path, "otlp", SAMPLES / FORMATS["atif"], "--out", tmp_path / "x", "--plant", "1"
    )


def test_a_trace_store_that_does_not_exist_is_refused_and_not_made(tmp_path, capsys):
    uri = f"sqlite:///{tmp_path / 'none' / 'mlflow.db'}"
    err = refused(capsys, tmp_path, "mlflow", uri, "--experiment", "agent", "--out", tmp_path / "set", "--plant", "1")
    assert f"{uri}: no tracking store there" in err and not (tmp_path / "none").exists()
    assert "--experiment NAME" in refused(capsys, tmp_path, "mlflow", uri, "--out", tmp_path / "set", "--plant", "1")


@pytest.mark.slow
def test_mlflow_traces_written_by_mlflow_round_trip_to_a_verified_record(tmp_path, capsys):
    """Traces written by MLflow's own tracing API -> tasks -> sweep -> record -> verify."""
    from tests.test_export import export

    traces = tmp_path / "traces"
    traces.mkdir()
    uri = f"sqlite:///{traces / 'mlflow.db'}"
    subprocess.run(
        [sys.executable, str(SAMPLES / "mlflow_agent.py"), uri], check=True, capture_output=True, timeout=300
    )
    out = tmp_path / "set"
    assert run("mlflow", uri, "--experiment", "agent", "--out", out, "--plant", "8", "--seed", "2") == 0
    tool_spans, chat_span = load_tasks(out)
    assert tool_spans.query == chat_span.query == "Why did the nightly batch run slowly?"
    assert [u.tool for u in tool_spans.units] == [u.tool for u in chat_span.units] == ["read_file"] * 4
    assert "1 x system message" in capsys.readouterr().out  # the chat span's system prompt

    store = tmp_path / "store"
    full = swept(out, store)
    assert len(full) == 2 and all(r.data.metrics["retention"] == 1.0 for r in full)
    export(store, store / "results", "--bundle")
    (record,) = (store / "results").glob("compaction-reference-*.json")
    verified = washexp_cli("verify", str(record))
    assert verified.returncode == 0, verified.stdout + verified.stderr
