"""Dated records from the tracking store: ``washexp export``.

``export(options)`` reads an experiment's runs (through :mod:`washexp.tracking`), hands them to
the record builder registered for the topic (``records.BUILDERS``), and writes each record as
``<out>/<topic>-<platform>-<YYYY-MM-DD>.md`` and ``.json`` plus its PNG plots.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from washexp.errors import WashexpError
from washexp.export import compaction as _compaction  # noqa: F401  (registers its builder)
from washexp.export.records import BUILDERS, Record
from washexp.export.tables import load_runs
from washexp.tracking import attach


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


def build(options: ExportOptions) -> list[Record]:
    builder = BUILDERS.get(options.topic or options.experiment)
    records = builder(load_runs(options.uri, options.experiment), options)
    stems = [r.stem for r in records]
    clash = sorted({s for s in stems if stems.count(s) > 1})
    if clash:
        raise WashexpError(f"several models would write {', '.join(clash)}: choose one with --model")
    return records


def export(options: ExportOptions) -> list[Path]:
    """Build the records, write them, and attach each record's plots to the arm runs it
    covers (under ``plots/``, so the UI shows them beside the numbers); return the paths."""
    written = []
    for record in build(options):
        paths = record.write(options.out)
        attach(options.uri, record.arm_runs, [options.out / p.file for p in record.plots], "plots")
        written += paths
    return written


__all__ = ["BUILDERS", "ExportOptions", "Record", "build", "export"]
