"""``measurement=cycles``: repeated compaction. k = 1 is the single compaction (the very code path,
run side by side); Full keeps every seen fact; what S and H can and cannot guarantee; a fact not
yet seen is not counted; the runs, their step metrics, the record and its verification, from a
real sweep into a real store."""

from __future__ import annotations

import json
import re
import shutil

import mlflow
import pytest

from tests.conftest import ROOT, run_cli
from washexp.cli import main as washexp
from washexp.compaction.backends.roles import roles_for
from washexp.compaction.condition import Arm, run_condition
from washexp.compaction.cycles import SPLITS, TABLE, _by_tokens, run_cycles, segments
from washexp.compaction.frozen import FrozenCache
from washexp.compaction.inputs.fixtures import load_tasks
from washexp.compaction.methods.baselines import baseline, turns
from washexp.compaction.methods.method import builtin
from washexp.config import ModelConfig
from washexp.errors import ConfigError
from washexp.needles import norm
from washexp.verify import main as verify

TASKS = {t.id: t for t in load_tasks(ROOT / "fixtures" / "compaction")}


@pytest.fixture(scope="module")
def cache() -> FrozenCache:
    return FrozenCache(roles_for(ModelConfig(name="reference")))


def _methods():
    return {
        "full": builtin("full"),
        "S": builtin("S"),
        "H": builtin("H"),
        **{k: baseline(k, {}) for k in ("mask", "recency", "hybrid")},
    }


@pytest.mark.parametrize("topn", [0, 2])
def test_one_cycle_is_the_single_compaction(cache, topn):
    """k = 1 against the single compaction's own code path (run_condition), field by field."""
    for name, method in _methods().items():
        arm = Arm(method.name, None if method.whole else topn)
        for task in (TASKS["payment"], TASKS["backup"], TASKS["server_error"]):
            single = run_condition(task, arm, cache, 1, 0, method=method).tables["retention.json"]
            cycled = run_cycles(task, 1, arm, cache, method)
            assert {r["field"]: r["retained"] for r in single} == {f.field: f.kept for f in cycled.facts}, name
            assert all(f.seen for f in cycled.facts)  # one cycle has seen the whole trajectory


def test_segments_are_whole_contiguous_turns_as_equal_as_they_go():
    task = TASKS["payment"]
    for k in range(1, len(turns(task)) + 1):
        parts = segments(task, k)
        assert [m for p in parts for m in p] == list(task.history)
        sizes = [sum(m["role"] == "assistant" for m in p) for p in parts]
        assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)
    for split in SPLITS:
        with pytest.raises(ConfigError, match="fewer than k segments"):
            segments(task, len(turns(task)) + 1, split)


def test_the_tokens_split_has_the_smallest_largest_segment_of_any_split():
    """Against every split into k contiguous whole-turn segments (all of them, by brute force)."""
    from itertools import combinations

    from washexp.tokens import count_chat

    differs = 0
    for task in TASKS.values():
        every = turns(task)
        weights, n = [count_chat(t) for t in every], len(every)
        for k in range(1, min(n, 5) + 1):
            parts = segments(task, k, "tokens")
            assert [m for p in parts for m in p] == list(task.history) and all(parts)
            sums, at = [], 0
            for part in parts:  # each segment's turns, consumed in order
                first, size = at, 0
                while size < len(part):
                    size, at = size + len(every[at]), at + 1
                sums.append(sum(weights[first:at]))
            best = min(
                max(sum(weights[a:b]) for a, b in zip((0, *cuts), (*cuts, n), strict=True))
                for cuts in combinations(range(1, n), k - 1)
            )
            assert max(sums) == best, (task.id, k)
            differs += parts != segments(task, k, "turns")
    assert differs  # on these fixtures the two rules do differ
    # a tie goes the way the turns rule goes: the earlier segments take the extra
    assert _by_tokens([1] * 5, 2) == [3, 2] and _by_tokens([1] * 5, 3) == [2, 2, 1]


def _runs(cache, names, kmax=5, split="turns"):
    methods = _methods()
    for name in names:
        method = methods[name]
        arm = Arm(method.name, None if method.whole else 0)
        for task in TASKS.values():
            for k in range(2, min(kmax, len(turns(task))) + 1):
                yield task, k, run_cycles(task, k, arm, cache, method, split=split)


