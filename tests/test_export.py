"""``washexp export`` on a tiny real sweep: the record's numbers against the runs, by hand."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from statistics import mean

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import run_cli, washexp_cli
from tests.test_decide import brute_p
from washexp.engine.ledger import decision_lines
from washexp.export import bootstrap

TASKS = "task=[backup,refactor,meeting_notes,payment]"  # payment is primary, the rest control


def export(store: Path, out: Path, *extra: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = washexp_cli("export", "--tracking-uri", f"sqlite:///{store / 'mlflow.db'}", "--out", str(out), *extra)
    if check and proc.returncode != 0:
        raise AssertionError(f"export exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc


CLOSING: list[str] = []
"""What the study's first sweep printed last."""
DECIDED: list = []
"""The decisions runs the study's sweeps logged, newest first."""


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    store = tmp_path_factory.mktemp("export")
    first = run_cli(["-m", "method=S,H", "topn=0,1", TASKS], store, env={"CI": "true"}, premade=True)
    CLOSING.append(first.stdout + first.stderr)
    run_cli(["-m", "method=full", TASKS], store, env={"CI": "true"})
    run_cli(["method=S", "topn=0", "phase=preflight", "task=[backup]"], store, env={"CI": "true"})
    export(store, store / "results")
    (record_json,) = (store / "results").glob("compaction-reference-*.json")
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    exp = client.get_experiment_by_name("compaction")
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    DECIDED.extend(r for r in runs if r.data.tags["washexp.kind"] == "decisions")
    runs = [r for r in runs if r.data.tags["washexp.kind"] != "decisions"]  # no record reads them
    return store, json.loads(record_json.read_text()), record_json, runs


def _label(run) -> str:
    t = run.data.tags
    return "Full" if t["method"] == "full" else f"{t['method']} top{t['topn']}"


def _final_conditions(runs):
    return [r for r in runs if r.data.tags["washexp.kind"] == "condition" and r.data.tags["phase"] == "final"]


def test_arm_tables_match_the_condition_runs(study):
    _, record, _, runs = study
    conds = _final_conditions(runs)
    for cohort in ("primary", "control"):
        rows = {r["arm"]: r for r in record["tables"][f"arms_{cohort}"]["rows"]}
        assert set(rows) == {"Full", "S top0", "S top1", "H top0", "H top1"}
        for label, row in rows.items():
            mine = [c.data.metrics for c in conds if _label(c) == label and c.data.tags["cohort"] == cohort]
            assert row["tasks"] == len(mine) == (1 if cohort == "primary" else 3)
            assert row["retention"] == pytest.approx(mean(m["retention"] for m in mine))
            assert row["input_tokens"] == pytest.approx(mean(m["input_tokens"] for m in mine))
            assert row["input_tokens_total"] == sum(m["input_tokens_total"] for m in mine)
            assert row["reduction_pct"] == pytest.approx(mean(m["reduction_pct"] for m in mine))
            assert row["contexts_shortened"] == sum(m["contexts_shortened"] for m in mine)
            assert row["contexts"] == sum(m["contexts"] for m in mine)
            assert row["failed"] == 0 and row["invalid"] == 0
            # the reference backend has no reader: accuracy is absent, never 0
            assert row["fact_accuracy"] is None and row["all_fields_correct"] is None


def test_markdown_shows_counts_and_labels_the_baseline(study):
    _, record, record_json, runs = study
    md = record_json.with_suffix(".md").read_text()
    assert "labelled deterministic baseline" in md and "not a model result" in md
    assert "n is small: 1 primary and 3 control tasks" in md
    assert "n/a — reference model has no reader" in md
    s1 = [
        c.data.metrics for c in _final_conditions(runs) if _label(c) == "S top1" and c.data.tags["cohort"] == "control"
    ]
    shortened = f"{sum(m['contexts_shortened'] for m in s1):.0f}/{sum(m['contexts'] for m in s1):.0f}"
    s1_line = next(line for line in md.splitlines() if line.startswith("| S top1 | 3 |"))
    assert f"| {shortened} |" in s1_line
    for plot in record["plots"]:
        assert f"]({plot['file']})" in md and (record_json.parent / plot["file"]).stat().st_size > 10_000


