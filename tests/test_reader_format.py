"""The reader's structured output (``model.structured_output``), end to end against a real HTTP
server on 127.0.0.1 with scripted replies (test equipment, never a model's result).

Traps guarded: the schema sent to every role (S and H must write free text; today's
``extra_body`` reaches all of them), and Jev asked for anything but its own ``{"scores": [...]}``
shape, one number per unit; a schema built from the expected values instead of the
field names (ground truth out of what is measured); the two wire forms swapped (llama-cpp-python's
server refuses OpenAI's form with HTTP 500); a reply out of shape scored as lost evidence instead
of being counted apart; an unknown form accepted silently.
"""

from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import SCRIPTED_ENV, run_cli, scripted_sweep
from tests.openai_server import Script, serve
from tests.test_export import export
from washexp.compaction.backends.answer_format import (
    ANY_VALUE,
    facts_schema,
    ranking_format,
    response_format,
    scores_schema,
)
from washexp.compaction.inputs.fixtures import load_tasks
from washexp.compaction.scoring.grading import grade

TASKS = ("backup", "payment")


def _sweep(url: str, store, form: str, *extra: str, methods: str = "full,H"):
    return scripted_sweep(url, store, TASKS, f"method={methods}", "topn=1", f"model.structured_output={form}", *extra)


@pytest.fixture(scope="module")
def sent(tmp_path_factory):
    """One sweep per form; the requests each sent, and the first store's record."""
    root = tmp_path_factory.mktemp("reader-format")
    out = {}
    for form in ("json_schema", "json_object", "off"):
        script = Script()
        script.reader["payment"] = "malformed"  # prose around the JSON: out of shape
        (root / form).mkdir()
        with serve(script) as url:
            # H brings S, H and Jev requests: once is enough to see they go without a format
            _sweep(url, root / form, form, methods="full,H" if form == "json_schema" else "full")
        out[form] = script.requests
    export(root / "json_schema", root / "results")
    (record,) = (root / "results").glob("compaction-scripted-test-server-*.json")
    return root, out, json.loads(record.read_text()), record.with_suffix(".md").read_text()


def _tasks():
    from tests.conftest import ROOT

    return {t.id: t for t in load_tasks(ROOT / "fixtures" / "compaction") if t.id in TASKS}


def test_the_reader_and_the_ranker_alone_ask_and_each_form_is_the_servers_own(sent):
    _root, requests, *_ = sent
    tasks = _tasks()
    others = [r for r in requests["json_schema"] if r["kind"] in ("S", "H")]
    assert {r["kind"] for r in others} == {"S", "H"}
    assert all("response_format" not in r["body"] for r in others)  # free text for the summarisers
    ranks = [r for r in requests["json_schema"] if r["kind"] == "Jev"]
    assert ranks
    for r in ranks:  # the ranker's own shape: exactly one score per unit of its task
        units = len(tasks[r["task"]].units)
        assert r["body"]["response_format"] == ranking_format("json_schema", units)
        assert r["body"]["response_format"]["json_schema"]["schema"] == scores_schema(units)
    for form, kinds in (("json_schema", "json_schema"), ("json_object", "json_object")):
        reads = [r for r in requests[form] if r["kind"] == "read"]
        assert reads
        for r in reads:
            fmt = r["body"]["response_format"]
            assert fmt["type"] == kinds
            schema = fmt["json_schema"]["schema"] if form == "json_schema" else fmt["schema"]
            assert schema == facts_schema(tasks[r["task"]].fields)
    assert all("response_format" not in r["body"] for r in requests["off"])


def test_the_schema_names_the_fields_and_no_expected_value():
    for task in _tasks().values():
        schema = facts_schema(task.fields)
        facts = schema["properties"]["facts"]
        assert facts["required"] == list(task.fields) and facts["additionalProperties"] is False
        assert all(v == ANY_VALUE for v in facts["properties"].values())
        text = json.dumps(schema)
        for value in task.expected.values():
            assert json.dumps(value) not in text.replace(json.dumps(list(task.fields)), "")


