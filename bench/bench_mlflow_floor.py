"""MLflow's own floor under the tracked panel: what its public API costs for exactly what the panel stores.

    python bench/bench_mlflow_floor.py [--latency 0.2] [--concurrency 8 32]

Runs the 13-arm panel (``bench_panel.py``'s command) tracked to a SQLite store in a temporary
folder, then reads everything it stored back (runs, their files, tables, params, metrics and
tags; every trace with its spans) and writes the same things again into a fresh store through
the calls washexp makes (``create_run``, ``log_artifacts`` from a folder, ``log_table`` per
table, ``log_batch`` once with each metric's last value only (MLflow's client splits it),
``set_terminated``; ``mlflow.start_span_no_context`` and ``end`` per span), one after another
on one thread, with nothing of washexp's around them. Only those calls are timed; reading the
first store and preparing the folders are not.

The CPU they take is the floor a harness that stores these runs and traces through MLflow's
public API pays, however well it schedules: the panel's ideal wall time is requests x latency /
concurrency, so ``floor / ideal`` is the best ratio a tracked panel can reach with the store's
writes alone on a core of their own (the figure issue 38's 1.10 at x 8 and 1.35 at x 32 are held
against). Printed beside the panel's own run: its wall time, ratio and CPU, and the share of the
harness's tracking cost (tracked minus untracked CPU) that is MLflow's floor. ``--before CHECKOUT``
runs the same pair in another checkout first (``git archive main``), so a change's before and
after are read in one run, against one floor, on the same machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] = "false"  # as the tracker writes them: synchronously
os.environ["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = "false"

from bench.bench_panel import run_panel  # noqa: E402

TABLES_TAG = "mlflow.loggedArtifacts"


def experiment_of(client) -> str:
    """The panel's experiment: the store's one besides MLflow's Default."""
    (experiment,) = [e for e in client.search_experiments() if e.name != "Default"]
    return experiment.experiment_id


def stored_runs(uri: str, staging: Path) -> list[dict]:
    """Every run of the store, oldest first, as what is needed to write it again: its files in a
    folder of their own (tables apart, as frames), params, metrics, tags."""
    import pandas as pd
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    runs = client.search_runs([experiment_of(client)], max_results=10_000, order_by=["attributes.start_time ASC"])
    out = []
    for i, run in enumerate(runs):
        files = Path(client.download_artifacts(run.info.run_id, "", str(staging / f"dl{i}")))
        tables = {}
        for entry in json.loads(run.data.tags.get(TABLES_TAG, "[]")):
            path = files / entry["path"]
            tables[entry["path"]] = pd.read_json(path, orient="split", dtype=False)
            path.unlink()
        tags = {k: v for k, v in run.data.tags.items() if not k.startswith("mlflow.")}
        out.append(
            {
                "name": run.info.run_name,
                "files": files,
                "tables": tables,
                "params": dict(run.data.params),
                "metrics": dict(run.data.metrics),
                "tags": tags,
                "status": run.info.status,
            }
        )
    return out


def stored_traces(uri: str) -> list:
    """Every trace of the store with its spans."""
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    experiment_id, traces, token = experiment_of(client), [], None
    while True:
        page = client.search_traces(locations=[experiment_id], max_results=500, page_token=token)
        traces.extend(page)
        token = page.token
        if not token:
            return traces


def write_runs(client, experiment_id: str, runs: list[dict]) -> list[str]:
    """The runs again, by the calls the tracker makes; returns their ids."""
    from mlflow.entities import Metric, Param, RunTag

    ids = []
    for run in runs:
        kind = {"washexp.kind": run["tags"].get("washexp.kind", "")}
        run_id = client.create_run(experiment_id, run_name=run["name"], tags=kind).info.run_id
        ids.append(run_id)
        if any(run["files"].iterdir()):
            client.log_artifacts(run_id, str(run["files"]))
        for rel, frame in sorted(run["tables"].items()):
            client.log_table(run_id, data=frame, artifact_file=rel)
        now = int(time.time() * 1000)
        params = [Param(k, v) for k, v in run["params"].items()]
        tags = [RunTag(k, v) for k, v in run["tags"].items()]
        metrics = [Metric(k, v, now, 0) for k, v in run["metrics"].items()]
        client.log_batch(run_id, metrics=metrics, params=params, tags=tags)
        client.set_terminated(run_id, run["status"])
    return ids


