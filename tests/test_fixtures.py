"""Every compaction fixture loads, matches the study's table verbatim, and obeys the rules."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from washexp.compaction.inputs import collect
from washexp.compaction.inputs.fixtures import load_task, load_tasks, structural_cohort
from washexp.errors import FixtureError
from washexp.needles import contains

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "compaction"
SPEC = json.loads((Path(__file__).parent / "compaction-tasks.json").read_text(encoding="utf-8"))
SPEC_TASKS = {t["id"]: t for t in SPEC["tasks"]}


def _typed(value):
    # Type-exact canonical form: json.dumps alone would equate True with true only, 1 with 1.0 never.
    return json.dumps(value, sort_keys=True)


def test_all_fourteen_tasks_load():
    tasks = load_tasks(FIXTURES)
    assert sorted(t.id for t in tasks) == sorted(SPEC_TASKS)


@pytest.mark.parametrize("task_id", sorted(SPEC_TASKS))
def test_task_matches_the_study_verbatim(task_id):
    task = load_task(FIXTURES / task_id)
    spec = SPEC_TASKS[task_id]
    assert task.query == spec["query"]
    assert _typed(task.expected) == _typed(spec["expected"])
    assert list(task.expected) == list(spec["expected"])
    assert list(task.unordered_fields) == spec["unordered_fields"]
    assert task.declared_cohort == spec["declared_cohort"]
    # Full context carries every needle: the fixture is answerable before any compaction.
    evidence = "\n".join(u.content for u in task.units)
    assert all(contains(evidence, n) for ns in task.needles.values() for n in ns)


def test_cohort_rule_selects_exactly_the_four_primaries():
    tasks = load_tasks(FIXTURES)
    primary = sorted(t.id for t in tasks if structural_cohort(t.units, t.needles) == "primary")
    assert primary == ["build_token", "checkout_504", "payment", "server_error"]


@pytest.mark.parametrize("task_id", ["payment", "checkout_504", "server_error"])
def test_investigations_need_more_than_one_unit(task_id):
    # Trap: if one unit carried every needle, Top 1 would be a perfect context.
    task = load_task(FIXTURES / task_id)
    assert len(task.units) >= 6
    needles = [n for ns in task.needles.values() for n in ns]
    assert not any(all(contains(u.content, n) for n in needles) for u in task.units)


def _broken_copy(tmp_path: Path, task_id: str, edit) -> Path:
    folder = tmp_path / task_id
    shutil.copytree(FIXTURES / task_id, folder)
    data = yaml.safe_load((folder / "task.yaml").read_text(encoding="utf-8"))
    edit(data, folder)
    (folder / "task.yaml").write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return folder


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda d, f: d["needles"]["request_id"].append("req-0000"),
            "needles.request_id: 'req-0000' is in no tool result",
        ),
        (lambda d, f: d["needles"]["upstream"].append("ERROR"), "needles.upstream: 'ERROR' is in the query"),
        (lambda d, f: d["fields"].update(status="HTTP status, e.g. 502"), "leaks through a field description"),
        (lambda d, f: d["expected"].pop("status"), "expected: must name exactly the fields (status differ)"),
        (lambda d, f: d.update(declared_cohort="control:short_fixture"), "declared_cohort"),
        (lambda d, f: d.update(id="other"), "id: 'other' differs from the folder"),
        (
            lambda d, f: d["expected"].update(timestamp=__import__("datetime").date(2026, 8, 8)),
            "expected.timestamp: date is not a JSON type",
        ),
        (lambda d, f: d.update(unordered_fields=["status"]), "unordered_fields.status: only a list can ignore order"),
    ],
)
def test_bad_fixture_names_file_and_field(tmp_path, edit, message):
    folder = _broken_copy(tmp_path, "server_error", edit)
    with pytest.raises(FixtureError) as err:
        load_task(folder)
    assert str(err.value).startswith(str(folder / "task.yaml"))
    assert message in str(err.value)


def test_trajectory_must_open_with_the_query(tmp_path):
    folder = tmp_path / "backup"
    shutil.copytree(FIXTURES / "backup", folder)
    traj = json.loads((folder / "trajectory.json").read_text(encoding="utf-8"))
    traj["messages"][0]["content"] += " (edited)"
    (folder / "trajectory.json").write_text(json.dumps(traj), encoding="utf-8")
    with pytest.raises(FixtureError, match=r"trajectory.json: messages\[0\]: must be the user's query"):
        load_task(folder)


def test_final_report_is_not_a_unit():
    task = load_task(FIXTURES / "payment")
    assert all(not m.get("final") for m in task.history)
    assert task.history[-1]["role"] == "tool"


def test_digest_changes_with_any_file(tmp_path):
    folder = tmp_path / "backup"
    shutil.copytree(FIXTURES / "backup", folder)
    before = load_task(folder).digest
    (folder / "source" / "extra.txt").write_text("x", encoding="utf-8")
    assert load_task(folder).digest != before


def test_digest_changes_with_a_files_content_alone(tmp_path):
    """The trap: a digest over file names only would reuse old runs after a fixture was edited."""
    folder = tmp_path / "backup"
    shutil.copytree(FIXTURES / "backup", folder)
    before = load_task(folder).digest
    target = folder / "source" / "sessions" / "index.md"
    text = target.read_text(encoding="utf-8")
    target.write_text(text[:-1] + ("x" if text[-1] != "x" else "y"), encoding="utf-8")  # same name, same size
    assert load_task(folder).digest != before


@pytest.mark.parametrize("generator", sorted(FIXTURES.glob("*/gen_*.py")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_generated_sources_reproduce_byte_for_byte(tmp_path, generator):
    folder = tmp_path / generator.parent.name
    shutil.copytree(generator.parent, folder)

    def files():
        return {
            p.relative_to(folder): p.read_bytes()
            for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
        }

    before = files()
    subprocess.run([sys.executable, str(folder / generator.name)], cwd=folder, check=True, capture_output=True)
    assert files() == before


@pytest.mark.parametrize("task_id", sorted(SPEC_TASKS))
def test_trajectory_is_built_from_collection_yaml(task_id):
    folder = FIXTURES / task_id
    assert (folder / "trajectory.json").read_bytes() == collect.dumps(collect.build(folder)).encode("utf-8")


def test_check_names_a_stale_trajectory(tmp_path, capsys):
    folder = tmp_path / "meeting_notes"
    shutil.copytree(FIXTURES / "meeting_notes", folder)
    assert collect.main(["--check", str(folder)]) == 0
    spec = folder / "collection.yaml"
    text = spec.read_text(encoding="utf-8")
    spec.write_text(text.replace("Reading the meeting notes.", "Reading."), encoding="utf-8")
    assert collect.main(["--check", str(folder)]) == 1
    assert str(folder / "trajectory.json") in capsys.readouterr().err
    assert collect.main([str(folder)]) == 0
    assert collect.main(["--check", str(folder)]) == 0


def test_collect_bad_usage_or_folder_is_one_line_exit_2_and_nothing_written(tmp_path, capsys):
    """argparse's usage block and a traceback were what a mistyped flag or a wrong folder gave."""
    folder = tmp_path / "meeting_notes"
    shutil.copytree(FIXTURES / "meeting_notes", folder)
    stale = folder / "trajectory.json"
    stale.write_bytes(b"{}\n")
    for argv, says in (
        (["--chek", str(folder)], "unrecognized arguments: --chek"),
        ([], "the following arguments are required: folders"),
        # the stale good folder is not written either: every folder is built before one is written
        ([str(folder), str(tmp_path / "nope")], "FileNotFoundError: [Errno 2] No such file or directory"),
    ):
        assert collect.main(argv) == 2, argv
        out, err = capsys.readouterr()
        assert not out and err.count("\n") == 1, err
        assert err.startswith(f"{collect.PROG}: ") and says in err, err
    assert stale.read_bytes() == b"{}\n"


