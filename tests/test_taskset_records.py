"""A sweep on a generated set: the record names the set's manifest, cuts retention by planted
fact type and by depth, and verifies from its bundle; a set whose task differs from its manifest
is refused before any work."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import run_cli, washexp_cli
from washexp.tasks import manifest
from washexp.tasks.generate import Params, generate

pytestmark = pytest.mark.slow  # a real sweep and an export: two minutes on two busy cores


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    root = tmp_path_factory.mktemp("taskset")
    generate(Params(n=3, min_tokens=1000, max_tokens=1000, units=11, facts=9), 5, root / "set")
    run_cli(["-m", "method=full,S", "topn=0", f"benchmark.fixtures={root / 'set'}"], root / "store", premade=True)
    out = root / "out"
    uri = f"sqlite:///{root / 'store' / 'mlflow.db'}"
    exported = washexp_cli("export", "--bundle", "--out", str(out), "--tracking-uri", uri)
    assert exported.returncode == 0, exported.stderr
    (record,) = out.glob("compaction-*.json")
    return root, record, json.loads(record.read_text())


def test_the_record_names_the_manifest_and_cuts_by_type_and_depth(recorded):
    root, _, record = recorded
    assert record["provenance"]["task set manifest sha256"] == [manifest.digest(root / "set" / "manifest.json")]
    by_type, by_depth = record["tables"]["by_fact_type"]["rows"], record["tables"]["by_depth"]["rows"]
    full = [r for r in by_type if r["arm"] == "Full"]
    assert sum(r["facts"] for r in full) == 27 and all(r["retention"] == 1.0 for r in full)
    assert {r["kind"] for r in full} == {"identifier", "integer", "decimal", "boolean", "datetime", "path", "line",
                                         "list", "mapping"}  # fmt: skip
    s = [r for r in by_depth if r["arm"] == "S top0"]
    assert sum(r["facts"] for r in s) == 27 and {r["third"] for r in s} <= {"first", "middle", "last"}
    assert min(r["retention"] for r in by_type if r["arm"] == "S top0") < 1.0


def test_the_record_verifies_from_its_bundle(recorded):
    _, path, _ = recorded
    proc = washexp_cli("verify", str(path))
    assert proc.returncode == 0, proc.stderr


def test_a_task_that_is_not_its_manifests_is_refused(recorded, tmp_path):
    root, _, _ = recorded
    shutil.copytree(root / "set", tmp_path / "set")
    victim = tmp_path / "set" / "gen00001" / "collection.yaml"
    victim.write_text(victim.read_text() + "\n")
    (tmp_path / "store").mkdir()
    proc = run_cli(["method=full", f"benchmark.fixtures={tmp_path / 'set'}"], tmp_path / "store", check=False)
    assert proc.returncode == 2 and "gen00001" in proc.stderr and "manifest.json" in proc.stderr
