"""The wash record: the three measurements, per washer and gauge, with every muscle loss named.

Per (model, measurement, washer, gauge, operator, gates) the newest FINISHED measurement run wins;
its stores (or sawtooth arms) are the runs under it. Per-round figures and named losses come from
each store run's ``rounds.json`` artifact, the sawtooth's from ``sessions.json``. A record per
model and platform: ``results/wash-<platform>-YYYY-MM-DD.md`` + ``.json`` + the sawtooth plot.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pandas as pd

from washexp import __version__, measurements
from washexp.errors import WashexpError
from washexp.export import plots, selection
from washexp.export.records import Column, Plot, Record, Table
from washexp.export.run_facts import run_facts
from washexp.export.spend import PREFIX as ROLE_METRICS
from washexp.export.spend import role_spend
from washexp.tracking.kinds import KIND_TAG, Kind, MeasurementRun
from washexp.tracking.reader import json_artifact
from washexp.wash.coalwash import ported
from washexp.wash.measure.fidelity import FIDELITY
from washexp.wash.measure.summary import fact_loss_pct
from washexp.wash.records import fidelity as record_fidelity
from washexp.wash.records.washers import washers_table

KEYS = ["model", "measurement", "washer", "gauge", "operator", "gates"]
REFERENCE_HEADLINE = (
    "Reference washer: a labelled, deterministic rule-based baseline (near-duplicate paragraphs, "
    "hedging phrases, done/superseded markers, scratch files), not a model. It never reads the "
    "ground truth; its losses show what the gates and the operator let through."
)

MODEL_WASHERS = {
    "coalwash": "coalwash: CoalWash's full tier through the model: an outsider flags (file · line-range · class · "
    "reason), the insider accepts, shrinks, rejects (keeps.json) or sends a contradiction to the human; every shrink "
    "gets a second outsider check. Its prompts' sha256 are in each run's identity; its token cost is the endpoint's.",
    "plain": "plain: the control without CoalWash: one call per file ('compress this memory file, keep every fact'), "
    "the reply written back, run with the gates off.",
}


FACT_LOSS = (
    "Fact-loss % cumulative: the muscle needles lost at any round so far over the muscle total (a needle a later "
    "round restores still counts); split by the phase of the round that lost it. Missing now %: the needles absent "
    "from the store as it is (score.mjs's lossPct)."
)

LOCAL_NOTE = (
    "A small model served on this machine ({model}, {tier}) washes the stores: the record shows that the harness "
    "measures a real model washer end to end (real plans, gated, applied and scored as any washer's); it says "
    "nothing about how a larger model would wash."
)


def _served(parents: pd.DataFrame) -> list[dict]:
    """What each local model that washed was (``params.served``: GGUF sha256, n_ctx, server version)."""
    if "params.served" not in parents:
        return []
    return [json.loads(v) for v in sorted({str(v) for v in parents["params.served"].dropna()})]


_tag = selection.tag
_value = selection.value


def build(runs: pd.DataFrame, options) -> list[Record]:
    """Which runs: :mod:`washexp.export.selection`, keyed per measurement by :data:`KEYS`; its
    children are the store (or sawtooth arm) runs it planned, each (store, gauge arm) once."""
    found = selection.parents(runs, Kind.MEASUREMENT, model=options.model, sweeps=options.sweeps, until=options.date)
    for k in KEYS:
        found[k] = selection.tag(found, k)
    recorded = [n for n in measurements.names("wash") if measurements.get(n).record is not None]
    found = found[found["measurement"].isin(recorded)]  # a measurement without a record part is not in it
    children = selection.children(runs, found["run_id"], (Kind.WASH_STORE, Kind.WASH_ARM, Kind.WASH_FIDELITY))
    children["planned"] = list(zip(selection.tag(children, "store"), selection.tag(children, "arm"), strict=True))
    parents, notes = selection.newest_complete_per_model(found, children, KEYS, "planned")
    if parents.empty:
        raise WashexpError("no finished wash measurement runs match the filters (model, sweep, date)")
    records = []
    for model, group in parents.groupby("model", sort=True):
        kids = children[children["parent"].isin(group["run_id"])]
        records.append(_record(str(model), group, kids, options, tuple(notes.get(model, ()))))
    return records


def _record(model: str, parents: pd.DataFrame, kids: pd.DataFrame, options, left_out: tuple[str, ...]) -> Record:
    first = parents.iloc[0]
    platform = first.get("params.platform") or "reference"
    times = pd.concat([parents["end_time"], kids["end_time"]]).dropna()
    date = times.max().tz_convert("UTC").strftime("%Y-%m-%d")
    tables, losses = [], []
    plots_out: list[Plot] = []
    folded: list[Table] = []
    stem = f"wash-{platform}-{date}"
    older = parents[~parents["measurement"].isin(FIDELITY)]
    if len(older):
        tables.append(washers_table(older, kids, lambda run_id: json_artifact(options.uri, run_id, "final-score.json")))
    instructions: dict[str, str] = {}
    context = Context(options.uri, stem)
    for name in measurements.names("wash"):  # each measurement's own tables, in the registry's order
        own, builder = parents[parents["measurement"] == name], measurements.get(name).record
        if len(own) and builder is not None:
            part: Part = measurements.use(builder)(own, kids, context)
            tables += part.tables
            folded += part.folded
            plots_out += part.plots
            instructions |= part.instructions
    if instructions:
        tables.append(record_fidelity.instructions_table(instructions))
    cost = _cost_table(parents)
    if cost is not None:
        tables.append(cost)
    if (spent := role_spend(parents, kids, options.uri)) is not None:  # runs since calls were counted (issue 49)
        tables.append(spent)
    for _, kid in kids[kids[f"tags.{KIND_TAG}"] == Kind.WASH_STORE].iterrows():
        for rd in json_artifact(options.uri, kid["run_id"], "rounds.json") or []:
            for lost in rd.get("lost_now", []):
                cut = (
                    "; ".join(
                        f"{c['tier']} {c['op']} {c['file']}:{c.get('start')}-{c.get('end')} ({c['cls']}: {c['reason']})"
                        for c in lost["cut_by"]
                    )
                    or "a rewrite (no deleted item held it)"
                )
                losses.append(
                    {
                        "measurement": kid.get("tags.measurement"),
                        "washer": _who(kid.get("tags.washer"), kid.get("tags.gates")),
                        "gauge": f"{kid.get('tags.gauge')} ({kid.get('tags.arm')})",
                        "store": kid.get("tags.store"),
                        "round": rd["round"],
                        "id": lost["id"],
                        "needle": lost["needle"],
                        "cut_by": cut,
                    }
                )
    losses.sort(key=lambda r: (r["measurement"], r["washer"], r["gauge"], r["store"], r["round"], r["id"]))
    tables.append(
        Table(
            "muscle_losses",
            "Muscle losses, named",
            tuple(
                Column(k, k.replace("_", " "))
                for k in ("measurement", "washer", "gauge", "store", "round", "id", "needle", "cut_by")
            ),
            tuple(losses),
            note="Every muscle needle lost, the round it went and the plan item whose text held it.",
        )
    )
    served = _served(parents)
    notes = [
        REFERENCE_HEADLINE
        if set(parents["washer"]) == {"reference"}
        else f"Washers: {', '.join(sorted(set(parents['washer'])))}.",
        *[MODEL_WASHERS[w] for w in sorted(set(parents["washer"])) if w in MODEL_WASHERS],
        *([LOCAL_NOTE.format(model=model, tier=first.get("params.tier"))] if served else []),
        "Scratch copies only; every round is scored by the port of CoalWash's score.mjs (whitespace-normalized exact "
        "matching). The operator is the seed's: it approves fat deletes and refuses any cut that holds muscle.",
        *(
            [
                "gates off (the plain-compress control, or any washer run with gates=false): no fidelity gate, no "
                "keeps, no LEAN stop; the operator still sees every delete. Its washer is named '<washer> (gates off)'."
            ]
            if not all(MeasurementRun.parse("gates", g) for g in parents["gates"])
            else []
        ),
        "Gauge arm 'off' shows what the washer alone does; 'configured' is the named CoalWash gauge. A gauge that "
        "never arms on a store whose fat is only semantic is reported as such (its rounds stop at LEAN).",
        *([record_fidelity.NOTE] if set(parents["measurement"]) & set(FIDELITY) else []),
        *left_out,
    ]
    provenance = {
        "date": f"{date} (UTC date of the newest covered run)",
        "experiment": options.experiment,
        "washexp version (exporter)": __version__,
        "git commit of the runs": sorted({str(v) for v in _tag(parents, "mlflow.source.git.commit").dropna()}),
        "source sha256 of the runs": sorted({str(v) for v in _tag(parents, "washexp.source").dropna()}),
        **run_facts(parents),
        "model": model,
        **({"served model (GGUF, n_ctx, server)": served} if served else {}),
        "model per seat that made a call": _seats(kids, model),
        "CoalWash release each ported part follows": _releases(parents, kids),
        "tier": first.get("params.tier"),
        "platform": platform,
        "measurements": sorted(set(parents["measurement"])),
        "washers": sorted(set(parents["washer"])),
        "gauges": sorted(set(parents["gauge"])),
        "operator": sorted(set(parents["operator"])),
        "gates": sorted(set(parents["gates"])),
        "store sha256": _by_tag(kids, "store", "washexp.sha256.fixture"),
        "feed sha256": _by_tag(kids, "feed", "washexp.sha256.feed"),
        "sweeps (overrides)": selection.sweeps(_tag(parents, "sweep"), _tag(parents, "washexp.overrides")),
    }
    return Record(
        topic="wash",
        platform=platform,
        date=date,
        title=f"Wash benchmark: {model} ({platform}), {date}",
        provenance=provenance,
        notes=tuple(notes),
        tables=tuple(tables),
        plots=tuple(plots_out),
        appendix=(*folded, _runs_table(parents, kids)),
        data=_compare_data(kids, options.uri),
    )


@dataclass(frozen=True)
class Context:
    """What a measurement's part of the record reads beside its runs."""

    uri: str
    """The tracking store its artifacts are read from."""
    stem: str
    """The record's file stem (``wash-<platform>-<date>``): its plots are named after it."""

    def read(self, run_id: str, path: str):
        return json_artifact(self.uri, run_id, path)