def test_per_task_cells_and_run_ids_come_from_the_runs(study):
    _, record, _, runs = study
    cells = {r["task"]: r for r in record["tables"]["per_task_retention"]["rows"]}
    for c in _final_conditions(runs):
        assert cells[c.data.tags["task"]][_label(c)] == c.data.metrics["retention"]
    listed = {r["run_id"] for r in record["tables"]["runs"]["rows"]}
    assert listed == {r.info.run_id for r in runs}  # every run is behind some number, none is made up
    fixtures = record["provenance"]["fixtures sha256 (task folder tree digest)"]
    assert {
        c.data.tags["task"]: c.data.tags["washexp.sha256.fixture"] for c in runs if "task" in c.data.tags
    } == fixtures


def test_preflight_is_listed_apart(study):
    _, record, _, runs = study
    (pre,) = [r for r in runs if r.data.tags["phase"] == "preflight" and r.data.tags["washexp.kind"] == "arm"]
    assert [r["run_id"] for r in record["tables"]["preflight"]["rows"]] == [pre.info.run_id]
    main = [row for key in ("arms_primary", "arms_control") for row in record["tables"][key]["rows"]]
    assert pre.info.run_id not in {row["run_id"] for row in main}
    # the preflight S top0 is newer, but the final S top0 stays the one in the tables
    assert all(row["arm"] != "S top0" or row["run_id"] != pre.info.run_id for row in main)


def test_decisions_come_first_and_are_the_sign_flip_of_the_runs(study):
    _, record, path, runs = study
    assert list(record["tables"])[:2] == ["decisions", "headline"]  # before the wide tables
    md = path.with_suffix(".md").read_text()
    assert md.index("## Decisions: paired tests over tasks") < md.index("## Headline: retention by arm")
    assert md.index("## Headline: retention by arm") < md.index("## Arms, primary cohort")
    conds = _final_conditions(runs)
    score = {(_label(c), c.data.tags["task"]): c.data.metrics["retention"] for c in conds}
    cohort = {c.data.tags["task"]: c.data.tags["cohort"] for c in conds}
    rows = [r for r in record["tables"]["decisions"]["rows"] if r["analysis"] == "ITT"]
    # 4 arms vs Full + 2 S/H pairs, in each cohort; payment alone is primary: one task, not tested
    assert len(rows) == 2 * 4 + 2 * 2
    for row in rows:
        tasks = [t for t, c in cohort.items() if c == row["cohort"]]
        diffs = [score[row["a"], t] - score[row["b"], t] for t in tasks]
        assert row["n_tasks"] == len(tasks)
        if len(tasks) < 2:
            assert row["p"] is None and row["verdict"] == "not tested: 1 task in common"
            assert row["diff"] == pytest.approx(diffs[0])
            continue
        assert row["diff"] == pytest.approx(mean(diffs))
        assert row["ci_low"] <= row["diff"] <= row["ci_high"]
        assert row["p"] == brute_p(diffs)


def test_the_sweep_closes_with_its_decisions(study):
    store, record, _, runs = study
    (sweep,) = {r.data.tags["sweep"] for r in runs if r.data.tags.get("method") == "H"}
    lines = decision_lines(f"sqlite:///{store / 'mlflow.db'}", "compaction", sweep)
    # payment alone is primary (not tested): the control cohort's S vs H is the family shown
    assert lines[0].startswith("  decisions (S vs H, control, retention, ITT;")
    rows = [
        r
        for r in record["tables"]["decisions"]["rows"]
        if (r["analysis"], r["family"], r["cohort"]) == ("ITT", "S vs H", "control")
    ]
    assert len(rows) == 2 and len(lines) == 3
    for r, line in zip(rows, lines[1:], strict=True):
        assert line.startswith(f"    {r['a']} vs {r['b']} (3 tasks): {r['verdict']}, p {r['p']:.3g}")
    assert "\n".join(lines) in CLOSING[0]  # printed where the sweep ends, before its records line


