"""The cross-model wash record: measurement x washer x model side by side, and per model tier the
ceiling and the fact-loss by phase, with the minimum ceiling across tiers.

CoalWash publishes Measurements 1 and 2 per model tier and cites the minimum ceiling across tiers;
this record gives both from the per-model records of the same runs
(:func:`washexp.wash.records.measurements.build` with each model), so every figure is that model's own record's:

- washers: muscle kept, fat removed, tokens cut, fact-loss per round, washer token cost (the
  record's "Washers side by side" rows), one row per model;
- tiers: per washer and gauge arm, the ceiling (Measurement 1, min over stores, ``≥`` a lower
  bound) and the infinity loop's fact-loss % by phase (mean over stores); then one row "across
  tiers": the minimum ceiling (exact when an exact value is at or below every lower bound, as
  the per-model record's minimum over stores) and the largest fact-loss of each phase;
- saving: the sawtooth's Δ% per washer and gauge (A's run costs included).
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from washexp import __version__
from washexp.errors import WashexpError
from washexp.export import crossmodel, selection
from washexp.export.records import Column, Record, Table, through
from washexp.tracking.kinds import Kind
from washexp.wash.records import measurements as per_model

ACROSS = "across tiers"
PHASES = (
    ("fact_loss_has_fat_pct", "fact-loss % has-fat"),
    ("fact_loss_fat_exhausted_pct", "fact-loss % fat-exhausted"),
    ("fact_loss_pct", "fact-loss % cumulative"),
)


def build(runs: pd.DataFrame, options) -> Record:
    single = {}
    for model in options.models:
        found = selection.parents(runs, Kind.MEASUREMENT, model=model, sweeps=options.sweeps, until=options.date)
        crossmodel.one_identity(found, model)
        (record,) = per_model.build(runs, dataclasses.replace(options, model=model, models=()))
        single[model] = record
    return _record(options.models, single, options)


def _rows(record: Record, key: str) -> tuple[dict, ...]:
    return next((t.rows for t in record.tables if t.key == key), ())


def _record(models: tuple[str, ...], single: dict[str, Record], options) -> Record:
    position = {m: i for i, m in enumerate(models)}
    washers = [{**r, "model": m} for m in models for r in _rows(single[m], "washers")]
    washers.sort(key=lambda r: (r["measurement"], r["washer"], r["gates"], r["arm"], position[r["model"]]))
    tiers = _tiers(models, single)
    saving = [
        {"washer": r["washer"], "gauge": r["gauge"], "model": m, "feed": r["feed"]}
        | {k: r[k] for k in ("delta_pct", "A_total_with_costs", "B_total")}
        for m in models
        for r in _rows(single[m], "sawtooth")
    ]
    saving.sort(key=lambda r: (r["washer"], r["gauge"], position[r["model"]]))
    if not washers:
        raise WashexpError(f"models {', '.join(models)}: no washer rows to put side by side")
    tables = [_models_table(models, single), _washers_table(washers)]
    if tiers:
        tables.append(_tiers_table(tiers))
    if saving:
        tables.append(_saving_table(saving))
    platforms = {m: str(single[m].provenance["platform"]) for m in models}
    date = max(r.date for r in single.values())
    notes = [
        f"Models side by side: {', '.join(models)}. Each model's figures are those of its own wash record "
        "(results/wash-<platform>-<date>.md), built from the same runs.",
        "Per model tier (CoalWash's Measurements 1 and 2): the ceiling and the fact-loss by phase; the row "
        f"'{ACROSS}' gives the minimum ceiling over the tiers (CoalWash cites it) and each phase's largest fact-loss.",
        per_model.FACT_LOSS,
    ]
    small = [
        f"{m} ({single[m].provenance.get('tier')})"
        for m in models
        if "served model (GGUF, n_ctx, server)" in single[m].provenance
    ]
    if small:
        notes.insert(
            0,
            f"Small-model record: {', '.join(small)} served on this machine washes the stores; it shows that the "
            "harness measures a real model washer end to end and says nothing about how a larger model would wash.",
        )
    for m in models:
        notes += [f"{m}: {n}" for n in single[m].notes if "left out" in n or "newer runs planned" in n]
    provenance = {
        "date": f"{date} (UTC date of the newest covered run)",
        "experiment": options.experiment,
        "washexp version (exporter)": __version__,
        crossmodel.MODELS: list(models),
        "records of each model (same runs)": {m: single[m].stem for m in models},
        "git commit of the runs": sorted({c for r in single.values() for c in r.provenance["git commit of the runs"]}),
        "sweeps (overrides)": crossmodel.merge_sweeps([r.provenance["sweeps (overrides)"] for r in single.values()]),
    }
    return Record(
        topic="wash",
        platform=crossmodel.platform(models, platforms),
        date=date,
        title=f"Wash benchmark across models: {' vs '.join(models)}, {date}",
        provenance=provenance,
        notes=tuple(notes),
        tables=tuple(tables),
        data={"cross_model_washers": washers, "cross_model_tiers": tiers, "cross_model_saving": saving},
    )


def _tiers(models: tuple[str, ...], single: dict[str, Record]) -> list[dict]:
    """Per (washer, gauge arm) and model: ceiling and fact-loss by phase; then the across-tiers row."""
    cells: dict[tuple[str, str], dict[str, dict]] = {}
    for m in models:
        for r in _rows(single[m], "ceiling"):
            if r.get("store") == "CEILING (min)":
                cell = cells.setdefault((r["washer"], r["gauge"]), {}).setdefault(m, {})
                cell |= {"ceiling": r["store_ceiling"], "lower_bound": bool(r["lower_bound"])}
        by_arm: dict[tuple[str, str], list[dict]] = {}
        for r in _rows(single[m], "infinity"):
            by_arm.setdefault((r["washer"], r["gauge"]), []).append(r)
        for key, stores in by_arm.items():
            cell = cells.setdefault(key, {}).setdefault(m, {})
            for phase, _ in PHASES:
                values = [s[phase] for s in stores if s.get(phase) is not None]
                cell[phase] = sum(values) / len(values) if values else None
            cell["stores"] = len(stores)
    out = []
    for (washer, gauge), per in sorted(cells.items()):
        for m in models:
            if m in per:
                out.append({"washer": washer, "gauge": gauge, "model": m, **_blank(), **per[m]})
        out.append({"washer": washer, "gauge": gauge, "model": ACROSS, **_across([per[m] for m in models if m in per])})
        if len(per) < len(models):
            out[-1]["tiers_missing"] = [m for m in models if m not in per]
    return out


def _blank() -> dict:
    return {"ceiling": None, "lower_bound": None, "stores": None, **{p: None for p, _ in PHASES}}


def _across(cells: list[dict]) -> dict:
    exact = [c["ceiling"] for c in cells if c.get("ceiling") is not None and not c["lower_bound"]]
    bound = [c["ceiling"] for c in cells if c.get("ceiling") is not None and c["lower_bound"]]
    low = min([*exact, *bound], default=None)
    is_bound = None if low is None else not exact or (bool(bound) and min(bound) < min(exact))
    out = {**_blank(), "ceiling": low, "lower_bound": is_bound, "tiers": len(cells)}
    for phase, _ in PHASES:
        values = [c[phase] for c in cells if c.get(phase) is not None]
        out[phase] = max(values) if values else None
    return out


def _models_table(models, single) -> Table:
    rows = [
        {
            "model": m,
            "tier": single[m].provenance.get("tier"),
            "platform": single[m].provenance.get("platform"),
            "measurements": ", ".join(single[m].provenance["measurements"]),
            "washers": ", ".join(single[m].provenance["washers"]),
            "record": single[m].stem,
        }
        for m in models
    ]
    return Table("models", "Models (tiers)", tuple(Column(k, k) for k in rows[0]), tuple(rows))


def _washers_table(rows: list[dict]) -> Table:
    return Table(
        "washers_by_model",
        "Measurement x washer x model",
        (
            Column("measurement", "measurement"),
            Column("washer", "washer"),
            Column("gates", "gates"),
            Column("arm", "gauge (arm)"),
            Column("model", "model"),
            Column("stores", "stores"),
            Column("muscle_kept", "muscle kept", lambda r: _of(r["muscle_kept"], r["muscle_total"])),
            Column("fat_removed", "fat removed", lambda r: _of(r["fat_removed"], r["fat_total"])),
            Column("tokens_cut_pct", "tokens cut %", lambda r: _pct(r["tokens_cut_pct"])),
            Column("fact_loss_per_round_pct", "fact-loss % per round", lambda r: _pct(r["fact_loss_per_round_pct"])),
            Column("cost_tokens", "washer token cost", lambda r: _int(r["cost_tokens"])),
        ),
        tuple(rows),
        note="Each model's 'Washers side by side' rows (sums over the stores of a row; sawtooth: arm A), the models "
        "of a row next to each other. n/a: not logged (never 0).",
    )


def _tiers_table(rows: list[dict]) -> Table:
    def ceiling(r):
        if r["ceiling"] is None:
            return "n/a"
        return ("≥" if r["lower_bound"] else "") + f"{r['ceiling']:.0f}"

    return Table(
        "tiers",
        "Per model tier: ceiling (Measurement 1) and fact-loss by phase (Measurement 2)",
        (
            Column("washer", "washer"),
            Column("gauge", "gauge (arm)"),
            Column("model", "model (tier)"),
            Column("ceiling", "ceiling (min over stores)", ceiling),
            *(Column(p, f"{name} (mean over stores)", through(p, _pct)) for p, name in PHASES),
        ),
        tuple(rows),
        note=f"'{ACROSS}': the minimum ceiling over the tiers (≥ when that minimum is a lower bound: no exact ceiling "
        "at or below it) and each phase's largest (worst) fact-loss over the tiers. n/a: the measurement was not run "
        "for that tier.",
    )


def _saving_table(rows: list[dict]) -> Table:
    return Table(
        "saving",
        "Measurement 3: the sawtooth's saving per model",
        (
            Column("washer", "washer"),
            Column("gauge", "gauge"),
            Column("model", "model"),
            Column("feed", "feed"),
            Column("delta_pct", "Δ% = (B − A) / B", lambda r: _pct(r["delta_pct"])),
            Column("A_total_with_costs", "A total + costs", lambda r: _int(r["A_total_with_costs"])),
            Column("B_total", "B always-loaded total", lambda r: _int(r["B_total"])),
        ),
        tuple(rows),
        note="A's total includes its washes' own token cost, as in each model's record.",
    )


def _pct(v) -> str:
    return "n/a" if v is None else f"{v:.1f}%"


def _int(v) -> str:
    return "n/a" if v is None else f"{v:.0f}"


def _of(n, d) -> str:
    if n is None or d is None:
        return "n/a"
    return f"{n:.0f}/{d:.0f}" + (f" ({100.0 * n / d:.1f}%)" if d else "")