def _numbered_file(tmp_path: Path, n: int) -> Path:
    lines = [f"line {i}" + (" MATCH" if i in (10, 30) else "") for i in range(1, n + 1)]
    (tmp_path / "f.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp_path


def test_read_file_pages_with_offset_and_limit(tmp_path):
    src = _numbered_file(tmp_path, 12)
    assert collect.read_file(src, "f.log", offset=11, limit=5) == "    11|line 11\n    12|line 12"
    assert collect.read_file(src, "f.log", offset=2, limit=2) == "     2|line 2\n     3|line 3"
    assert collect.read_file(src, "f.log").splitlines()[-1] == "    12|line 12"
    with pytest.raises(TypeError):
        collect.read_file(src, "f.log", pattern="MATCH")


def test_view_keeps_line_numbers_and_marks_omissions(tmp_path):
    src = _numbered_file(tmp_path, 40)
    args = {"view": "head+match+tail", "head": 2, "pattern": "MATCH", "context": 1, "tail": 3}
    assert collect.read_file(src, "f.log", **args).splitlines() == [
        "     1|line 1",
        "     2|line 2",
        "... [lines 3-8 omitted] ...",
        "     9|line 9",
        "    10|line 10 MATCH",
        "    11|line 11",
        "... [lines 12-28 omitted] ...",
        "    29|line 29",
        "    30|line 30 MATCH",
        "    31|line 31",
        "... [lines 32-37 omitted] ...",
        "    38|line 38",
        "    39|line 39",
        "    40|line 40",
    ]
    assert collect.read_file(src, "f.log", view="head+match", head=1, pattern="NOPE").splitlines() == [
        "     1|line 1",
        "... [lines 2-40 omitted; no line matches 'NOPE'; 40 lines total] ...",
    ]
    assert collect.read_file(src, "f.log", view="head+match", pattern="MATCH", context=0).splitlines() == [
        "... [lines 1-9 omitted] ...",
        "    10|line 10 MATCH",
        "... [lines 11-29 omitted] ...",
        "    30|line 30 MATCH",
        "... [lines 31-40 omitted; 40 lines total] ...",
    ]
    with pytest.raises(ValueError, match="tail needs the view 'head\\+match\\+tail'"):
        collect.read_file(src, "f.log", view="head+match", pattern="MATCH", tail=2)