@pytest.mark.parametrize("split", SPLITS)
def test_full_keeps_every_seen_fact_at_every_cycle(cache, split):
    for task, k, run in _runs(cache, ["full"], split=split):
        assert all(f.kept for f in run.facts if f.seen)
        assert all(s in (None, 1.0) for s in run.survival())
        assert len(run.facts) == k * len(task.needles)  # every fact after every cycle


def test_a_fact_not_yet_seen_is_not_counted(cache):
    """A fact enters the count once every needle of it has been appended, not before."""
    counted = 0
    for task, k, run in _runs(cache, ["S"]):
        appended = ""
        for c, segment in enumerate(segments(task, k), 1):
            appended += "\n".join(m.get("content") or "" for m in segment if m["role"] == "tool")
            for f in (f for f in run.facts if f.cycle == c):
                assert f.seen == all(norm(n) in norm(appended) for n in task.needles[f.field]), (task.id, k, c)
                counted += not f.seen
        survival = run.survival()
        for c, s in enumerate(survival, 1):
            seen = [f for f in run.facts if f.cycle == c and f.seen]
            assert s == (sum(f.kept for f in seen) / len(seen) if seen else None)
    assert counted  # the fixtures do hold facts whose evidence comes late


def test_what_s_and_h_guarantee_on_the_extractive_reference(cache):
    """S and H give no monotone curve: a later cycle may keep more. What the extractive reference
    does guarantee: a needle a cycle dropped comes back only when the next segment holds it (it
    copies lines, it never writes a needle it was not given). A chat model could guess one: no
    such test is made for a model."""
    rises = 0
    for task, k, run in _runs(cache, ["S", "H"]):
        parts = segments(task, k)
        for f in run.facts:
            if f.cycle == 1:
                continue
            before = next(g for g in run.facts if g.cycle == f.cycle - 1 and g.field == f.field)
            back = set(before.missing) - set(f.missing)  # needles this cycle has and the last had not
            rises += f.kept and not before.kept
            new = norm("\n".join(m.get("content") or "" for m in parts[f.cycle - 1]))
            assert all(norm(n) in new for n in back), (task.id, k, f.cycle, f.field, back)
    assert rises  # curves do rise: monotonicity would be a false claim


# --- the real command: runs, step metrics, record, verify ------------------------------------


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    store = tmp_path_factory.mktemp("cycles")
    args = ["-m", "measurement=cycles", "method=S,full", "task=[payment,backup]", "cycles.k=[1,3]"]
    done = run_cli(args, store, env={"CI": "1"}, premade=True)
    assert "  records:  " in done.stdout and "  compare:  " in done.stdout, done.stdout
    uri = f"sqlite:///{store / 'mlflow.db'}"
    out = store / "results"
    assert washexp(["export", "--bundle", "--tracking-uri", uri, "--out", str(out)]) == 0
    (record,) = out.glob("*.json")
    return store, uri, record


def test_each_condition_logs_survival_with_step_cycle(swept):
    _store, uri, _record = swept
    client = mlflow.MlflowClient(uri)
    exp = client.get_experiment_by_name("compaction")
    runs = client.search_runs([exp.experiment_id], "tags.`washexp.kind` = 'cycles-condition'")
    assert sorted((r.data.tags["method"], r.data.tags["task"], r.data.tags["k"]) for r in runs) == sorted(
        (m, t, k) for m in ("S", "full") for t in ("payment", "backup") for k in ("1", "3")
    )
    for r in runs:
        k = int(r.data.tags["k"])
        assert r.data.params["k"] == str(k) and r.data.params["split"] == "turns"  # identity, shown
        history = client.get_metric_history(r.info.run_id, "survival")
        assert sorted(m.step for m in history) == list(range(1, k + 1))
        table = json.loads((_artifact(client, r, TABLE)).read_text())
        rows = [dict(zip(table["columns"], row, strict=True)) for row in table["data"]]
        assert {row["cycle"] for row in rows} == set(range(1, k + 1))
        last = [row for row in rows if row["cycle"] == k and row["seen"]]
        assert r.data.metrics["survival_last"] == pytest.approx(sum(row["kept"] for row in last) / len(last))


def _artifact(client, run, name):
    return __import__("pathlib").Path(client.download_artifacts(run.info.run_id, name))


