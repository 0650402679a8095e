"""``washexp export --bundle``: beside a record, the runs and artifacts it was built from, so that
``washexp verify`` recomputes it with no store, no model and no network
(layout and checks: :mod:`washexp.tracking.bundle`).

Small by construction: the tables the record's builder read (recorded by
``tracking.reader.load_table``) with their runs' manifests, the reader's raw replies beside each
run's grades (so every answer can be regraded without the model), and the runs table of those
runs' sweeps (the builder selects arms and conditions from it); never traces, recordings or plots.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from washexp.compaction.scoring.answers import GRADES
from washexp.errors import ConfigError
from washexp.export.records import Record
from washexp.tracking import bundle, reader
from washexp.tracking.bundle import INFO, RUNS, SCHEMA

DROPPED = ("artifact_uri",)
"""Columns not copied: a local path says where the store was, nothing the record reads."""


def options_doc(options) -> dict[str, Any]:
    """The export options that choose what a record covers (not where it is written)."""
    doc = asdict(options)
    for key in ("uri", "out", "overwrite", "bundle"):
        doc.pop(key, None)
    doc["sweeps"], doc["models"] = list(doc["sweeps"]), list(doc["models"])
    return doc


def _cell(value: Any) -> Any:
    if value is None:
        return None
    if hasattr(value, "isoformat"):
        return None if str(value) == "NaT" else value.isoformat()
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def runs_doc(runs) -> dict[str, Any]:
    columns = [c for c in runs.columns if c not in DROPPED]
    return {
        "columns": columns,
        "dtypes": {c: str(runs[c].dtype) for c in columns},
        "rows": [[_cell(v) for v in row] for row in runs[columns].itertuples(index=False, name=None)],
    }


def covered(runs, reads: list[tuple[str, str]], named: set[str], rows: set[str]):
    """The runs a bundle keeps: every run read, every run the builder's selection looked at
    (``rows``: the candidates it chose among, whose notes the record prints), and every run of the
    sweeps the runs read and their parents belong to or the record names (the builder picks arms
    and conditions among them; a wash record reads no artifact, only its runs' rows)."""
    from washexp.export.selection import tag

    ids = {run_id for run_id, _ in reads}
    read = runs[runs["run_id"].isin(ids)]
    parents = set(tag(read, "mlflow.parentRunId").dropna())
    sweeps = set(tag(runs[runs["run_id"].isin(ids | parents)], "sweep").dropna()) | named
    keep = runs["run_id"].isin(ids | parents | rows) | tag(runs, "sweep").isin(sweeps)
    return runs[keep]


def contents(record: Record, options, runs) -> dict[str, bytes]:
    """The files of ``record``'s bundle by path inside it, from ``runs`` (the very table the record
    was built from: one snapshot, so a run finishing meanwhile cannot make the two differ). A
    bundle is refused while a run it covers is still RUNNING: its sweep is not over."""
    from washexp.export import build, crossmodel
    from washexp.export.selection import in_sweeps, tag

    if record.platform.startswith("cross-model-"):  # its models' runs, rebuilt side by side again
        own = replace(options, model=None, models=tuple(record.provenance[crossmodel.MODELS]))
    else:
        own = options if options.model else replace(options, model=str(record.provenance.get("model")))
    reader.READS.clear()
    reader.ROWS.clear()
    rebuilt = build(own, runs)
    reads = list(dict.fromkeys(reader.READS))  # in order, once each
    sweeps = tag(runs, "sweep")
    # the sweeps asked for too: a sweep that reused every arm it covers is named by its links alone
    asked = set(sweeps[in_sweeps(sweeps, own.sweeps).astype(bool)].dropna())
    kept = covered(runs, reads, set(record.provenance.get("sweeps (overrides)") or ()) | asked, set(reader.ROWS))
    reader.READS.clear()
    reader.ROWS.clear()
    running = kept[kept["status"] == "RUNNING"]
    if not running.empty:
        first = running.iloc[0]
        sweep = first.get("tags.sweep") if isinstance(first.get("tags.sweep"), str) else "(no sweep id)"
        raise ConfigError(
            f"{record.stem}: sweep {sweep} is still running ({len(running)} run(s) RUNNING, e.g. "
            f"{first['run_id']}): export --bundle once it has finished (a sweep killed midway: run it again)"
        )
    rebuilt = [r for r in rebuilt if r.platform == record.platform] or rebuilt  # a study's and its cycles'
    if len(rebuilt) != 1 or json.loads(rebuilt[0].to_json())["data"] != json.loads(record.to_json())["data"]:
        raise ConfigError(f"{record.stem}: rebuilt alone for its bundle, the record differs (name one --model)")
    reads += replies(kept, reads)
    files = {f"runs/{run_id}/{name}": reader.artifact_bytes(options.uri, run_id, name) for run_id, name in reads}
    files[RUNS] = (json.dumps(runs_doc(kept), sort_keys=True) + "\n").encode("utf-8")
    doc = {"schema": SCHEMA, "record": f"{record.stem}.json", "options": options_doc(own)}
    files[INFO] = (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode("utf-8")
    return files


def replies(runs, reads: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The reply files (``answers/g<N>.json``) of every run whose grades the record read, as its
    manifest lists them: what ``washexp verify`` regrades."""
    graded = [run_id for run_id, name in reads if name == GRADES]
    names = bundle.reply_files(runs.columns)
    rows = runs.set_index("run_id")
    return [(r, n) for r in graded for n in names if isinstance(rows.at[r, bundle.TAG + n], str)]


def write(stem: str, files: dict[str, bytes], out: Path) -> Path:
    """Write ``files`` as ``out/<stem>.bundle`` (replaced whole: a bundle is its record's). They go
    to a fresh hidden folder first (``mkdtemp``: a name no one else holds, so never a link someone
    placed), which then takes the bundle's name; a link at that name is refused by the caller."""
    from washexp.export import umask

    target = out / f"{stem}.bundle"
    tmp = Path(tempfile.mkdtemp(prefix=f".{stem}.bundle.", dir=out))
    try:
        for rel, data in files.items():
            path = tmp.joinpath(*rel.split("/"))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        os.chmod(tmp, 0o777 & ~umask())  # mkdtemp's 0700 would make the bundle private
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    bundle.clear_cache()
    return target
