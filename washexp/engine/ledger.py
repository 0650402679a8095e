"""Where a ``run.py`` command's results went: the sweep's id, the runs it made and reused, and the
commands that read them next.

Each arm (or measurement) that ends adds one :class:`Entry`; under a parallel launcher a worker's
entries travel back to the launching process with its error lines (``Sweep.report``/``collect``).
:func:`closing_lines` turns them into what the command prints last.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import asdict, dataclass
from pathlib import Path

from washexp.tracking import default_uri
from washexp.tracking.kinds import KIND_TAG, Kind


@dataclass(frozen=True)
class Entry:
    """One arm or measurement of the command."""

    sweep: str
    """The sweep's id: its ``sweep`` tag, what ``washexp export --sweep`` and ``compare`` take."""
    benchmark: str
    experiment: str
    recorded: bool
    """False under ``tracking=off``: nothing was written."""
    uri: str | None
    """``tracking.uri``; None: the project's own store, which every ``washexp`` command opens unasked."""
    units: int
    """Conditions (compaction) or stores / arms (wash) planned."""
    run: int
    reused: int
    failed: int
    reused_from: str | None = None
    """Reused whole from another sweep: that sweep's id (its runs stay there; this sweep links them)."""

    @classmethod
    def of(cls, sweep: str, benchmark: str, tracking, units: int, outcome) -> Entry:
        """From the job's ``TrackingConfig`` and a ``runner.GroupOutcome`` (a group finished
        already is all reused)."""
        n = outcome.counts
        run, reused, failed = (0, units, 0) if outcome.reused else (n["run"], n["reused"], n["failed"])
        experiment = tracking.experiment or benchmark
        return cls(
            sweep,
            benchmark,
            experiment,
            tracking.enabled,
            tracking.uri,
            units,
            run,
            reused,
            failed,
            outcome.reused_from,
        )

    def to_dict(self) -> dict:
        return asdict(self)


def plural(n: int, word: str) -> str:
    """``1 condition``, ``2 conditions``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def command(root: Path) -> str:
    """``washexp``, or ``washexp -C <project>`` when the working folder is outside the project:
    a printed command works pasted where the user stands."""
    inside = Path.cwd().resolve().is_relative_to(root.resolve())
    return "washexp" if inside else f"washexp -C {shlex.quote(str(root))}"


def closing_lines(entries: list[Entry], root: Path) -> list[str]:
    """What a command prints last: per sweep its id and counts, then the exact next commands."""
    washexp = command(root)
    lines: list[str] = []
    groups: dict[tuple, list[Entry]] = {}
    for e in entries:
        groups.setdefault((e.sweep, e.benchmark, e.experiment, e.recorded, e.uri), []).append(e)
    for (sweep, benchmark, experiment, recorded, uri), es in groups.items():
        units, run, reused, failed = (sum(getattr(e, k) for e in es) for k in ("units", "run", "reused", "failed"))
        arm, unit = ("arm", "condition") if benchmark == "compaction" else ("measurement", "store run")
        lines.append(
            f"washexp: sweep {sweep} · {plural(len(es), arm)} · {plural(units, unit)}:"
            f" {run} run, {reused} reused, {failed} failed"
        )
        sources: dict[str, int] = {}
        for e in es:
            if e.reused_from is not None:
                sources[e.reused_from] = sources.get(e.reused_from, 0) + 1
        lines += [f"  reused:   {plural(n, arm)} finished in sweep {source}" for source, n in sources.items()]
        if not recorded:
            lines.append("  tracking=off: nothing was recorded (drop tracking=off to keep runs)")
            continue
        if not recorded_under(uri or default_uri(root), experiment, sweep):
            lines.append("  its arms were all finished in earlier sweeps, whose ids they keep (washexp runs lists")
            lines.append("  them; rerun=true runs them again under this one)")
            continue
        opts = "" if experiment == "compaction" else f" --experiment {experiment}"
        opts += "" if uri is None else f" --tracking-uri {shown(uri)}"
        if benchmark == "compaction":
            lines += decided(uri, experiment, sweep, root)
        lines.append(f"  records:  {washexp} export --sweep {sweep}{opts}")
        lines.append(f"  compare:  {washexp} compare {sweep} <another sweep id>{opts}")
        lines.append(f"  browse:   {browse(uri, benchmark, experiment, root)}")
    return lines


def decision_lines(uri: str, experiment: str, sweep: str) -> list[str]:
    """The sweep's paired decisions in a few lines, from its condition runs' logged metrics (the
    record's ``decisions`` table has them all); none for a sweep whose arms are not study arms."""
    from washexp.compaction import sweep_decisions

    return _summary(sweep_decisions.task_rows(uri, experiment, sweep))


def _summary(per_model: dict[str, list[dict]]) -> list[str]:
    from washexp.compaction.records import decisions

    return [line for rows in per_model.values() for line in decisions.summary(rows)]


def decided(uri: str | None, experiment: str, sweep: str, root: Path) -> list[str]:
    """:func:`decision_lines`, and the sweep's decisions logged as a run of their own
    (:mod:`washexp.compaction.sweep_decisions`), the line that names it last."""
    from washexp.compaction import sweep_decisions

    per_model = sweep_decisions.task_rows(uri or default_uri(root), experiment, sweep)
    name = sweep_decisions.log(per_model, uri, experiment, sweep, root)
    if name is None:
        return _summary(per_model)
    where = f"run '{name}', table {sweep_decisions.TABLE} (UI search: tags.`{KIND_TAG}` = '{Kind.DECISIONS.value}')"
    return [*_summary(per_model), f"  in MLflow: {where}"]


def shown(uri: str) -> str:
    """A store URI as printed: a password in it (``postgresql://user:pw@host/db``) is masked."""
    return re.sub(r"(//[^/:@]*:)[^/@]*@", r"\1***@", uri)


def recorded_under(uri: str, experiment: str, sweep: str) -> bool:
    """Whether any run in the store carries this sweep's id."""
    from washexp.tracking.reader import has_run_tagged

    return has_run_tagged(uri, experiment, "sweep", sweep)


def browse(uri: str | None, benchmark: str, experiment: str, root: Path) -> str:
    """How to open the runs table: a tracking server's own URL, else the ``washexp ui`` command
    and the URL it will serve (the experiment's view is saved here, so the URL opens on it)."""
    from washexp.tracking.views import runs_url, save_view

    served = uri if uri is not None and uri.startswith(("http://", "https://")) else None
    exp_id = save_view(uri or default_uri(root), experiment, benchmark)
    if exp_id is None:
        return f"no experiment {experiment!r} in the store yet"
    if served:
        return runs_url(shown(served), exp_id)
    ui = f"{command(root)} ui" + ("" if uri is None else f" --tracking-uri {shown(uri)}")
    opts = "" if experiment == "compaction" else f" --experiment {experiment}"
    return f"{ui}{opts}   (then {runs_url(UI_BASE, exp_id)})"


UI_BASE = "http://127.0.0.1:5000"
"""Where ``washexp ui`` serves by default."""
