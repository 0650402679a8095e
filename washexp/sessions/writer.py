"""Write imported sessions as a task set: secrets masked first, facts added, every task checked by
the fixture loader, the set renamed into place whole (or nothing is left behind).

Layout, the fourteen's format (``fixtures/compaction/README.md``) plus how each task was made::

    DIR/<task>/task.yaml  trajectory.json  import.json
    DIR/manifest.json     each task's sha256
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from washexp import __version__
from washexp.compaction.inputs.fixtures import Unit, load_tasks, structural_cohort
from washexp.compaction.methods.redact import MARK as REDACTED
from washexp.compaction.methods.redact import redact
from washexp.errors import ConfigError, FixtureError
from washexp.masking import MASK, mask, secret_values
from washexp.sessions import named, planting
from washexp.sessions.session import Session
from washexp.tasks import manifest


@dataclass(frozen=True)
class Plan:
    """What to add to each session: ``plant`` facts from ``seed``, and the named facts by task id."""

    plant: int
    seed: int
    named: dict[str, list[named.NamedFact]]
    facts_file: Path | None


@dataclass(frozen=True)
class Written:
    tasks: dict[str, str]
    """Task id -> its cohort."""
    masked: int
    notes: dict[str, tuple[str, ...]]
    """Task id -> what its format could not express (left out)."""


def task_ids(stem: str, sessions: list[Session]) -> list[str]:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in stem).strip(".") or "session"
    return [f"{safe}-{s.name}" for s in sessions]


def check_out(out: Path) -> None:
    """``--out`` is a new folder in an existing one: an import never writes over anything."""
    if out.exists() or out.is_symlink():
        raise ConfigError(f"--out {out}: already exists; an import writes a new folder")
    if not out.parent.is_dir():
        raise ConfigError(f"--out {out}: its parent folder does not exist")


def write(sessions: list[Session], ids: list[str], plan: Plan, out: Path, source: dict[str, str]) -> Written:
    check_out(out)
    unknown = sorted(set(plan.named) - set(ids))
    if unknown and plan.facts_file is not None:
        raise FixtureError(plan.facts_file, unknown[0], f"no such imported task (the tasks are {', '.join(ids)})")
    built = []
    masked = 0
    values = secret_values()
    for task_id, session in zip(ids, sessions, strict=True):
        session, count = _masked(session, values)
        masked += count
        built.append(_task(task_id, session, plan, source, count))
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        for task_id, (spec, trajectory, made) in zip(ids, built, strict=True):
            folder = tmp / task_id
            folder.mkdir()
            (folder / "task.yaml").write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True, width=100))
            (folder / "trajectory.json").write_text(json.dumps(trajectory, indent=1, ensure_ascii=False) + "\n")
            (folder / "import.json").write_text(json.dumps(made, indent=1, ensure_ascii=False) + "\n")
        tasks = load_tasks(tmp)  # the loader's every rule, before the set exists under its name
        # the task-set manifest a sweep checks the folder against (never the planting seed)
        parameters = {**source, "plant": plan.plant, "named_facts": bool(plan.named)}
        made = manifest.build("washexp import", __version__, parameters, {t.id: t.digest for t in tasks})
        (tmp / manifest.NAME).write_text(manifest.dumps(made), encoding="utf-8")
        os.chmod(tmp, 0o777 & ~_umask())
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Written(
        {t.id: t.declared_cohort for t in tasks}, masked, {i: s.notes for i, s in zip(ids, sessions, strict=True)}
    )


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def _mask_text(text: str, values: list[str]) -> tuple[str, int]:
    before = text.count(MASK) + text.count(REDACTED)
    text = redact(mask(text, values))
    return text, text.count(MASK) + text.count(REDACTED) - before


def _mask_value(value: Any, values: list[str]) -> tuple[Any, int]:
    """Every string in ``value`` masked (its depth was bounded when it was read)."""
    if isinstance(value, str):
        return _mask_text(value, values)
    if isinstance(value, dict):
        pairs = [(k, *_mask_value(v, values)) for k, v in value.items()]
        return {k: v for k, v, _ in pairs}, sum(n for *_, n in pairs)
    if isinstance(value, list):
        items = [_mask_value(v, values) for v in value]
        return [v for v, _ in items], sum(n for _, n in items)
    return value, 0


def _masked(session: Session, values: list[str]) -> tuple[Session, int]:
    query, a = _mask_text(session.query, values)
    messages, b = _mask_value(session.messages, values)
    final, c = _mask_text(session.final, values)
    return Session(session.where, session.name, query, messages, final, session.notes), a + b + c


def _task(task_id: str, session: Session, plan: Plan, source: dict[str, str], masked: int):
    units = session.units
    planted: list[planting.PlantedFact] = []
    if plan.plant:
        units, planted = planting.plant(units, plan.plant, plan.seed, avoid=session.query)
    messages, k = [], 0
    for m in session.messages:
        if m["role"] == "tool":
            m = {**m, "content": units[k]}
            k += 1
        messages.append(m)
    own = plan.named.get(task_id, [])
    if plan.facts_file is not None:
        named.check(plan.facts_file, task_id, own, units, session.query)
    if not planted and not own:
        raise FixtureError(
            session.where,
            None,
            f"nothing to grade in task {task_id}: plant facts (--plant N) or name them (--facts FILE)",
        )
    fields: list[Any] = [*planted, *own]
    names = [f.field for f in fields]
    if len(set(names)) != len(names):
        raise FixtureError(
            plan.facts_file or session.where, task_id, "a named field clashes with a planted one (fact_NN)"
        )
    needles = {f.field: list(f.needles) for f in fields}
    unit_objects = tuple(Unit(i, "", "", {}, text) for i, text in enumerate(units))
    spec = {
        "id": task_id,
        "declared_cohort": structural_cohort(unit_objects, {k: tuple(v) for k, v in needles.items()}),
        "query": session.query,
        "fields": {f.field: f.description for f in fields},
        "expected": {f.field: f.expected for f in fields},
        "unordered_fields": [],
        "needles": needles,
    }
    trajectory = {
        "messages": [
            {"role": "user", "content": session.query},
            *messages,
            {"role": "assistant", "content": session.final, "final": True},
        ]
    }
    made = {
        "made_by": "washexp import",
        "washexp_version": __version__,
        **source,
        "session": session.where,
        "plant": {"n": plan.plant, "seed": plan.seed} if plan.plant else None,
        "facts_file": plan.facts_file.name if plan.facts_file else None,
        "secrets_masked": masked,
        "left_out": list(session.notes),
        "planted": [{k: v for k, v in asdict(f).items() if k not in ("description", "needles")} for f in planted],
    }
    return spec, trajectory, made