@dataclass(frozen=True)
class Part:
    """A measurement's part of the wash record (its :attr:`Measurement.record` returns one)."""

    tables: tuple[Table, ...] = ()
    folded: tuple[Table, ...] = ()
    """Tables in the appendix."""
    plots: tuple[Plot, ...] = ()
    instructions: dict[str, str] = field(default_factory=dict)
    """Each arm -> what it was told (the fidelity measurements' instructions table)."""


def ceiling_part(parents: pd.DataFrame, kids: pd.DataFrame, context: Context) -> Part:
    return Part(tables=(_ceiling(parents, kids),))


def infinity_part(parents: pd.DataFrame, kids: pd.DataFrame, context: Context) -> Part:
    summary_table, per_round, leaks = _infinity(parents, kids, context.uri)
    return Part(tables=(summary_table,), folded=(per_round, leaks))


def sawtooth_part(parents: pd.DataFrame, kids: pd.DataFrame, context: Context) -> Part:
    table, plot = _sawtooth(parents, kids, context.uri, context.stem)
    return Part(tables=(table,), plots=(plot,))


def controlled_part(parents: pd.DataFrame, kids: pd.DataFrame, context: Context) -> Part:
    shown, raw_runs, plot, told = record_fidelity.controlled_tables(parents, kids, context.read, context.stem)
    return Part(tables=tuple(shown), folded=(raw_runs,), plots=(plot,), instructions=told)