def test_the_record_table_matches_the_runs(swept):
    _store, uri, record = swept
    assert record.name.startswith("compaction-reference-cycles-")
    assert (record.parent / (record.stem + "-survival.png")).is_file()
    (plot,) = json.loads(record.with_suffix(".json").read_text())["plots"]
    assert "bands: each cycle's 95% sign-flip interval over the line's tasks" in plot["caption"]
    client = mlflow.MlflowClient(uri)
    exp = client.get_experiment_by_name("compaction")
    runs = client.search_runs([exp.experiment_id], "tags.`washexp.kind` = 'cycles-condition'")
    doc = json.loads(record.read_text())
    checked = 0
    for key, label, method in (("survival_s_top0", "S top0", "S"), ("survival_full", "Full", "full")):
        for row in doc["tables"][key]["rows"]:
            mine = [
                r
                for r in runs
                if r.data.tags["method"] == method
                and r.data.tags["k"] == str(row["k"])
                and r.data.tags["cohort"] == row["cohort"]
            ]
            for c in range(1, row["k"] + 1):
                steps = [
                    next(m.value for m in client.get_metric_history(r.info.run_id, "survival") if m.step == c)
                    for r in mine
                ]
                steps = [s for s in steps if s == s]  # NaN: no fact seen yet
                want = sum(steps) / len(steps) if steps else None
                assert row[f"cycle{c}"] == pytest.approx(want), (label, row)
                checked += 1
    assert checked >= 8


def test_verify_passes_and_names_a_changed_cell(swept, tmp_path, capsys):
    _store, _uri, record = swept
    assert verify([str(record)]) == 0
    for path in record.parent.glob(record.stem + "*"):
        (shutil.copytree if path.is_dir() else shutil.copy)(path, tmp_path / path.name)
    copy = tmp_path / record.name
    doc = json.loads(copy.read_text())
    row = doc["tables"]["survival_s_top0"]["rows"][0]
    was = row["cycle1"]
    row["cycle1"] = round(was + 0.25, 3)
    copy.write_text(json.dumps(doc, indent=1))
    assert verify([str(copy)]) == 1
    out = capsys.readouterr().out
    assert f"tables survival_s_top0 {row['cohort']!r} cycle1: record {row['cycle1']}, recomputed {was}" in out, out
    copy.write_text(record.read_text())
    table = sorted(copy.with_suffix(".bundle").glob(f"runs/*/{TABLE}"))[0]
    table.write_bytes(table.read_bytes().replace(b"true", b"fals", 1))
    assert verify([str(copy)]) == 1
    assert re.search(
        rf"{table.parent.name}/{TABLE}: sha256 [0-9a-f]{{64}} is not the manifest's", capsys.readouterr().err
    )


def test_a_wash_measurement_on_compaction_is_a_usage_error(tmp_path):
    proc = run_cli(["measurement=ceiling", "task=payment"], tmp_path, check=False, env={"CI": "1"})
    assert proc.returncode == 2, proc.stderr
    assert "measurement=ceiling is the wash benchmark's" in proc.stderr
    assert not (tmp_path / "mlflow.db").exists()  # nothing half-written


def _plan(ks: str, split: str = "turns"):
    from tests.test_identity_leaves import _compose
    from washexp.app import JobInfo
    from washexp.compaction.cycles_job import plan_cycles
    from washexp.engine.sweep import Sweep

    overrides = ["measurement=cycles", "method=S", "compaction.task=[payment]", f"compaction.measurement.k={ks}"]
    cfg = _compose([*overrides, f"compaction.measurement.split={split}"])
    return plan_cycles(cfg, JobInfo("", "s", ROOT), Sweep(ROOT))


def test_k_and_the_split_rule_are_each_conditions_identity():
    """Each (task, k) its own identity, with k and the split rule in it; one (task, k) is the same
    condition whatever other k the sweep names (so it is reused), while the arm's run names them all."""
    three, two = _plan("[1,2,3]"), _plan("[1,3]")
    hashes = {(w.key.task, w.key.k): w.hash for w in three.children}  # each child's key: its typed cell
    assert len(set(hashes.values())) == 3
    assert all(w.identity["k"] == w.key.k and w.identity["measurement"]["split"] == "turns" for w in three.children)
    assert {(w.key.task, w.key.k): w.hash for w in two.children} == {
        key: hashes[key] for key in (("payment", 1), ("payment", 3))
    }
    assert three.parent.hash != two.parent.hash
    by_tokens = _plan("[1,2,3]", "tokens")
    assert all(w.identity["measurement"]["split"] == "tokens" for w in by_tokens.children)
    assert not {w.hash for w in by_tokens.children} & set(hashes.values())


