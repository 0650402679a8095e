"""Every measurement of both benchmarks, one module each: the registry.

A measurement is a module in this package named as its config file (``conf/measurement/<name>.yaml``)
that declares ``MEASUREMENT``, a :class:`Measurement`: its family, what runs one Hydra job of it,
the accepted range of each option it reads, its headline metrics and its part of the family's
record. A package installed elsewhere adds one under the ``washexp.measurements`` entry-point group
(:mod:`washexp.plugins`). The registry lists the names without importing anything; a
measurement's module is imported when it is asked for, and what it names (``"module:object"``)
only when that is used. ``docs/guide/plugins.md`` adds one, step by step.
"""

from __future__ import annotations

import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from washexp import plugins
from washexp.errors import ConfigError
from washexp.registry import load, unknown_name


@dataclass(frozen=True)
class Measurement:
    family: str
    """The benchmark it belongs to: ``compaction`` or ``wash``."""
    run: str | Callable
    """What one Hydra job of it runs (a ``"module:function"``, or the function). Compaction:
    ``run_job(cfg, job, sweep)``; wash: ``plan(job: washexp.wash.measure.study.Job) -> Planned``
    (the wash job has checked the washer, gauge, operator and inputs and made the identity)."""
    bounds: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Each option it reads (``<family>.measurement.<key>``) -> its accepted range, low and high
    included; checked before any run (a count of 0 would be a measurement of nothing)."""
    headline: tuple[str, ...] = ()
    """The metrics of its parent run the MLflow UI's runs table shows (``tracking/views.py``)."""
    record: str | Callable | None = None
    """Its part of the family's record (a wash measurement: ``part(parents, kids, context) ->
    washexp.wash.records.measurements.Part``); None: its runs are not in the record."""
    feed: bool = False
    """A wash measurement that reads the growth feed (``wash.feed``) rather than the stores."""
    order: int = 1000
    """Where it comes among its family's measurements (lower first): in the record's tables, the
    headline columns and the ranges checked. A new one comes last unless it says otherwise."""


def _own() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def names(family: str | None = None) -> list[str]:
    """Every measurement's name; of ``family``, in their :attr:`Measurement.order` (their modules
    are then imported)."""
    every = [*_own(), *sorted(set(plugins.installed("measurement")) - set(_own()))]
    if family is None:
        return every
    return sorted((n for n in every if get(n).family == family), key=lambda n: (get(n).order, n))


def get(name: str, family: str | None = None) -> Measurement:
    """The measurement ``name`` (of ``family``: another family's is a usage error naming it)."""
    if name in _own():
        found = load(f"{__name__}.{name}:MEASUREMENT")
    elif name in plugins.installed("measurement"):
        found = plugins.loaded(f"measurement={name}", plugins.installed("measurement")[name].value)
    else:
        raise ConfigError(unknown_name("measurement", name, names()))
    if not isinstance(found, Measurement):
        raise ConfigError(f"measurement={name}: its MEASUREMENT is a {type(found).__name__}, not a Measurement")
    if family is not None and found.family != family:
        raise ConfigError(f"measurement={name} is the {found.family} benchmark's, not {family}'s")
    return found


def use(target: str | Callable) -> Any:
    """What a ``"module:object"`` field names (or the object itself)."""
    return load(target) if isinstance(target, str) else target


def bounds(family: str) -> dict[str, tuple[int, int]]:
    """Every range a family's measurements declare: each option is checked in every job of the
    family (every option enters the identity), by the range of the first measurement declaring it."""
    out: dict[str, tuple[int, int]] = {}
    for name in names(family):
        for key, limits in get(name).bounds.items():
            out.setdefault(key, limits)
    return out


def check_bounds(family: str, node: Any) -> None:
    """One line naming the first option of ``node`` (the job's measurement node) out of range."""
    for key, (low, high) in bounds(family).items():
        if not low <= getattr(node, key) <= high:
            raise ConfigError(f"{key}={getattr(node, key)}: must be from {low} to {high}")


def headlines(family: str) -> list[str]:
    """The headline metrics of a family's measurements, in order, each once."""
    return list(dict.fromkeys(k for name in names(family) for k in get(name).headline))