def chain_part(parents: pd.DataFrame, kids: pd.DataFrame, context: Context) -> Part:
    shown, plot, told = record_fidelity.chain_tables(parents, kids, context.read, context.stem)
    return Part(tables=tuple(shown), plots=(plot,), instructions=told)


def _compare_data(kids: pd.DataFrame, uri: str) -> dict[str, list]:
    """What ``washexp compare`` reads: per store run and round, the muscle needles lost so far
    (cumulative, as the scorer lists them), and each store's muscle needles by id."""
    rounds: list[dict] = []
    muscle: dict[str | None, dict] = {}  # by the run's store tag
    for _, kid in kids[kids[f"tags.{KIND_TAG}"] == Kind.WASH_STORE].iterrows():
        store = kid.get("tags.store")
        needles, scored = (
            json_artifact(uri, kid["run_id"], "muscle.json"),
            json_artifact(uri, kid["run_id"], "rounds.json"),
        )
        if kid["status"] == "FINISHED" and (needles is None or scored is None):  # compare would be blind to it
            raise WashexpError(f"store run {kid['run_id']} ({store}): FINISHED without muscle.json and rounds.json")
        muscle[store] = needles or muscle.get(store, {})
        for rd in scored or []:
            if rd.get("score") is None:
                continue
            rounds.append(
                {
                    "measurement": kid.get("tags.measurement"),
                    "washer": _who(kid.get("tags.washer"), kid.get("tags.gates")),
                    "gauge": f"{kid.get('tags.gauge')} ({kid.get('tags.arm')})",
                    "store": store,
                    "round": rd["round"],
                    "lost": list(rd["score"]["muscle"]["lost"]),
                }
            )
    rounds.sort(key=lambda r: (r["measurement"], r["washer"], r["gauge"], r["store"], r["round"]))
    return {"wash_rounds": rounds, "wash_muscle": [{"store": s, "needles": n} for s, n in sorted(muscle.items())]}


