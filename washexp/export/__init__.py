"""Dated records from the tracking store: ``washexp export``.

``export(options)`` reads an experiment's runs (through :mod:`washexp.tracking`), hands them to
the family's record builder (``washexp.benchmarks.RECORDS``), and writes each record as
``<out>/<topic>-<platform>-<YYYY-MM-DD>.md`` and ``.json`` plus its PNG plots.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from washexp.benchmarks import RECORDS
from washexp.errors import ConfigError, WashexpError
from washexp.export.records import Record
from washexp.tracking.reader import search


@dataclass(frozen=True)
class ExportOptions:
    uri: str
    experiment: str = "compaction"
    topic: str | None = None
    """The record builder; default: the experiment's name."""
    sweeps: tuple[str, ...] = ()
    """Sweep ids (the ``sweep`` tag, or its tail such as ``2026-11-30/10-31-23``)."""
    model: str | None = None
    date: str | None = None
    """YYYY-MM-DD: the record as of that day (runs started on or before it, UTC)."""
    out: Path = Path("results")


def load_runs(uri: str, experiment: str) -> Any:
    """Every run of ``experiment``; a missing experiment or an empty one is a user error."""
    runs = search(uri, experiment)
    if runs is None:
        raise WashexpError(f"no experiment {experiment!r} in {uri}: run a sweep first (python run.py ...)")
    if runs.empty:
        raise WashexpError(f"experiment {experiment!r} in {uri} has no runs")
    return runs


def build(options: ExportOptions) -> list[Record]:
    builder = RECORDS.get(options.topic or options.experiment)
    records = builder(load_runs(options.uri, options.experiment), options)
    stems = [r.stem for r in records]
    clash = sorted({s for s in stems if stems.count(s) > 1})
    if clash:
        raise WashexpError(f"several models would write {', '.join(clash)}: choose one with --model")
    return records


def check_writable(out: Path) -> None:
    """Refuse an output folder that cannot be written before any record is built: a read-only
    ``results/`` would otherwise fail after the ``.md`` and before the ``.json``. The probe is a real
    write where the records will go, or where their folder will be made (a permission bit says
    nothing to root, nor about a read-only mount)."""
    existing = next(p for p in (out, *out.absolute().parents) if p.exists())  # mkdir comes after the build
    if not existing.is_dir():
        raise ConfigError(f"--out {out}: cannot write there ({existing} is not a folder)")
    try:
        with tempfile.TemporaryFile(dir=existing):  # an unnamed file: nothing is left behind
            pass
    except OSError as err:
        raise ConfigError(f"--out {out}: cannot write there ({err.strerror or type(err).__name__})") from None


def export(options: ExportOptions) -> list[Path]:
    """Build the records and write them; return the paths. No run is changed: a plot added to a
    finished run would be a file its manifest does not list."""
    check_writable(options.out)
    written = []
    for record in build(options):
        paths = record.write(options.out)
        written += paths
    return written


__all__ = ["ExportOptions", "Record", "build", "check_writable", "export"]