def test_the_sweep_logs_its_decisions_as_a_run_of_their_own(study):
    """The decisions in the MLflow UI: one FINISHED run per sweep, of kind ``decisions``, whose
    table is the sweep's decisions and whose manifest covers its files; no arm or condition run
    gained a file (their manifests stand), and ``washexp runs`` counts it neither as arm nor unit."""
    import hashlib

    from washexp.compaction.sweep_decisions import rows, task_rows
    from washexp.listing import sweep_rows
    from washexp.tracking.reader import search

    store, _, _, runs = study
    uri = f"sqlite:///{store / 'mlflow.db'}"
    (sweep,) = {r.data.tags["sweep"] for r in runs if r.data.tags.get("method") == "H"}
    # the first two commands share a sweep folder, so a sweep id: each logged the decisions of its arms so far
    assert [r.data.tags["sweep"] for r in DECIDED] == [sweep, sweep]
    assert [r.info.status for r in DECIDED] == ["FINISHED", "FINISHED"]
    run = DECIDED[-1]  # the first command's: S and H alone
    assert run.info.run_name == f"decisions · {sweep}"
    assert "mlflow.parentRunId" not in run.data.tags and "washexp.hash" not in run.data.tags
    assert f"  in MLflow: run 'decisions · {sweep}', table decisions.json" in CLOSING[0]
    client = MlflowClient(uri)
    root = Path(client.download_artifacts(run.info.run_id, ""))
    manifest = json.loads((root / "manifest.json").read_text())
    files = {p.relative_to(root).as_posix(): p for p in root.rglob("*") if p.is_file() and p.name != "manifest.json"}
    assert set(files) == set(manifest["artifacts"]) and "decisions.json" in files
    for rel, path in files.items():
        assert manifest["artifacts"][rel] == run.data.tags[f"washexp.sha256.{rel}"]
        assert manifest["artifacts"][rel] == hashlib.sha256(path.read_bytes()).hexdigest()
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment("compaction")  # a user's way to the table, as docs/guide/decisions.md says
    first = mlflow.load_table("decisions.json", run_ids=[run.info.run_id])
    assert set(first["family"]) == {"S vs H"}
    newest = mlflow.load_table("decisions.json", run_ids=[DECIDED[0].info.run_id])
    expected = rows(task_rows(uri, "compaction", sweep))  # S, H and Full now
    assert len(newest) == len(expected) and {r["family"] for r in expected} == {"S vs H", "vs Full"}
    for got, want in zip(newest.to_dict("records"), expected, strict=True):
        assert (got["model"], got["a"], got["b"], got["verdict"]) == (
            want["model"],
            want["a"],
            want["b"],
            want["verdict"],
        )
        assert got["n_tasks"] == want["n_tasks"] and got["diff"] == pytest.approx(want["diff"])
    listed = {r.sweep: r for r in sweep_rows(search(uri, "compaction"), "compaction")}[sweep]
    assert (listed.arms, listed.units, listed.status) == (5, 20, {"FINISHED": 25})


def test_bootstrap_on_known_differences():
    a = {f"t{i}": float(i % 2) for i in range(10)}
    same = bootstrap.paired(a, a)
    assert (same.diff, same.low, same.high) == (0.0, 0.0, 0.0)
    b = {t: 0.0 for t in a}
    iv = bootstrap.paired(a, b)
    assert iv.diff == 0.5 and 0.1 < iv.low < 0.5 < iv.high < 0.9
    assert bootstrap.paired(a, b) == iv  # seeded: the same interval every time
    assert bootstrap.paired(a, {"other": 1.0}) is None