def _seats(kids: pd.DataFrame, model: str) -> dict[str, str]:
    """Per washer, each seat whose runs made a model call -> the model; a washer whose runs made
    none is named as such. A seat's calls are ``calls/<seat>`` (a wash's own seats) or
    ``role/wash <seat>/calls`` (every call a run made, the controlled and chain experiments' gated and
    plain arms included: those log no ``calls/``)."""
    out = {}
    for washer, runs in kids.groupby(_tag(kids, "washer"), sort=True):
        seats = sorted({seat for col in runs.columns if (seat := _seat(col)) and runs[col].fillna(0).sum() > 0})
        for seat in seats:
            out[f"{washer}: {seat}"] = model
        if not seats:
            out[str(washer)] = "no model call (rule-based)" if washer == "reference" else "no model call recorded"
    return out


def _seat(column: str) -> str | None:
    """The seat a calls column counts (None: not a calls column)."""
    if column.startswith("metrics.calls/"):
        return column.removeprefix("metrics.calls/")
    if column.startswith(f"{ROLE_METRICS}wash ") and column.endswith("/calls"):
        return column.removeprefix(f"{ROLE_METRICS}wash ").removesuffix("/calls")
    return None


def _releases(parents: pd.DataFrame, kids: pd.DataFrame) -> dict[str, str]:
    """Each ported part -> the CoalWash release(s) the runs name (``coalwash.*`` tags)."""
    runs = pd.concat([parents, kids])
    out = {}
    for part in ported.PARTS:
        named = sorted({str(v) for v in _tag(runs, ported.tag(part)).dropna()})
        out[part] = "; ".join(named) or "not recorded (runs made before wash runs named it)"
    return out


def _by_tag(kids: pd.DataFrame, name: str, digest: str) -> dict[str, str]:
    """name -> digest over the runs that carry both tags (sorted; absent tags are NaN in pandas)."""
    pairs = zip(_tag(kids, name), _tag(kids, digest), strict=True)
    return dict(sorted((n, d) for n, d in pairs if isinstance(n, str) and isinstance(d, str)))


