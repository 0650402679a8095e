"""``washexp export --bundle``: beside a record, the runs and artifacts it was built from, so that
``washexp verify`` recomputes it with no store, no model and no network
(layout and checks: :mod:`washexp.tracking.bundle`).

Small by construction: the tables the record's builder read (recorded by
``tracking.reader.load_table``) with their runs' manifests, and the runs table of those runs'
sweeps (the builder selects arms and conditions from it); never traces, recordings or plots.
"""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

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


def covered(runs, reads: list[tuple[str, str]], named: set[str]):
    """The runs a bundle keeps: every run read, and every run of the sweeps those runs and their
    parents belong to or the record names (the builder picks arms and conditions among them; a
    wash record reads no artifact, only its runs' rows)."""
    from washexp.export.selection import tag

    ids = {run_id for run_id, _ in reads}
    read = runs[runs["run_id"].isin(ids)]
    parents = set(tag(read, "mlflow.parentRunId").dropna())
    sweeps = set(tag(runs[runs["run_id"].isin(ids | parents)], "sweep").dropna()) | named
    keep = runs["run_id"].isin(ids | parents) | tag(runs, "sweep").isin(sweeps)
    return runs[keep]


def write(record: Record, options, out: Path) -> Path:
    """Rebuild ``record`` with its reads recorded, then write its bundle as ``out/<stem>.bundle``
    (replaced whole: a bundle is the record's, written with it)."""
    from washexp.export import build, load_runs

    if record.platform.startswith("cross-model-"):
        raise ConfigError(f"{record.stem}: --bundle covers one model's records (not the cross-model one) for now")
    own = options if options.model else replace(options, model=str(record.provenance.get("model")))
    reader.READS.clear()
    rebuilt = build(own)
    reads = list(dict.fromkeys(reader.READS))  # in order, once each
    reader.READS.clear()
    rebuilt = [r for r in rebuilt if r.platform == record.platform] or rebuilt  # a study's and its cycles'
    if len(rebuilt) != 1 or json.loads(rebuilt[0].to_json())["data"] != json.loads(record.to_json())["data"]:
        raise ConfigError(f"{record.stem}: rebuilt alone for its bundle, the record differs (name one --model)")
    from washexp.export.selection import in_sweeps, tag

    everything = load_runs(options.uri, options.experiment)
    asked = tag(everything, "sweep")[in_sweeps(tag(everything, "sweep"), own.sweeps).astype(bool)]
    # the sweeps asked for too: a sweep that reused every arm it covers is named by its links alone
    named = set(record.provenance.get("sweeps (overrides)") or ()) | set(asked)
    runs = covered(everything, reads, named)
    target = out / f"{record.stem}.bundle"
    tmp = out / f".{record.stem}.bundle.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "runs").mkdir(parents=True)
    for run_id in sorted({r for r, _ in reads}):
        (tmp / "runs" / run_id).mkdir()
    for run_id, name in reads:
        (tmp / "runs" / run_id / name).write_bytes(reader.artifact_bytes(options.uri, run_id, name))
    (tmp / RUNS).write_text(json.dumps(runs_doc(runs), sort_keys=True) + "\n", encoding="utf-8")
    doc = {"schema": SCHEMA, "record": f"{record.stem}.json", "options": options_doc(own)}
    (tmp / INFO).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    bundle.clear_cache()
    return target
