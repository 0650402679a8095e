"""Generated task sets (washexp tasks): determinism, the planted facts' guarantees, hidden sets'
manifests and bad input (one line, exit 2, nothing written)."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from washexp.cli import main
from washexp.compaction.inputs.context import full_context
from washexp.compaction.inputs.fixtures import load_tasks
from washexp.compaction.scoring.retention import retained_fields
from washexp.needles import norm
from washexp.tasks import manifest
from washexp.tasks.facts import KINDS, Fact, plan
from washexp.tasks.generate import Params, generate

SMALL = Params(n=4, min_tokens=1000, max_tokens=1500, units=11, facts=9, superseded=0.6, near=0.6)


@pytest.fixture(scope="module")
def small_set(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sets") / "a"
    generate(SMALL, 7, out)
    return out


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_same_seed_same_bytes_another_seed_another_set(small_set, tmp_path):
    again, other = tmp_path / "b", tmp_path / "c"
    generate(SMALL, 7, again)
    generate(SMALL, 8, other)
    assert _files(again) == _files(small_set)
    first, second = (
        json.loads((small_set / "manifest.json").read_text()),
        json.loads((other / "manifest.json").read_text()),
    )
    assert first["set"] != second["set"]
    assert first["parameters"] == second["parameters"]  # the seed is in neither
    assert "seed" not in json.dumps(first) and "seed" not in (small_set / "gen00000" / "generated.json").read_text()


def test_every_needle_is_in_a_tool_result_and_full_keeps_it(small_set):
    tasks = load_tasks(small_set)
    assert {f["kind"] for t in tasks for f in json.loads((t.path / "generated.json").read_text())["facts"]} == set(
        KINDS
    )
    for task in tasks:
        assert len(task.units) > 10 and task.cohort == "primary"
        for field, needles in task.needles.items():
            assert needles, field
            for needle in needles:
                assert any(norm(needle) in norm(u.content) for u in task.units), (task.id, needle)
        assert not any(retained_fields(task, full_context(task).evidence_text).values()), task.id


def test_a_superseded_value_comes_before_its_answer(small_set):
    seen = 0
    for task in load_tasks(small_set):
        facts = json.loads((task.path / "generated.json").read_text())["facts"]
        for place in (p for p in facts if p["superseded"]):
            seen += 1
            field, own = place["field"], set(task.needles[place["field"]])
            key = field if place["kind"] != "line" else task.needles[field][0].split(" ")[0]
            where = [
                (u.index, n, line.split("|", 1)[1])
                for u in task.units
                if not u.arguments["path"].endswith(".bak")  # a backup copy's near miss may come anywhere
                for n, line in enumerate(u.content.split("\n"))
                if line.split("|", 1)[1].startswith((f"{key} = ", f"{key}[", f"{key} "))
            ]
            answer = min(w[:2] for w in where if w[2] in own)
            old = [w[:2] for w in where if w[2] not in own]
            assert old and max(old) < answer, (task.id, field)
    assert seen >= 5


def test_near_miss_and_old_values_never_hold_the_answer():
    rng = random.Random(3)
    for kind in KINDS * 20:
        fact = plan(rng, "f", kind, set(), superseded=True, near=True)
        assert isinstance(fact, Fact)
        for other in (fact.old, fact.near):
            text = "\n".join(fact.lines_of(other))
            assert not all(n in text for n in fact.needles), (kind, other)


def test_verify_a_folder_against_its_manifest(small_set, tmp_path, capsys):
    copy = tmp_path / "copy"
    shutil.copytree(small_set, copy)
    assert main(["tasks", "verify", str(small_set / "manifest.json"), str(copy)]) == 0
    target = copy / "gen00002" / "source"
    victim = next(p for p in sorted(target.rglob("*")) if p.is_file())
    victim.write_text(victim.read_text() + "x\n")
    capsys.readouterr()
    assert main(["tasks", "verify", str(small_set / "manifest.json"), str(copy)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "gen00002" in err and "differs" in err


def test_verify_names_a_task_that_does_not_parse(small_set, tmp_path, capsys):
    copy = tmp_path / "copy"
    shutil.copytree(small_set, copy)
    (copy / "gen00001" / "task.yaml").write_text("id: [\n")
    assert main(["tasks", "verify", str(small_set / "manifest.json"), str(copy)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "gen00001" in err and "task.yaml" in err


def test_a_manifest_whose_set_digest_lies_is_refused(small_set, tmp_path, capsys):
    forged = json.loads((small_set / "manifest.json").read_text())
    forged["tasks"]["gen00000"] = "0" * 64
    (tmp_path / "m.json").write_text(json.dumps(forged))
    assert main(["tasks", "verify", str(tmp_path / "m.json"), str(small_set)]) == 2
    assert "set" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, named",
    [
        (["--n", "0"], "--n 0"),
        (["--min-tokens", "500"], "--min-tokens 500"),
        (["--max-tokens", "70000"], "--max-tokens 70000"),
        (["--units", "1"], "--units 1"),
        (["--facts", "10"], "--facts 10"),
        (["--superseded", "1.5"], "--superseded 1.5"),
        (["--min-tokens", "3000", "--max-tokens", "2000"], "--min-tokens 3000"),
    ],
)
def test_a_parameter_out_of_range_writes_nothing(tmp_path, capsys, args, named):
    assert main(["tasks", "generate", "--seed", "1", "--out", str(tmp_path / "set"), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and named in err
    assert list(tmp_path.iterdir()) == []


def test_an_existing_folder_or_fixtures_is_refused(tmp_path, capsys, monkeypatch):
    (tmp_path / "taken").mkdir()
    assert main(["tasks", "generate", "--n", "1", "--seed", "1", "--out", str(tmp_path / "taken")]) == 2
    assert list((tmp_path / "taken").iterdir()) == []
    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(root)
    out = root / "fixtures" / "compaction" / "h52-should-not-exist"
    assert main(["tasks", "generate", "--n", "1", "--seed", "1", "--out", str(out)]) == 2
    assert "fixtures/" in capsys.readouterr().err and not out.exists()


def test_manifest_digest_is_of_its_bytes(small_set):
    path = small_set / "manifest.json"
    listed = manifest.read(path)
    manifest.check(listed, path, small_set)
    assert len(manifest.digest(path)) == 64 and listed["tasks"].keys() == {f"gen{i:05d}" for i in range(SMALL.n)}