def _ceiling(parents: pd.DataFrame, kids: pd.DataFrame) -> Table:
    rows = []
    for _, p in parents.iterrows():
        for _, k in kids[kids["parent"] == p["run_id"]].drop_duplicates("tags.store").iterrows():
            first_bad = _value(k, "first_bad_round")
            rows.append(
                {
                    "washer": _who(p["washer"], p["gates"]),
                    "gauge": f"{p['gauge']} ({k.get('tags.arm')})",
                    "store": k.get("tags.store"),
                    "rounds": _value(k, "rounds"),
                    "rounds_planned": _value(k, "rounds_planned"),
                    "dry_stop_after": _value(k, "dry_stop_after"),
                    "first_bad_round": first_bad or None,
                    "store_ceiling": _value(k, "store_ceiling"),
                    "lower_bound": bool(_value(k, "store_ceiling_lower_bound")),
                    "muscle_lost": _value(k, "muscle_lost"),
                    "fat_removed_pct": _value(k, "fat_removed_pct"),
                    "status": k["status"],
                    # runs since rounds were told apart (issue 49); earlier records keep their keys
                    **(
                        {"rounds_copied": copied, "cost_tokens_idle": _value(k, "cost_tokens_idle")}
                        if (copied := _value(k, "rounds_copied")) is not None
                        else {}
                    ),
                }
            )
        for arm in ("off", "configured"):
            c = _value(p, f"{arm}/ceiling")
            if c is not None:
                exact, bound = _value(p, f"{arm}/ceiling_exact_min"), _value(p, f"{arm}/ceiling_bound_min")
                is_bound = bool(_value(p, f"{arm}/ceiling_lower_bound"))
                if exact is not None and bound is not None:
                    apart = f"exact {_int(exact)}; lower bounds ≥{_int(bound)}"
                else:
                    apart = "every store exact" if bound is None else "every store a lower bound"
                rows.append(
                    {
                        "washer": _who(p["washer"], p["gates"]),
                        "gauge": f"{p['gauge']} ({arm})",
                        "store": "CEILING (min)",
                        "store_ceiling": c,
                        "lower_bound": is_bound,
                        "exact_min": exact,
                        "bound_min": bound,
                        "ceiling": f"{'≥' if is_bound else ''}{c:.0f} ({apart})",
                    }
                )
    cols: tuple[Column, ...] = (
        Column("washer", "washer"),
        Column("gauge", "gauge (arm)"),
        Column("store", "store"),
        Column("rounds", "rounds run", _rounds_run),
        Column(
            "first_bad_round",
            "first bad round",
            lambda r: (
                _int(r.get("first_bad_round")) if r.get("first_bad_round") else ("none" if r.get("rounds") else "")
            ),
        ),
        Column(
            "store_ceiling",
            "ceiling",
            lambda r: (
                r.get("ceiling")
                or (("≥" if r.get("lower_bound") else "") + _int(r.get("store_ceiling")))
                + (f", stopped after {_int(r['dry_stop_after'])} dry rounds" if r.get("dry_stop_after") else "")
            ),
        ),
        Column("muscle_lost", "muscle lost", lambda r: _int(r.get("muscle_lost"))),
        Column("fat_removed_pct", "fat removed %", lambda r: _pct(r.get("fat_removed_pct"))),
    )
    note = (
        "Every store runs all its rounds with no rest (the seed); an early stop is a user's option "
        "(dry_stop) and is then printed beside the store's ceiling. A bad round loses any muscle needle, or changes a "
        "no-fat store. Ceiling = min over stores of (first bad round - 1); '≥' when a store had no bad round within "
        "the rounds run (a lower bound). The minimum keeps exact values and lower bounds apart: it is exact when an "
        "exact value is at or below every lower bound."
    )
    if any(r.get("rounds_copied") is not None for r in rows):  # runs since rounds were told apart (issue 49)
        note += (
            " A round that copies an earlier one started from the same store, heard the same words from the washer "
            "and ended the same: one observation again, not a new one (a model washer samples each round, so its "
            "rounds are draws)."
        )
        cols += (
            Column("rounds_copied", "rounds that copy an earlier one", lambda r: _int(r.get("rounds_copied"))),
            Column(
                "cost_tokens_idle",
                "washer tokens on rounds that changed nothing",
                lambda r: _int(r.get("cost_tokens_idle")),
            ),
        )
    return Table(
        "ceiling",
        "Measurement 1: the consecutive-run ceiling",
        cols,
        tuple(rows),
        note=note,
    )