def test_a_table_that_disagrees_with_its_run_is_an_error_not_a_record():
    import pandas as pd

    from washexp.compaction.records.cycles import _condition
    from washexp.errors import WashexpError

    rows = pd.DataFrame({"cycle": [1, 1, 2, 2], "seen": [True, True, True, True], "kept": [True, False, True, True]})
    run = pd.Series({"run_id": "r1", "task": "payment", "k": 2, "metrics.survival_last": 1.0})
    assert _condition(run, rows) == [0.5, 1.0]
    with pytest.raises(WashexpError, match=r"run r1 \(payment, k=2\): its cycles.json gives survival 1.000000"):
        _condition(run.copy().replace({1.0: 0.5}), rows)


def test_a_cycles_sweep_is_listed_exported_by_id_and_compared(swept, tmp_path, capsys):
    _store, uri, record = swept
    assert washexp(["runs", "--tracking-uri", uri]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "measurement=cycles" in ln)
    sweep = line.split()[0]
    assert re.search(r"\s2\s+8\s+10 FINISHED", line), line  # 2 arms, 8 conditions under them
    out = tmp_path / "out"
    assert washexp(["export", "--sweep", sweep, "--tracking-uri", uri, "--out", str(out)]) == 0
    assert (out / record.name).read_text() == record.read_text()
    from washexp.compare import main as compare

    assert compare([sweep, sweep, "--tracking-uri", uri]) == 0
    assert "no regression: 0 needle(s) lost in B" in capsys.readouterr().out
    assert compare([str(record), sweep, "--tracking-uri", uri]) == 0  # the exported record against its sweep


def _edited(record, tmp_path, name, edit):
    data = json.loads(record.read_text())
    edit(data["data"])
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


def test_compare_names_a_fact_lost_a_condition_failed_and_a_k_missing(swept, tmp_path, capsys):
    from washexp.compare import main as compare

    _store, _uri, record = swept
    a = str(record)
    data = json.loads(record.read_text())["data"]
    kept = next(f for f in data["cycles_facts"] if f["kept"] and f["arm"] == "S top0" and f["k"] == 3)

    def lose(d):
        for f in d["cycles_facts"]:
            if f == kept:
                f["kept"] = False
        for t in d["cycles_tasks"]:
            if (t["arm"], t["task"], t["k"]) == (kept["arm"], kept["task"], 3):
                t["survival"] -= 0.5  # the survival its run would log with that fact lost (and more)

    b = _edited(record, tmp_path, "lost.json", lose)
    assert compare([a, b]) == 1
    out = capsys.readouterr().out
    assert f"LOST in B: S top0 · k=3 · {kept['task']} · {kept['field']}" in out
    assert "REGRESSION: 1 needle(s) lost in B" in out and "survival S top0 k=3" in out
    assert compare([a, b, "--max-needles-lost", "1", "--max-mean-drop", "1"]) == 0
    assert compare([b, a]) == 0  # gaining a fact is no regression

    def fail(d):  # a chain that failed in B keeps none of its task's facts
        for t in d["cycles_tasks"]:
            if (t["arm"], t["task"], t["k"]) == ("S top0", "payment", 1):
                t["failed"], t["survival"] = True, None
        d["cycles_facts"] = [f for f in d["cycles_facts"] if (f["arm"], f["task"], f["k"]) != ("S top0", "payment", 1)]

    assert compare([a, _edited(record, tmp_path, "failed.json", fail), "--max-mean-drop", "1"]) == 1
    kept_there = [f for f in data["cycles_facts"] if (f["arm"], f["task"], f["k"]) == ("S top0", "payment", 1)]
    out = capsys.readouterr().out
    assert f"{sum(f['kept'] for f in kept_there)} needle(s) lost in B" in out
    assert re.search(r"survival S top0 k=1 \(primary\): 0\.\d+ -> 0\.000 ", out), out  # the failed chain counts 0

    def drop_k(d):
        d["cycles_tasks"] = [t for t in d["cycles_tasks"] if t["k"] != 3]
        d["cycles_facts"] = [f for f in d["cycles_facts"] if f["k"] != 3]

    partial = _edited(record, tmp_path, "partial.json", drop_k)
    assert compare([a, partial]) == 1
    out = capsys.readouterr().out
    assert "MISSING in B: Full · 3" in out and "MISSING in B: S top0 · 3" in out
    assert compare([a, partial, "--allow-subset"]) == 0