def test_reexport_is_byte_identical(study, tmp_path):
    store = study[0]
    export(store, tmp_path)
    first = {p.name: p.read_bytes() for p in (store / "results").iterdir()}
    again = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    # .md, .json, two plots, and the decision and headline tables as .csv and .tex
    assert first.keys() == again.keys() and len(first) == 8
    assert first == again


def test_export_changes_no_run(study):
    """A file added to a finished run after its manifest was written would be in no manifest:
    the plots stay in results/ only."""
    store, _, _, runs = study
    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    for run in runs:
        names = {Path(a.path).name for a in client.list_artifacts(run.info.run_id)}
        assert "plots" not in names
        manifest = json.loads(Path(client.download_artifacts(run.info.run_id, "manifest.json")).read_text())
        assert names - {"manifest.json"} <= {n.split("/")[0] for n in manifest["artifacts"]}


def test_grades_tables_gather_across_runs(study):
    store, _, _, runs = study
    mlflow.set_tracking_uri(f"sqlite:///{store / 'mlflow.db'}")
    mlflow.set_experiment("compaction")
    conds = [c for c in _final_conditions(runs) if c.data.tags["method"] == "H"]
    table = mlflow.load_table("retention.json", extra_columns=["run_id"])  # every run that has it
    assert set(table["run_id"]) == {c.info.run_id for c in runs if c.data.tags["washexp.kind"] == "condition"}
    for c in conds:
        rows = table[table["run_id"] == c.info.run_id]
        assert set(rows["task"]) == {c.data.tags["task"]}
        assert rows["retained"].mean() == pytest.approx(c.data.metrics["retention"])


def test_user_errors_are_one_line(study, tmp_path):
    store = study[0]
    for extra, says, code in (
        (["--experiment", "nope", "--topic", "compaction"], "no experiment 'nope'", 1),
        (["--date", "2000-01-01"], "no finished arm runs", 1),
        (["--topic", "wahs"], "unknown record builder 'wahs'; did you mean 'wash'", 2),  # usage: before any work
        (["--topic", "wash"], "no finished wash measurement runs", 1),
        (["--sweep", "multirun/2099-01-01/00-00-00"], "--sweep multirun/2099-01-01/00-00-00: no run of", 2),
    ):
        proc = export(store, tmp_path, *extra, check=False)
        assert proc.returncode == code and proc.stderr.count("\n") == 1 and says in proc.stderr, proc.stderr
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_a_store_of_full_arms_alone_exports(tmp_path):
    """Full carries no top-N tag, so a store holding Full arms only has no top-N column at all (the
    export once died on it with a KeyError)."""
    run_cli(["method=full", "task=[backup,refactor]"], tmp_path)
    proc = export(tmp_path, tmp_path / "results", check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert list((tmp_path / "results").glob("compaction-reference-*.json"))


@pytest.mark.slow
def test_the_same_record_again_writes_nothing(study, tmp_path):
    store = study[0]
    first = export(store, tmp_path).stdout.split()
    stamps = {p: Path(p).stat().st_mtime_ns for p in first}
    again = export(store, tmp_path)
    assert again.stdout.split() == first and again.stderr == ""
    assert {p: Path(p).stat().st_mtime_ns for p in first} == stamps  # not even rewritten
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(Path(p).name for p in first)  # nothing beside


@pytest.mark.slow
def test_a_name_holding_another_record_is_kept_and_this_one_is_written_beside_it(study, tmp_path):
    """The trap: a fresh export of the same day replaced a committed record of other runs."""
    store = study[0]
    paths = [Path(p) for p in export(store, tmp_path).stdout.split()]
    md = next(p for p in paths if p.suffix == ".md")
    made = md.read_bytes()
    md.write_bytes(made + b"another record's line\n")
    theirs = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    proc = export(store, tmp_path)
    ours = [Path(p) for p in proc.stdout.split()]
    assert [p.name for p in ours] == [p.name.replace(md.stem, f"{md.stem}-2") for p in paths]
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name in theirs} == theirs  # untouched
    assert proc.stderr == (
        f"washexp: {tmp_path / md.stem}.md holds another record; kept, and this one is {md.stem}-2"
        " (--overwrite replaces it)\n"
    )
    copy_md = next(p for p in ours if p.suffix == ".md").read_text(encoding="utf-8")
    plots = [p.name for p in ours if p.suffix == ".png"]
    assert len(plots) == 2 and all(f"]({name})" in copy_md for name in plots)  # its own plots, renamed
    record = json.loads(next(p for p in ours if p.suffix == ".json").read_text(encoding="utf-8"))
    assert [p["file"] for p in record["plots"]] == plots
    assert export(store, tmp_path).stdout.split() == [str(p) for p in ours]  # the copy is found again

    replaced = export(store, tmp_path, "--overwrite")
    assert replaced.stdout.split() == [str(p) for p in paths] and replaced.stderr == ""
    assert md.read_bytes() == made