def _infinity(parents: pd.DataFrame, kids: pd.DataFrame, uri: str) -> tuple[Table, Table, Table]:
    rows, per_round, leaks = [], [], []
    for _, p in parents.iterrows():
        for _, k in kids[kids["parent"] == p["run_id"]].iterrows():
            lean, nothing = _value(k, "post_exhaustion_stopped_at_lean"), _value(k, "post_exhaustion_applied_nothing")
            rows.append(
                {
                    "washer": _who(p["washer"], p["gates"]),
                    "gauge": f"{p['gauge']} ({k.get('tags.arm')})",
                    "store": k.get("tags.store"),
                    "phase_boundary_round": _value(k, "phase_boundary_round") or None,
                    "fact_loss_has_fat_pct": _value(k, "fact_loss_has_fat_pct"),
                    "fact_loss_fat_exhausted_pct": _value(k, "fact_loss_fat_exhausted_pct"),
                    "fact_loss_pct": _value(k, "fact_loss_pct"),
                    "missing_now_pct": _value(k, "missing_now_pct"),
                    "fat_removed_pct": _value(k, "fat_removed_pct"),
                    "post_exhaustion_stopped_at_lean": None if lean is None else bool(lean),
                    "post_exhaustion_applied_nothing": None if nothing is None else bool(nothing),
                }
            )
            leaked = json_artifact(uri, k["run_id"], "leaks.json") or []
            if leaked:
                leaks.append(
                    {
                        "washer": _who(p["washer"], p["gates"]),
                        "gauge": f"{p['gauge']} ({k.get('tags.arm')})",
                        "store": k.get("tags.store"),
                        "rounds": [x["round"] for x in leaked],
                        "reached": sorted({_reached(x) for x in leaked}),
                        "proposed": sum(x["proposed"] for x in leaked),
                        "refused": sum(x["refused"] for x in leaked),
                        "applied": sum(x["applied"] for x in leaked),
                    }
                )
            for rd in json_artifact(uri, k["run_id"], "rounds.json") or []:
                score = rd.get("score") or {}
                total = (score.get("muscle") or {}).get("total")
                per_round.append(
                    {
                        "washer": _who(p["washer"], p["gates"]),
                        "gauge": f"{p['gauge']} ({k.get('tags.arm')})",
                        "store": k.get("tags.store"),
                        "round": rd["round"],
                        "phase": rd["phase"],
                        "lost_this_round": len(rd.get("lost_now", [])),
                        "fact_loss_cum": None if not score else fact_loss_pct(rd["lost_so_far"], total),
                        "missing_now": (score.get("muscle") or {}).get("lossPct"),
                        "fat_removed": (score.get("fat") or {}).get("removalPct"),
                        "failed": rd.get("failed"),
                    }
                )
    cols = (
        Column("washer", "washer"),
        Column("gauge", "gauge (arm)"),
        Column("store", "store"),
        Column(
            "phase_boundary_round", "fat exhausted at round", lambda r: _int(r.get("phase_boundary_round")) or "never"
        ),
        Column("fact_loss_has_fat_pct", "fact-loss % has-fat", lambda r: _pct(r.get("fact_loss_has_fat_pct"))),
        Column(
            "fact_loss_fat_exhausted_pct",
            "fact-loss % fat-exhausted",
            lambda r: _pct(r.get("fact_loss_fat_exhausted_pct")),
        ),
        Column("fact_loss_pct", "fact-loss % cumulative", lambda r: _pct(r.get("fact_loss_pct"))),
        Column("missing_now_pct", "missing now % (last round)", lambda r: _pct(r.get("missing_now_pct"))),
        Column("fat_removed_pct", "fat removed %", lambda r: _pct(r.get("fat_removed_pct"))),
        Column("post_exhaustion_stopped_at_lean", "post-exhaustion rounds stopped at LEAN"),
        Column("post_exhaustion_applied_nothing", "post-exhaustion rounds applied nothing"),
    )
    round_cols = (
        *(Column(k, k.replace("_", " ")) for k in ("washer", "gauge", "store", "round", "phase", "lost_this_round")),
        Column("fact_loss_cum", "fact-loss % cumulative", lambda r: _pct(r["fact_loss_cum"]).removesuffix("%")),
        Column("missing_now", "missing now %"),
        Column("fat_removed", "fat removed %"),
        Column("failed", "failed"),
    )
    return (
        Table(
            "infinity",
            "Measurement 2: infinity-loop fact-loss by phase",
            cols,
            tuple(rows),
            note="Phase boundary: the first round that starts with no planted fat left. " + FACT_LOSS + " "
            "Stopped at LEAN (the seed's structural target): every fat-exhausted round's receipt stopped before the "
            "quick tier and the washer made no call; a gauge-off arm has no LEAN band, so it reads 'no'. Applied "
            "nothing: no fat-exhausted round changed the store (a round can apply nothing and still reach the washer). "
            "Every fat-exhausted round past LEAN is listed by round below (the hardening backlog).",
        ),
        Table(
            "infinity_rounds",
            "Measurement 2, per round (fact-loss % cumulative; missing now %, fat removed % as score.mjs prints them)",
            round_cols,
            tuple(per_round),
        ),
        Table(
            "infinity_leaks",
            f"Measurement 2, post-exhaustion rounds past LEAN, by round (hardening backlog; {len(leaks)} store runs)",
            (
                *(Column(c, c) for c in ("washer", "gauge", "store")),
                Column("rounds", "rounds", lambda r: ", ".join(map(str, r["rounds"]))),
                Column("reached", "reached", lambda r: "; ".join(r["reached"])),
                *(Column(c, c) for c in ("proposed", "refused", "applied")),
            ),
            tuple(leaks),
            note="Per store run: the fat-exhausted rounds that did not stop at LEAN, the band each read and the tiers "
            "it reached, and the items proposed, refused by the operator and applied over those rounds.",
        ),
    )