def test_an_unknown_form_is_refused_in_one_line_before_any_run(tmp_path):
    proc = run_cli(
        ["method=full", "task=backup", "model=openai", "model.name=q", "endpoint.base_url=http://127.0.0.1:9/v1"]
        + ["model.structured_output=yaml"],
        tmp_path,
        env=SCRIPTED_ENV,
        check=False,
    )
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "model.structured_output='yaml': expected one of json_schema, json_object, off" in lines[0]
    with pytest.raises(ValueError, match="yaml"):
        response_format("yaml", ["a"])
    with pytest.raises(ValueError, match="yaml"):
        ranking_format("yaml", 3)


def test_the_ranking_schema_holds_exactly_its_count_of_scores_in_range():
    assert ranking_format("off", 3) is None
    schema = ranking_format("json_object", 3)["schema"]
    scores = schema["properties"]["scores"]
    assert (scores["minItems"], scores["maxItems"]) == (3, 3)
    assert (scores["items"]["minimum"], scores["items"]["maximum"]) == (0, 100)
    assert schema["required"] == ["scores"] and schema["additionalProperties"] is False


def test_format_failures_are_counted_apart_per_condition_arm_and_record(sent):
    root, _requests, record, markdown = sent
    client = MlflowClient(f"sqlite:///{root / 'json_schema' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("compaction")
    conds = client.search_runs([exp.experiment_id], "tags.`washexp.kind` = 'condition' and tags.method = 'full'")
    by_task = {c.data.tags["task"]: c.data.metrics for c in conds}
    assert by_task["payment"]["format_failures"] == 1.0 and by_task["payment"]["fact_accuracy"] == 0.0
    assert by_task["backup"]["format_failures"] == 0.0 and by_task["backup"]["fact_accuracy"] == 1.0
    assert by_task["backup"]["answers_graded"] == by_task["payment"]["answers_graded"] == 1.0
    arms = client.search_runs([exp.experiment_id], "tags.`washexp.kind` = 'arm' and tags.method = 'full'")
    assert arms[0].data.metrics["primary/format_failures"] == 1.0  # payment is primary
    assert arms[0].data.metrics["control/format_failures"] == 0.0
    for cohort, failures in (("primary", 1.0), ("control", 0.0)):
        full = next(r for r in record["tables"][f"arms_{cohort}"]["rows"] if r["arm"] == "Full")
        assert (full["format_failures"], full["answers_graded"]) == (failures, 1.0)
    headers = [ln for ln in markdown.splitlines() if ln.startswith("| arm | tasks |")]
    assert len(headers) == 2 and all("| format failures |" in h for h in headers)
    full_rows = [ln.split(" | ") for ln in markdown.splitlines() if ln.startswith("| Full |")][:2]
    column = headers[0].split(" | ").index("format failures")
    assert [row[column] for row in full_rows] == ["1/1", "0/1"]


def test_a_reply_with_a_missing_or_extra_field_is_out_of_shape_but_graded_as_it_is():
    task = _tasks()["backup"]
    expected = dict(task.expected)
    first = next(iter(expected))
    exact = grade(task, json.dumps({"facts": expected}))
    missing = grade(task, json.dumps({"facts": {k: v for k, v in expected.items() if k != first}}))
    extra = grade(task, json.dumps({"facts": {**expected, "note": "x"}}))
    fenced = grade(task, "```json\n" + json.dumps({"facts": expected}) + "\n```")
    assert not exact.format_failure and exact.score == 1.0
    assert missing.format_failure and missing.score == pytest.approx(1 - 1 / len(expected))
    assert extra.format_failure and extra.score == 1.0  # counted apart, never re-scored
    assert fenced.format_failure and fenced.malformed and fenced.score == 0.0


def test_the_record_says_what_each_role_spent(sent):
    """Issue 49: a record's calls per role, with the tokens the endpoint reported, summed over its arms."""
    _root, requests, record, md = sent
    rows = {r["role"]: r for r in record["tables"]["spend"]["rows"]}
    asked = [r for r in requests["json_schema"] if r["kind"] in ("S", "H", "Jev", "read")]
    assert set(rows) == {"S", "H", "Jev", "read", "all"}
    assert rows["all"]["calls"] == len(asked) == sum(rows[k]["calls"] for k in ("S", "H", "Jev", "read"))
    assert all(rows[k]["prompt_tokens"] > 0 and rows[k]["completion_tokens"] > 0 for k in rows)
    assert rows["all"]["elapsed_s"] is not None and "What the model calls spent, per role" in md