def test_compare_takes_cycles_with_cycles_only(swept, capsys):
    from washexp.compare import main as compare

    _store, _uri, record = swept
    single = ROOT / "results" / "compaction-reference-2026-12-04.json"
    assert compare([str(record), str(single)]) == 2
    err = capsys.readouterr().err
    assert "A is a compaction-cycles record and B a compaction record: compare like with like" in err


def test_cycles_under_the_wash_benchmark_is_named():
    from hydra import compose, initialize_config_dir

    from washexp.app import check_family
    from washexp.config import register

    register()
    with initialize_config_dir(str(ROOT / "conf"), version_base=None):
        cfg = compose("config", overrides=["benchmark=wash", "measurement=cycles"])
        check_family(compose("config", overrides=["measurement=cycles"]))  # its own benchmark: fine
    with pytest.raises(ConfigError, match=r"measurement=cycles is the compaction benchmark's \(benchmark=compaction\)"):
        check_family(cfg)


@pytest.mark.slow
def test_cycles_run_on_a_served_model(tmp_path):
    """The same command on a served model (the scripted OpenAI-compatible server): S and H are
    asked once per cycle input, no reader is asked, and the record is written."""
    from tests.conftest import scripted_sweep
    from tests.openai_server import Script, serve

    script = Script()
    with serve(script) as url:
        scripted_sweep(url, tmp_path, ("payment",), "measurement=cycles", "method=S,H", "cycles.k=[1,2]")
    assert script.count() > 0 and script.count("read") == 0
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    # every call behind a condition's cycles is a trace of its run (tracking.traces, on by default)
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("compaction")
    conditions = client.search_runs([experiment.experiment_id], "tags.`washexp.kind` = 'cycles-condition'")
    assert len(conditions) == 4  # S and H, k = 1 and 2
    traced: set[str] = set()
    for run in conditions:
        m, found = run.data.metrics, client.search_traces(locations=[experiment.experiment_id], run_id=run.info.run_id)
        # a call several conditions share (an S that sizes H's allowance) is charged once, traced in each
        calls = [s for t in found for s in t.data.spans if s.span_type == "CHAT_MODEL"]
        assert len(calls) >= m["calls_live"] + m["calls_replayed"] > 0, run.info.run_name
        assert {t.info.tags["washexp.task"] for t in found} == {"payment"}
        assert {t.info.tags["washexp.role"] for t in found} <= {"S", "H", "Jev"}
        traced |= {s.attributes["washexp.recording_key"] for s in calls}
    recorded = {p.stem for p in (tmp_path / "rec").rglob("*.json") if "tokenize" not in p.parts}
    assert traced == recorded and len(recorded) == script.count() - script.count("tokenize")
    assert washexp(["export", "--tracking-uri", uri, "--out", str(tmp_path / "out")]) == 0
    (record,) = (tmp_path / "out").glob("*.json")
    assert record.name.startswith("compaction-scripted-test-server-cycles-")


def test_the_survival_bands_are_the_headline_interval_per_cycle():
    """Each cycle's band is the interval the headline table uses (records.decisions.mean_interval)
    over the tasks with a seen fact at that cycle; a cycle with one such task has no band."""
    from washexp.compaction.records.cycles import _plotted
    from washexp.export import decide

    per_task = [[0.9, 0.5], [1.0, 0.7], [None, 0.2], [0.8, 0.6], [0.7, 0.4], [1.0, 0.9], [0.6, 0.5]]
    lines, bands, tasks = _plotted({"S top1": {"primary": {2: per_task}, "control": {2: per_task[:1]}}})
    first = [t[0] for t in per_task if t[0] is not None]
    second = [t[1] for t in per_task]
    assert lines == {"S top1": {2: [(1, pytest.approx(sum(first) / 6)), (2, pytest.approx(sum(second) / 7))]}}
    assert bands == {
        "S top1": {2: [(1, *decide.interval(first, bounds=(0, 1))), (2, *decide.interval(second, bounds=(0, 1)))]}
    }
    assert tasks == {"S top1": {2: 7}}
    one = _plotted({"H top1": {"control": {1: [[0.5]]}}})
    assert one == ({"H top1": {1: [(1, 0.5)]}}, {"H top1": {1: []}}, {"H top1": {1: 1}})