ARM_LEGEND = {"A": "A: washed when the gauge fires", "B": "B: never washed"}
"""What each sawtooth arm is, in the plot's legend."""


def _sawtooth(parents: pd.DataFrame, kids: pd.DataFrame, uri: str, stem: str) -> tuple[Table, Plot]:
    rows, series = [], {}
    for _, p in parents.iterrows():
        arms = kids[kids["parent"] == p["run_id"]]
        feed = next(iter(arms.get("tags.feed", pd.Series(dtype=object)).dropna()), None)
        rows.append(
            {
                "washer": _who(p["washer"], p["gates"]),
                "gauge": p["gauge"],
                "feed": feed,
                "feed_sha256": next(iter(arms.get("tags.washexp.sha256.feed", pd.Series(dtype=object)).dropna()), None),
                "A_total": _value(p, "A/total"),
                "A_run_costs": _value(p, "A/run_costs"),
                "A_total_with_costs": _value(p, "A/total_with_costs"),
                "A_cost_usd": next(
                    (selection.value(a, "cost_usd") for _, a in arms.iterrows() if a.get("tags.arm") == "A"), None
                ),
                "B_total": _value(p, "B/total"),
                "delta_pct": _value(p, "delta_pct"),
                "A_washes": _value(p, "A/washes"),
                "A_muscle": f"{_int(_value(p, 'A/muscle_kept'))}/{_int(_value(p, 'A/muscle_total'))}",
            }
        )
        for _, arm in arms.iterrows():
            sessions = json_artifact(uri, arm["run_id"], "sessions.json") or []
            who = ARM_LEGEND.get(arm.get("tags.arm"), f"arm {arm.get('tags.arm')}")
            series[f"{who} · {_who(p['washer'], p['gates'])} · gauge {p['gauge']}"] = [
                (s["session"], s["always_loaded"]) for s in sessions
            ]
    priced = any(r["A_cost_usd"] is not None for r in rows)
    cols = (
        Column("washer", "washer"),
        Column("gauge", "gauge"),
        Column("feed", "feed"),
        Column("A_total", "A always-loaded total", lambda r: _int(r.get("A_total"))),
        Column("A_run_costs", "A run costs", lambda r: _int(r.get("A_run_costs"))),
        Column("A_total_with_costs", "A total + costs", lambda r: _int(r.get("A_total_with_costs"))),
        *((Column("A_cost_usd", "A run costs (USD)", lambda r: _usd(r.get("A_cost_usd"))),) if priced else ()),
        Column("B_total", "B always-loaded total", lambda r: _int(r.get("B_total"))),
        Column("delta_pct", "Δ% = (B − A) / B", lambda r: _pct(r.get("delta_pct"))),
        Column("A_washes", "A washes", lambda r: _int(r.get("A_washes"))),
        Column("A_muscle", "A muscle kept at the end"),
        Column("feed_sha256", "feed sha256"),
    )
    table = Table(
        "sawtooth",
        "Measurement 3: sawtooth vs bloat",
        cols,
        tuple(rows),
        note="Always-loaded = the index + governance files (caliper estimate, ~est tokens) after each session. "
        "A washes exactly when its gauge fires; B never. A's total includes its washes' own token cost"
        + (", in money too: A run costs (USD), the live calls at the configured endpoint.price." if priced else "."),
    )
    plot = Plot(
        f"{stem}-sawtooth.png",
        "always-loaded tokens per session, arm A (wash when the gauge fires) and arm B (never)",
        plots.lines(
            series, "session", "always-loaded ~est tokens", "Sawtooth vs bloat: always-loaded tokens a session"
        ),
    )
    return table, plot


