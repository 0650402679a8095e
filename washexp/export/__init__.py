"""Dated records from the tracking store: ``washexp export``.

``export(options)`` reads an experiment's runs (through :mod:`washexp.tracking`), hands them to
the family's record builder (``washexp.benchmarks.RECORDS``), and writes each record as
``<out>/<topic>-<platform>-<YYYY-MM-DD>.md`` and ``.json`` plus its PNG plots.
Runs of several models (and no ``--model``) also give one cross-model record with the models side
by side (:mod:`washexp.export.crossmodel`); ``--models a,b`` gives that record alone.
"""

from __future__ import annotations

import os
import stat
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from washexp.benchmarks import CROSS_RECORDS, JOBS, RECORDS
from washexp.errors import ConfigError, WashexpError
from washexp.export import crossmodel
from washexp.export.records import Record
from washexp.export.selection import in_sweeps, tag
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
    models: tuple[str, ...] = ()
    """Two models or more: one record with them side by side (and no per-model record)."""
    date: str | None = None
    """YYYY-MM-DD: the record as of that day (runs started on or before it, UTC)."""
    out: Path = Path("results")
    overwrite: bool = False
    """Overwrite a record of the same name; by default a name holding another record is kept and
    this one gets the next free name (``<stem>-2``, ...)."""
    bundle: bool = False
    """Also write ``<stem>.bundle/`` beside each record: what ``washexp verify`` recomputes it from."""


def load_runs(options: ExportOptions) -> Any:
    """Every run of the experiment ``options`` name; a sweep id none of them carries is a usage
    error (naming the experiment that holds it), a missing or empty experiment a user error."""
    runs = search(options.uri, options.experiment)
    check_sweeps(options, runs)
    return _nonempty(runs, options.uri, options.experiment)


def check_sweeps(options: ExportOptions, runs: Any) -> None:
    """A mistyped sweep id is a usage error, not "nothing matched the filters"."""
    sweeps = tag(runs, "sweep") if runs is not None else None
    for sweep in options.sweeps:
        if sweeps is None or not in_sweeps(sweeps, (sweep,)).any():
            raise ConfigError(
                f"--sweep {sweep}: no run of experiment {options.experiment!r} carries this sweep id"
                + _elsewhere(options.uri, options.experiment, sweep)
            )


def _nonempty(runs: Any, uri: str, experiment: str) -> Any:
    if runs is None:
        raise WashexpError(f"no experiment {experiment!r} in {uri}: run a sweep first (python run.py ...)")
    if runs.empty:
        raise WashexpError(f"experiment {experiment!r} in {uri} has no runs")
    return runs


def _elsewhere(uri: str, experiment: str, sweep: str) -> str:
    """The hint for a sweep id not in ``experiment``: the other family's experiment that holds it
    (a wash sweep exported as compaction, the default), else where the sweeps are listed."""
    for other in JOBS.names():  # each family's experiment is named after it
        runs = search(uri, other) if other != experiment else None
        if runs is not None and in_sweeps(tag(runs, "sweep"), (sweep,)).any():
            return f"; it is a sweep of {other!r}: add --experiment {other}"
    return " (washexp runs lists the sweeps)"


def check_options(options: ExportOptions) -> str:
    """The record builder's topic, once an unknown one and options that cannot go together are
    refused (before the store is read)."""
    topic = options.topic or options.experiment
    RECORDS.get(topic)
    if options.models and options.model:
        raise ConfigError("--model and --models: give one (--models puts several side by side)")
    if options.models and topic not in crossmodel.PARENT_KIND:
        raise ConfigError(f"--models: the {topic} records have no cross-model record")
    return topic


