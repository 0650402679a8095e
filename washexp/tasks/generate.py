"""Generate compaction tasks in the task format of the fourteen (``fixtures/compaction/README.md``).

Each task is a folder: ``source/`` (the files the agent read), ``collection.yaml`` (one
``read_file`` step per file), ``trajectory.json`` (built from them by the shared builder's
``read_file``, so ``python -m washexp.compaction.inputs.collect --check`` reproduces it), ``task.yaml``
(query, fields, expected, needles, the cohort the study's structural rule gives) and
``generated.json``: how it was made (generator version, the set's parameters, the task's own
target length and units) and, per fact, its kind, whether it supersedes an earlier value or has a
near miss in a backup copy, the unit it sits in and its depth. Never the seed.

A task is a pure function of (parameters, seed, index): the same seed gives the same bytes.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from washexp.compaction.inputs.collect import build, dumps, read_file
from washexp.compaction.inputs.fixtures import Unit, load_task, structural_cohort
from washexp.errors import ConfigError
from washexp.tasks import filler, manifest
from washexp.tasks.facts import KINDS, Fact, plan
from washexp.tasks.planted import THIRDS
from washexp.tokens import count

GENERATOR = "washexp.tasks"
VERSION = "1"
"""Bumped whenever the same parameters and seed would give other bytes."""

LIMITS: dict[str, tuple[float, float]] = {
    "n": (1, 10000),
    "min_tokens": (1000, 65536),
    "max_tokens": (1000, 65536),
    "units": (2, 40),
    "facts": (1, len(KINDS)),
    "superseded": (0.0, 1.0),
    "near": (0.0, 1.0),
}
"""Each parameter's closed range: tool results of about 1k to 64k Qwen tokens."""


@dataclass(frozen=True)
class Params:
    """A set's parameters (the seed is not one: it is the secret of a hidden set)."""

    n: int = 200
    min_tokens: int = 1000
    max_tokens: int = 8000
    units: int = 12
    """Tool results per task (more than masking's M and recency's K of 10 by default)."""
    facts: int = 6
    """Planted facts per task; a set's tasks cycle through the kinds so each kind is as common."""
    superseded: float = 0.3
    """The chance that a fact's value changes during the trajectory (the answer is the last)."""
    near: float = 0.3
    """The chance that a fact has a near miss in a backup copy."""

    def check(self) -> None:
        """Raise :class:`ConfigError` naming the first parameter out of range."""
        for name, (low, high) in LIMITS.items():
            value = getattr(self, name)
            if not low <= value <= high:
                raise ConfigError(f"--{name.replace('_', '-')} {value}: must be within {low:g}..{high:g}")
        if self.min_tokens > self.max_tokens:
            raise ConfigError(f"--min-tokens {self.min_tokens}: above --max-tokens {self.max_tokens}")


QUERIES = (
    "Investigate the {service} incident and keep what a handoff needs: the settings, identifiers and exact lines.",
    "Review the {service} workspace read-only and collect every current setting and anomaly for the on-call notes.",
    "Trace what changed in {service} during the rollout; record the values in effect and the lines that matter.",
)


def task_id(index: int) -> str:
    return f"gen{index:05d}"