def _cost_table(parents: pd.DataFrame) -> Table | None:
    """What each measurement's model calls cost (its runs' ``cost_usd``, ``calls_live``,
    ``calls_replayed``); None when no measurement counted calls (no model washer)."""
    rows = [
        {
            "measurement": p["measurement"],
            "washer": _who(p["washer"], p["gates"]),
            "gauge": p["gauge"],
            "cost_usd": selection.value(p, "cost_usd"),
            "calls_live": selection.value(p, "calls_live"),
            "calls_replayed": selection.value(p, "calls_replayed"),
            "run_id": p["run_id"],
        }
        for _, p in parents.iterrows()
        if selection.value(p, "calls_live") is not None
    ]
    if not rows:
        return None
    cols = (
        Column("measurement", "measurement"),
        Column("washer", "washer"),
        Column("gauge", "gauge"),
        Column("cost_usd", "cost (USD)", lambda r: _usd(r["cost_usd"])),
        Column("calls_live", "live calls", lambda r: _int(r["calls_live"])),
        Column("calls_replayed", "replayed calls", lambda r: _int(r["calls_replayed"])),
        Column("run_id", "measurement run"),
    )
    return Table(
        "cost",
        "Cost of the model calls, per measurement",
        cols,
        tuple(rows),
        note="Cost: the money of the live calls at the configured endpoint.price (n/a: no price, or a reply "
        "without usage); a replayed call is free and counted apart.",
    )


def _usd(v) -> str:
    return "n/a" if v is None else f"{v:.6f}"


def _runs_table(parents: pd.DataFrame, kids: pd.DataFrame) -> Table:
    rows = [
        {"run": p["tags.mlflow.runName"], "status": p["status"], "run_id": p["run_id"]} for _, p in parents.iterrows()
    ]
    rows += [
        {"run": k["tags.mlflow.runName"], "status": k["status"], "run_id": k["run_id"]} for _, k in kids.iterrows()
    ]
    return Table(
        "runs",
        f"MLflow run ids behind every number ({len(rows)} runs)",
        tuple(Column(c, c) for c in ("run", "status", "run_id")),
        tuple(rows),
    )


def _rounds_run(row) -> str:
    """``8`` when a store ran every planned round, ``3 of 8`` when it stopped early (or failed)."""
    run, planned = row.get("rounds"), row.get("rounds_planned")
    if run is None or planned is None or run == planned:
        return _int(run)
    return f"{_int(run)} of {_int(planned)}"


def _reached(leak: dict) -> str:
    tiers = " + ".join(leak["tiers"]) or "no tier"
    return f"FAILED: {leak['failed']}" if leak["failed"] else f"{leak['band']}: {tiers}"


def _who(washer, gates) -> str:
    """The washer as the tables name it: ``plain (gates off)`` for a run without the gates."""
    return str(washer) if MeasurementRun.parse("gates", gates) else f"{washer} (gates off)"


def _int(v) -> str:
    return "" if v is None else f"{v:.0f}"


def _pct(v) -> str:
    return "n/a" if v is None else f"{v:.1f}%"