def build(options: ExportOptions, runs: Any = None) -> list[Record]:
    """The records ``options`` ask for, from ``runs`` (default: the experiment's runs, read now)."""
    topic = check_options(options)
    builder = RECORDS.get(topic)
    if runs is None:
        runs = load_runs(options)
    check_sweeps(options, runs)
    if options.models:
        crossmodel.check_present(runs, topic, options)
        return [CROSS_RECORDS.get(topic)(runs, options)]
    records = builder(runs, options)
    stems = [r.stem for r in records]
    if len(set(stems)) < len(stems):  # two models of one platform on one day: each record names its model
        records = [r.with_platform(f"{r.platform}-{crossmodel.slug(str(r.provenance['model']))}") for r in records]
    # one model's records may be several (the compaction study's, its cycles' and its cliff's): the cross-model
    # record puts several models' study records side by side (a cycles or cliff record has none)
    studies = [r for r in records if r.provenance.get("measurement") not in ("cycles", "cliff")]
    models = tuple(dict.fromkeys(str(r.provenance["model"]) for r in studies))
    if options.model is not None or topic not in crossmodel.PARENT_KIND or len(models) < 2:
        return records
    # several models (a sweep of model.name=a,b, or a store of several): what they hold is each
    # model's record and the one with them side by side, asked for or not
    return [*records, CROSS_RECORDS.get(topic)(runs, replace(options, models=models))]


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


@dataclass(frozen=True)
class Written:
    record: Record
    paths: list[Path]
    taken: tuple[str, ...] = ()
    """The names found holding other records, which this record did not replace."""


def refuse_links(out: Path, names) -> None:
    """Export writes nothing through a symlink: a link at a name it would write is a usage error,
    refused before anything is written (followed, it would write outside ``--out``)."""
    for name in names:
        if (out / name).is_symlink():
            raise ConfigError(f"--out {out}: {name} is a symlink; export writes no file through one (remove it)")


def place(record: Record, out: Path) -> tuple[Record, dict[str, bytes], tuple[str, ...], bool]:
    """The record under its first name in ``out`` that is free or holds this very record, its
    files, the names before it that hold another, and whether its files are already there byte for
    byte. Files written by hand or by an older washexp count: any file of the name that differs
    makes the name taken."""
    taken: list[str] = []
    copy = 1
    while True:
        candidate = record if copy == 1 else record.as_copy(copy)
        files = candidate.files()
        refuse_links(out, [*files, f"{candidate.stem}.bundle"])
        present = [name for name in files if (out / name).exists()]
        if not present:
            return candidate, files, tuple(taken), False
        if len(present) == len(files) and all((out / n).read_bytes() == data for n, data in files.items()):
            return candidate, files, tuple(taken), True
        taken.append(candidate.stem)
        copy += 1


def write_file(path: Path, data: bytes) -> None:
    """``path`` replaced whole by ``data`` (a temp file renamed over it: a reader sees the old bytes
    or the new, and a link placed at the name is replaced, never followed). A replaced file keeps
    its mode; a new one gets the umask's."""
    try:
        mode = stat.S_IMODE(os.lstat(path).st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~umask()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), mode)
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def umask() -> int:
    """The process's umask (read by setting it, then set back)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


@dataclass(frozen=True)
class _Plan:
    record: Record
    files: dict[str, bytes]
    taken: tuple[str, ...]
    there: bool
    bundle: dict[str, bytes] | None


def export(options: ExportOptions) -> list[Written]:
    """Build the records and write them. A record never replaces another silently: with a name
    taken it is written as ``<stem>-2`` (``--overwrite`` replaces it instead), and the same record
    again writes nothing. No run is changed: a plot added to a finished run would be a file its
    manifest does not list. Every record and bundle is built, from one reading of the runs, before
    the first file is written: a refusal leaves nothing half-written."""
    from washexp.export import bundle

    check_writable(options.out)
    check_options(options)
    runs = load_runs(options)
    plans = []
    for record in build(options, runs):
        if options.overwrite:
            files = record.files()
            refuse_links(options.out, [*files, f"{record.stem}.bundle"])
            plan = _Plan(record, files, (), False, None)
        else:
            plan = _Plan(*place(record, options.out), None)
        if options.bundle:
            plan = replace(plan, bundle=bundle.contents(plan.record, options, runs))
        plans.append(plan)
    written = []
    for plan in plans:
        if not plan.there:
            options.out.mkdir(parents=True, exist_ok=True)
            for name, data in plan.files.items():
                write_file(options.out / name, data)
        paths = [options.out / name for name in plan.files]
        if plan.bundle is not None:
            paths.append(bundle.write(plan.record.stem, plan.bundle, options.out))
        written.append(Written(plan.record, paths, plan.taken))
    return written


__all__ = ["ExportOptions", "Record", "Written", "build", "check_writable", "export", "place"]