def build_task(params: Params, seed: int, index: int, folder: Path) -> None:
    """Write task ``index`` of the set into ``folder`` (which must not exist)."""
    rng = random.Random(f"{seed}:{index}")  # a str seed hashes the same way on every run
    service = rng.choice(filler.SERVICES)
    target = round(math.exp(rng.uniform(math.log(params.min_tokens), math.log(params.max_tokens))))
    kinds = [KINDS[(index * params.facts + j) % len(KINDS)] for j in range(params.facts)]
    taken: set[str] = set()
    facts = [
        plan(rng, "", kind, taken, superseded=rng.random() < params.superseded, near=rng.random() < params.near)
        for kind in kinds
    ]
    facts = [Fact(_field(f), f.kind, f.key, f.value, f.old, f.near) for f in facts]

    files = _files(rng, params.units, service, any(f.near is not None for f in facts))
    plants: dict[int, list[tuple[float, list[str]]]] = {i: [] for i in range(len(files))}
    placed: dict[str, int] = {}
    plain = [i for i, (path, _) in enumerate(files) if not path.endswith(".bak")]
    backups = [i for i, (path, _) in enumerate(files) if path.endswith(".bak")]
    for f in facts:
        unit = rng.choice(plain[1:] if f.old is not None else plain)
        placed[f.field] = unit
        plants[unit].append((rng.random(), f.lines))
        if f.old is not None:  # the old value comes first: an earlier unit
            plants[rng.choice([u for u in plain if u < unit])].append((rng.random(), f.lines_of(f.old)))
        if f.near is not None:
            plants[rng.choice(backups)].append((rng.random(), f.lines_of(f.near)))

    share = target / len(files)
    texts = [_text(rng, kind, share, plants[i]) for i, (_, kind) in enumerate(files)]
    source = folder / "source"
    for (path, _), text in zip(files, texts, strict=True):
        (source / path).parent.mkdir(parents=True, exist_ok=True)
        (source / path).write_text(text, encoding="utf-8")

    query = rng.choice(QUERIES).format(service=service)
    steps = [{"narration": f"Reading {path}.", "read_file": {"path": path}} for path, _ in files]
    report = f"Collection report: read {len(files)} files of the {service} workspace."
    units = tuple(
        Unit(i, f"call_{i + 1:02d}", "read_file", {"path": path}, read_file(source, path))
        for i, (path, _) in enumerate(files)
    )
    needles = {f.field: f.needles for f in facts}
    task = {
        "id": folder.name,
        "declared_cohort": structural_cohort(units, {k: tuple(v) for k, v in needles.items()}),
        "query": query,
        "fields": {f.field: f.description for f in facts},
        "expected": {f.field: f.value for f in facts},
        "unordered_fields": [],
        "needles": needles,
    }
    evidence = "\n".join(u.content for u in units)
    made = {
        "generator": GENERATOR,
        "version": VERSION,
        "parameters": asdict(params),
        "task": {"index": index, "target_tokens": target, "tokens": count(evidence), "units": len(units)},
        "facts": [_where(f, placed[f.field], units, evidence) for f in facts],
    }
    _dump_yaml(folder / "collection.yaml", {"steps": steps, "final_report": report})
    _dump_yaml(folder / "task.yaml", task)
    (folder / "trajectory.json").write_text(dumps(build(folder)), encoding="utf-8")  # the fixtures' own builder
    (folder / "generated.json").write_text(json.dumps(made, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def generate(params: Params, seed: int, out: Path) -> dict:
    """Write the set into ``out`` whole or not at all (built in a sibling temporary folder, then
    renamed), with its manifest; returns the manifest."""
    params.check()
    if out.exists():
        raise ConfigError(f"--out {out}: already exists (a set is written into a new folder)")
    if not out.parent.is_dir():
        raise ConfigError(f"--out {out}: its parent folder does not exist")
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        digests = {}
        for i in range(params.n):
            folder = work / task_id(i)
            folder.mkdir()
            build_task(params, seed, i, folder)
            digests[folder.name] = load_task(folder).digest  # loading proves it parses, cohort and all
        made = manifest.build(GENERATOR, VERSION, asdict(params), digests)
        (work / manifest.NAME).write_text(manifest.dumps(made), encoding="utf-8")
        work.chmod(0o777 & ~_umask())
        work.rename(out)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return made


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _where(f: Fact, unit: int, units: tuple[Unit, ...], evidence: str) -> dict[str, Any]:
    """A fact's place: its unit and its depth, the share of the tool results' text before its
    answer's first line (first, middle or last third)."""
    offset = evidence.index(f.needles[0])
    depth = offset / len(evidence)
    return {
        "field": f.field,
        "kind": f.kind,
        "superseded": f.old is not None,
        "near_miss": f.near is not None,
        "unit": unit,
        "depth": round(depth, 4),
        "third": THIRDS[min(2, int(depth * 3))],
    }


def _field(f: Fact) -> str:
    return f.key.rstrip(":").lower() + "_line" if f.kind == "line" else f.key


def _files(rng: random.Random, n: int, service: str, backup: bool) -> list[tuple[str, str]]:
    """(path, kind) per unit, in reading order; with ``backup``, one unit is the backup copy of
    a config read before it (a near miss's place)."""
    files = [
        (filler.path_for(rng, kind, service, i), kind) for i, kind in enumerate(rng.choices(filler.FILE_KINDS, k=n))
    ]
    if backup:
        at = rng.randrange(1, n)
        files[at] = (filler.backup_path(files[at - 1][0]), "config")
    return files


def _text(rng: random.Random, kind: str, tokens: float, plants: list[tuple[float, list[str]]]) -> str:
    """A file of ``kind`` of about ``tokens`` Qwen tokens of filler, with each planted block
    inserted whole at its relative place."""
    lines: list[str] = []
    spent = 0
    while spent < tokens or not lines:
        lines.append(filler.line(rng, kind, len(lines)))
        spent += count(lines[-1]) + 3  # the line number read_file puts before it, and the newline
    for at, block in sorted(plants, key=lambda p: p[0], reverse=True):  # from the end: earlier places stay put
        i = round(at * len(lines))
        lines[i:i] = block
    return "\n".join(lines) + "\n"


def _dump_yaml(path: Path, data: dict) -> None:
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10_000), encoding="utf-8")