def write_traces(experiment_id: str, traces: list, run_ids: list[str]) -> int:
    """Every trace again, span by span as the tracker writes one (a root, its children under it);
    each under one of the new runs. Returns the spans written."""
    import mlflow

    kept = ("washexp.", "mlflow.chat", "mlflow.llm")  # what the tracker sets on a call's span
    spans = 0
    for n, trace in enumerate(traces):
        spans_of = trace.data.spans
        root_span = next(s for s in spans_of if s.parent_id is None)
        root = mlflow.start_span_no_context(
            root_span.name,
            span_type=root_span.span_type,
            inputs=root_span.inputs,
            tags={k: v for k, v in trace.info.tags.items() if k.startswith("washexp.")},
            metadata={"mlflow.sourceRun": run_ids[n % len(run_ids)]},
            experiment_id=experiment_id,
            start_time_ns=root_span.start_time_ns,
        )
        for span in spans_of:
            if span is root_span:
                continue
            child = mlflow.start_span_no_context(
                span.name,
                span_type=span.span_type,
                parent_span=root,
                inputs=span.inputs,
                attributes={k: v for k, v in span.attributes.items() if k.startswith(kept)},
                start_time_ns=span.start_time_ns,
            )
            child.end(outputs=span.outputs, status=span.status, end_time_ns=span.end_time_ns)
            spans += 1
        root.end(outputs=root_span.outputs, status=root_span.status, end_time_ns=root_span.end_time_ns)
        spans += 1
    return spans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 32])
    parser.add_argument(
        "--before",
        type=Path,
        metavar="CHECKOUT",
        help="another checkout of washexp (git archive of main): its panel pair runs first, against the same floor",
    )
    args = parser.parse_args()
    from mlflow import MlflowClient

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "on").mkdir()
        before = None
        if args.before:  # the same two panels in the other checkout, back to back with this one's
            checkout = args.before.resolve()
            before = (
                run_panel(args.latency, args.concurrency[0], tracking=False, root=checkout),
                run_panel(args.latency, args.concurrency[0], tracking=True, root=checkout),
            )
        off = run_panel(args.latency, args.concurrency[0], tracking=False)
        on = run_panel(args.latency, args.concurrency[0], tracking=True, keep=root / "on")
        source = f"sqlite:///{root / 'on' / 'mlflow.db'}"
        runs = stored_runs(source, root / "staging")
        traces = stored_traces(source)
        target = f"sqlite:///{root / 'floor.db'}"
        client = MlflowClient(target)
        experiment_id = client.create_experiment("floor", artifact_location=str(root / "floor-art"))
        import mlflow

        mlflow.set_tracking_uri(target)
        start = time.process_time()
        run_ids = write_runs(client, experiment_id, runs)
        middle = time.process_time()
        spans = write_traces(experiment_id, traces, run_ids)
        end = time.process_time()
        files = sum(1 for r in runs for p in r["files"].rglob("*") if p.is_file())
        tables = sum(len(r["tables"]) for r in runs)
    runs_cpu, traces_cpu = middle - start, end - middle
    floor, requests = runs_cpu + traces_cpu, on["requests"]

    def per_request(cpu: float) -> str:
        return f"{cpu:5.1f} s CPU ({1000 * cpu / requests:.1f} ms a request)"

    def panels(off: dict, on: dict) -> None:
        for name, r in (("untracked", off), ("tracked", on)):
            ratio = r["wall"] / r["ideal"]
            print(f"  {name:9s} wall {r['wall']:6.2f} s ({ratio:.2f} of ideal), {per_request(r['cpu'])}")

    def against_floor(off: dict, on: dict) -> None:
        """The goal (issue 51): washexp's own CPU above untracked-plus-floor at most 10 % of the floor."""
        cost = on["cpu"] - off["cpu"]
        own = cost - floor
        print(
            f"  floor   {per_request(floor)}: {floor / cost:.0%} of what tracking cost the harness ({cost:.1f} s);"
            f" washexp's own above it {own:.1f} s, {own / floor:.0%} of the floor (goal 10 %)"
        )

    print(f"panel at {args.latency} s x {args.concurrency[0]}: {requests} requests, ideal {on['ideal']:.2f} s")
    panels(off, on)
    print(f"what it stored: {len(runs)} runs, {files} files, {tables} tables; {len(traces)} traces, {spans} spans")
    print("MLflow's public API writing the same again, one thread, nothing else timed:")
    print(f"  runs    {runs_cpu:5.1f} s CPU ({1000 * runs_cpu / len(runs):.1f} ms a run)")
    print(f"  traces  {traces_cpu:5.1f} s CPU ({1000 * traces_cpu / max(spans, 1):.1f} ms a span)")
    against_floor(off, on)
    if before is not None:
        print(f"before ({args.before}), against the same floor:")
        panels(*before)
        against_floor(*before)
    for concurrency in args.concurrency:
        ideal = requests * args.latency / concurrency
        best = max(floor, ideal) / ideal
        print(f"  best ratio at x {concurrency}, the floor alone on a core of its own: {best:.2f} (ideal {ideal:.2f})")


if __name__ == "__main__":
    main()
