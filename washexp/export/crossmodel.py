"""Which models a cross-model record puts side by side, and what the record is named.

``washexp export --models a,b`` (or an export that finds several models) writes one
record with the models side by side; each family builds its own (``benchmarks.CROSS_RECORDS``)
from the per-model records of the same runs, so a figure in it is the figure of that model's own
record. Every model asked for must have runs of the family's parent kind after the filters
(``--sweep``, ``--date``): a model the store lacks is a usage error, never an empty column.
"""

from __future__ import annotations

import re

import pandas as pd

from washexp.errors import ConfigError, WashexpError
from washexp.export import selection
from washexp.tracking.kinds import Kind

PARENT_KIND = {"compaction": Kind.ARM, "wash": Kind.MEASUREMENT}
"""The run kind that names a model's part of a record, per topic."""

MODELS = "models (in the order given)"
"""The provenance key of a cross-model record's models: what its bundle rebuilds it from."""


def parse_models(text: str) -> tuple[str, ...]:
    """``a,b`` -> ``("a", "b")``: at least two distinct names, in the order given."""
    names = tuple(n.strip() for n in text.split(","))
    if any(not n for n in names):
        raise ConfigError(f"--models {text!r}: an empty model name")
    if len(set(names)) != len(names):
        raise ConfigError(f"--models {text!r}: a model is named twice")
    if len(names) < 2:
        raise ConfigError(f"--models {text!r}: name two models or more (one model's record: --model)")
    return names


def models_in(runs: pd.DataFrame, topic: str, options) -> list[str]:
    """The models with parent runs after the filters, sorted."""
    found = selection.parents(runs, PARENT_KIND[topic], sweeps=options.sweeps, until=options.date)
    return sorted({str(m) for m in selection.tag(found, "model").dropna()})


def check_present(runs: pd.DataFrame, topic: str, options) -> None:
    """Every model of ``options.models`` has runs after the filters, or a one-line usage error."""
    there = models_in(runs, topic, options)
    absent = [m for m in options.models if m not in there]
    if absent:
        scope = " of the chosen sweeps" if options.sweeps else ""
        scope += f" up to {options.date}" if options.date else ""
        raise ConfigError(
            f"--models: no {topic} runs{scope} of model {', '.join(absent)} in {options.uri} "
            f"(models there: {', '.join(there) or 'none'})"
        )


def one_identity(parents: pd.DataFrame, model: str) -> None:
    """A model name must stand for one backend and platform: ``model=reference,openai model.name=x``
    names both presets ``x``, and their figures must not be read as one model's."""
    for col in ("params.backend", "params.platform"):
        seen = sorted({str(v) for v in parents[col].dropna()}) if col in parents.columns else []
        if len(seen) > 1:
            raise WashexpError(
                f"model {model!r} names runs of several {col.removeprefix('params.')}s ({', '.join(seen)}): "
                "give each preset its own model.name"
            )


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


def platform(models: tuple[str, ...], platforms: dict[str, str]) -> str:
    """The record's platform label: ``cross-model-`` and each model's platform when they differ,
    else each model's name, joined by ``+`` in the order given."""
    names = [platforms[m] for m in models] if len(set(platforms.values())) == len(models) else list(models)
    return "cross-model-" + "+".join(slug(n) for n in names)


def merge_sweeps(each: list[dict[str, str]]) -> dict[str, str]:
    """The per-model records' ``sweeps (overrides)`` as one: a sweep's jobs of every model."""
    out: dict[str, set[str]] = {}
    for sweeps in each:
        for sweep, jobs in sweeps.items():
            out.setdefault(sweep, set()).update(jobs.split("; "))
    return {sweep: "; ".join(sorted(jobs)) for sweep, jobs in sorted(out.items())}