@pytest.mark.parametrize(
    ("methods", "named"),
    [
        (["S", "H"], "S and H"),
        (["full", "S", "H"], "S and H"),
        (["S"], "S"),
        (["S", "H", "mask"], "S, H and mask"),
    ],
)
def test_the_plot_caption_names_the_methods_drawn_and_full_only_when_full_was_run(methods, named):
    """The traps: a record without a Full arm said "Full as a dashed line" under a plot that has
    none, and one of S arms only said "S and H"."""
    import pandas as pd

    from washexp.compaction.records.arms import _plots

    rows = [
        {
            "method": m,
            "topn": None if m == "full" else n,
            "metrics.primary/retention": 0.5 + n / 10,
            "metrics.primary/input_tokens": 100.0 + n,
        }
        for m in methods
        for n in ([0] if m == "full" else [0, 1])
    ]
    vs_n, _ = _plots(pd.DataFrame(rows), "retention", "retention", "stem", {"primary": 1, "control": 0}, {})
    full = "; Full as a dashed line" if "full" in methods else ""
    assert vs_n.caption == f"retention against Top N, {named}{full}"  # no bars given: none drawn or said


def test_the_plots_bars_are_the_headline_intervals():
    """Each arm's bar is its headline row's interval, keyed by its method and N (Full: none);
    an arm with one task has no interval and no bar."""
    import pandas as pd

    from washexp.compaction.records.arms import _bars, _plots
    from washexp.compaction.records.decisions import arm_means
    from washexp.export import plots

    final = pd.DataFrame(
        [
            {"label": "S top1", "method": "S", "topn": "1", "metrics.primary/retention": 0.5},
            {"label": "Full", "method": "full", "topn": None, "metrics.primary/retention": 0.9},
        ]
    )
    tasks = [
        {"arm": arm, "cohort": cohort, "task": f"t{i}", "retention": v, "valid": True}
        for arm, cohort, values in (
            ("S top1", "primary", [0.2, 0.6, 0.7, 0.5, 0.4, 0.9, 0.1]),
            ("Full", "primary", [1.0, 0.8, 0.9, 1.0, 0.7, 1.0, 0.9]),
            ("S top1", "control", [0.3]),
        )
        for i, v in enumerate(values)
    ]
    means = arm_means(tasks, "retention")
    bars = _bars(final, means)
    row = {(m["cohort"], m["arm"]): m for m in means}
    for cohort, arm, key in (("primary", "S top1", ("S", 1)), ("primary", "Full", ("full", None))):
        m = row[cohort, arm]
        assert bars[cohort][key] == plots.Bar(m["ci_low"], m["ci_high"], 7)
        assert m["ci_low"] < m["mean"] < m["ci_high"] and not m["whole_range"]  # 7 tasks: a real interval
    assert "control" not in bars and row["control", "S top1"]["ci_low"] is None
    vs_n, tokens = _plots(final, "retention", "retention", "stem", {"primary": 7, "control": 1}, bars)
    assert "bars: each arm's 95% sign-flip interval over its tasks, as in the headline table" in vs_n.caption
    assert "bars:" in tokens.caption
