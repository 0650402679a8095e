"""A wash measurement as MLflow runs: one run per measurement x washer x gauge, one nested run
per store (and gauge arm), or per sawtooth arm.

Identity (``washexp.config.identify``, which also makes the params): the benchmark, what the model is, the measurement's
settings, the washer's spec (with its prompt files' sha256 for a model washer), the gauge option,
the operator and ``gates``, the digest of the wash family's code, and the content digest of each
store (or feed): never its path, so a store by name and by path are one condition. A store or
feed is a name under ``fixtures/`` or a path from the user's directory (``job.cwd``); runs and
records name it by folder name. Scratch copies only: no store or fixture file is ever written.

Checked before any run starts, each a one-line error (exit 2): a model washer (``coalwash``,
``plain``) with ``model=reference`` (it needs a served model), and the ``plain`` control with the
gates on (it runs only with ``gates=false``). A model washer gets the sweep's one model layer
(``washexp.wash.washers.model``: recorder + client, replay as ``endpoint.replay`` says). A run
with the gates off says so in its name (``gates off``) and its ``gates`` tag and param.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Hashable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from washexp import measurements
from washexp.config import identify
from washexp.engine import family
from washexp.engine.runner import Result, Work
from washexp.errors import ConfigError, ModelError
from washexp.hashing import tree_digest
from washexp.models.cost import CALLS_TABLE, sum_metrics
from washexp.models.llama_server import prompt_tokens_evaluated
from washexp.models.local import flat_params
from washexp.provenance import code_digest, files_digest, package_source, public_config
from washexp.tracking.kinds import MeasurementRun, WashArmRun, WashFidelityRun, WashStoreRun
from washexp.tracking.traces import calls_from
from washexp.wash import pipeline
from washexp.wash.coalwash import caliper, gauge, ported
from washexp.wash.coalwash.operators import make_operator
from washexp.wash.measure import fidelity, rounds, sawtooth, summary
from washexp.wash.store.feed import feed_folder, load_feed
from washexp.wash.store.scratch import scratch_dir, sweep_scratch
from washexp.wash.store.stores import Store, load_stores

log = logging.getLogger("washexp")

CODE = (
    "washexp.wash.pipeline",
    "washexp.wash.measure.rounds",
    "washexp.wash.measure.summary",
    "washexp.wash.measure.sawtooth",
    "washexp.wash.coalwash.operators",
    "washexp.wash.store.stores",
    "washexp.wash.store.feed",
    "washexp.wash.washers",
)
"""What computes a wash result: a wash, its rounds and scores, their summaries, the operator, the
stores and feeds; what they import is found from their source
(:func:`washexp.provenance.code_modules`). The record builders are not in it."""
CODE_DATA = ("wash/washers/*.py", "wash/prompts/*.txt")
"""The washers (a registry names them lazily) and the model washers' prompts."""


def _store_arm(key: Hashable) -> tuple[str, str]:
    """A store child's key, as the children are made below: (store name, arm)."""
    assert isinstance(key, tuple)
    name, arm = key
    return name, arm


def _washer(spec: dict[str, Any], model=None):
    from washexp.wash.washers import make_washer

    return make_washer(spec, model)


def _washer_model(cfg, sweep, spec: dict[str, Any]):
    """The sweep's model layer for a model washer (None for a rule-based one); refuses
    ``model=reference`` in one line before anything is built."""
    from washexp.wash.washers import needs_model
    from washexp.wash.washers.model import model_key, needs_served, open_model

    if not needs_model(spec):
        return None
    needs_served(spec["name"], cfg.model.backend)
    return sweep.shared(
        ("wash-model", model_key(cfg.model, cfg.endpoint)),
        lambda: open_model(spec["name"], cfg.model, cfg.endpoint, sweep.root),
    )


def _washer_spec(spec: dict[str, Any], gates: bool) -> dict[str, Any]:
    from washexp.wash.washers import check_gates, washer_spec

    check_gates(spec, gates)
    return washer_spec(spec)


def _tokens_cut(start: int, rds) -> dict[str, float]:
    """The store's ~est tokens before the first round and after the last scored one."""
    scored = [r for r in rds if r.score is not None]
    if not scored:
        return {"tokens_start": float(start)}
    end = scored[-1].tokens_total
    return {"tokens_start": float(start), "tokens_end": float(end), "tokens_cut": float(start - end)}


def _gauge_for(arm: str, configured: dict[str, Any]):
    return gauge.load_gauge("off") if arm == "off" else gauge.load_gauge(configured)


@dataclass(frozen=True)
class Job:
    """What every measurement of one job shares, checked before any run starts."""

    cfg: Any
    sweep: Any
    washer_model: Any
    """The sweep's model layer for a model washer, else None."""
    ident: Any
    params: dict[str, Any]
    tags: dict[str, str]
    label: str
    config_yaml: str
    source: dict[str, str]
    gauge: Any
    """The configured gauge, loaded."""
    gauges: dict[str, str]
    """Each arm's gauge name (``configured`` -> its name, ``off``)."""
    kind: str
    """What the runs' names say: the measurement, the washer, ``gates off``."""
    stores: dict[str, Store]
    """The stores by name, loaded and checked (empty for a measurement that reads the feed)."""
    feed: Any
    """The growth feed, loaded and checked (None unless the measurement reads it)."""
    gated: dict[str, Any] | None
    """Controlled and chain: the gated arm's washer spec."""

    def model(self, arm: str):
        """The model layer drawing for ``arm`` of this measurement (None without a model washer):
        each arm of each measurement its own series of draws, so no two runs of a record share one."""
        return self.washer_model.in_series(f"{self.kind} · {arm}") if self.washer_model is not None else None

    def washer(self, arm: str, draw: int):
        """A fresh washer as configured; a model washer's calls are draw ``draw`` (a round, a wash)
        of ``arm``'s series."""
        model = self.model(arm)
        return _washer(dict(self.cfg.wash.washer), model.drawn(draw) if model is not None else None)

    def operator(self, muscle) -> Any:
        return make_operator(self.cfg.wash.operator, tuple(muscle))


@dataclass(frozen=True)
class Planned:
    """A measurement's runs, as its ``plan(job)`` returns them (:mod:`washexp.measurements`): its
    children, the parent's identity, how to compute a child and summarise the parent, its result
    line (``headline(metrics) -> str``) and what a child is called in the progress line."""

    children: list[Work]
    identity: dict[str, Any]
    compute: Any
    summarize: Any
    headline: Any
    unit: str


def check(cfg) -> None:
    """The wash job's refusals that its config alone decides, nothing read or started (a sweep
    runs this on every job before the first: ``washexp.app.check_job``)."""
    from washexp.models import local
    from washexp.wash.washers import check_gates, needs_model
    from washexp.wash.washers.model import needs_served

    w = cfg.wash
    m = w.measurement
    measurements.get(m.name, "wash")
    measurements.check_bounds("wash", m)
    for arm in m.arms:
        if arm not in ("configured", "off"):
            raise ConfigError(f"wash.measurement.arms: {arm!r} is neither 'configured' nor 'off'")
    checked = m.name in fidelity.FIDELITY  # these set each arm's gates themselves
    if checked:
        fidelity.check(m, w.gates)
    check_gates(dict(w.washer), w.gates and not checked)
    if needs_model(dict(w.washer)):
        needs_served(w.washer["name"], cfg.model.backend)
        if cfg.model.backend == "local":
            local.check(cfg.model, cfg.endpoint)


def run_job(cfg, job, sweep) -> None:
    """One wash job; its config has passed :func:`check` (``washexp.app.check_job``)."""
    w = cfg.wash
    m = w.measurement
    measurement = measurements.get(m.name, "wash")
    the_gauge = gauge.load_gauge(dict(w.gauge))  # checked before any run starts
    checked = m.name in fidelity.FIDELITY
    washer_spec = _washer_spec(dict(w.washer), w.gates and not checked)
    feed, stores = None, {}
    if measurement.feed:  # the inputs, validated whole before any model is opened
        feed = load_feed(feed_folder(sweep.root / "fixtures" / "wash-feed", w.feed, job.cwd))
        if m.sessions > len(feed.sessions):
            raise ConfigError(f"sessions={m.sessions}: feed {feed.name!r} has {len(feed.sessions)} sessions")
    else:
        stores = {s.name: s for s in load_stores(sweep.root / cfg.benchmark.fixtures, w.store, job.cwd)}
    washer_model = _washer_model(cfg, sweep, dict(w.washer))
    built = _washer(dict(w.washer), washer_model)
    make_operator(w.operator, ())
    sweep_scratch()  # the scratch copies a killed run left in the temp folder
    gauge_name = w.gauge.get("name", "?")
    washer_name = w.washer.get("name", "?")
    served = washer_model.spec if washer_model is not None else None  # what a local model is
    own = {
        "measurement": fidelity.measurement_spec(m),
        "washer": washer_spec,
        "gauge": dict(w.gauge),
        "operator": w.operator,
        "gates": w.gates,
        **({"served": served} if served else {}),
    }
    code = (*CODE, *fidelity.CODE) if checked else CODE
    if checked:  # the arms: the gated washer's spec, and the plain arm's prompts when there is a model
        own["gated"] = _washer_spec(fidelity.gated_spec(dict(w.washer)), True)
        if washer_model is not None:
            from washexp.wash.washers.model import prompt_digests

            own["plain_prompts"] = prompt_digests(("plain", "plain-target"))
    ident = identify(cfg, own, sweep.shared(("code", code), lambda: code_digest(code, CODE_DATA)))
    tags = {
        **MeasurementRun(m.name, washer_name, gauge_name, w.operator, bool(w.gates)).tags(),
        **family.common_tags(cfg, job, sweep),
        **ported.releases(the_gauge.config.pins),
    }
    params = {**ident.params, **flat_params(served)}
    if getattr(built, "confinement", None):  # what contained a command washer on this machine
        params["confinement"] = built.confinement
    gauges = {"configured": gauge_name, "off": "off"}  # an arm's gauge: what the line and run names say
    used = " vs ".join(dict.fromkeys(gauges[a] for a in m.arms))
    kind = f"{m.name} · {washer_name}" + ("" if w.gates else " · gates off")
    label = f"{kind} · gauge {used}"
    source = sweep.shared("package_source", package_source)  # one command, one source tree
    it = Job(
        cfg, sweep, washer_model, ident, params, tags, label, public_config(cfg), source,
        the_gauge, gauges, kind, stores, feed, own.get("gated"),
    )  # fmt: skip
    planned: Planned = measurements.use(measurement.run)(it)

    compute, summarize = planned.compute, planned.summarize
    if washer_model is not None and washer_model.served:  # the local server's log, as the parent's artifact
        summarize = _with_server_log(summarize, washer_model)
    tracker = family.tracker(cfg, sweep)
    if washer_model is not None and cfg.tracking.traces and tracker.traces is not None:
        compute = _traced(compute, washer_model.recorder)
    if washer_model is not None:  # what each child's calls cost, and the measurement's sum
        compute, summarize = _charged(compute, summarize, washer_model.recorder)
    parent = Work(f"{label} · {m.name}", planned.identity, params, tags)
    group = family.Group(label, planned.unit, parent, planned.children, compute, summarize, planned.headline)
    family.run(cfg, job, sweep, group, tracked=tracker, fatal=(ModelError,), wait=True)


def plan_sawtooth(it: Job) -> Planned:
    """Measurement 3: arm A washed when the gauge fires, arm B never, over the feed's sessions."""
    m, w = it.cfg.wash.measurement, it.cfg.wash
    feed, the_gauge, gauges = it.feed, it.gauge, it.gauges
    feed_files = files_digest(feed.path, ("**/*",))
    units = {"A": True, "B": False}
    children = [
        Work(
            f"arm {a}, {'washed when the gauge fires' if units[a] else 'never washed'} · {it.label}",
            {**it.ident.spec, "feed_sha256": tree_digest(feed_files), "arm": a},  # content, never the path
            {**it.params, "feed": feed.name, "arm": a},
            {**it.tags, **WashArmRun(a, feed.name).tags()},
            key=a,
        )
        for a in units
    ]
    manifest = {"feed": feed_files, "source": it.source}

    def compute(work: Work) -> Result:
        with scratch_dir("sawtooth") as tmp:  # named so a killed run's copy is swept later
            operator = it.operator((n["id"], n["needle"]) for n in _feed_muscle(feed, m.sessions))
            washes = itertools.count(1)
            series = f"gauge {gauges['configured']} · arm {work.key}"

            def wash(store: Path):  # each wash of the arm its own draw of a model washer
                washer = it.washer(series, next(washes))
                return pipeline.wash(store, washer, the_gauge, operator, tier="full", gates=w.gates)

            arm = sawtooth.run_arm(feed, m.sessions, Path(tmp), the_gauge, wash, units[str(work.key)])
        return summary.sawtooth_arm(arm, it.config_yaml, manifest)

    return Planned(
        children,
        {**it.ident.spec, "feed_sha256": tree_digest(feed_files)},
        compute,
        summary.sawtooth_totals(it.config_yaml, manifest),
        lambda metrics: summary.headline(m.name, metrics, gauges),
        "arm",
    )


def plan_fidelity(it: Job) -> Planned:
    """The controlled experiment or the chain: per store, the gated washer beside the ungated arms."""
    cfg, m = it.cfg, it.cfg.wash.measurement
    stores, gated_spec = it.stores, it.gated
    assert gated_spec is not None  # run_job makes it for every measurement of fidelity.FIDELITY
    gated_cfg = fidelity.gated_spec(dict(cfg.wash.washer))
    children = [
        Work(
            f"{s.name} · {m.name} · gated {gated_cfg['name']}",
            {**it.ident.spec, "store_sha256": s.digest},  # content, never the path
            {**it.params, "store": s.name, "arm": "off"},
            {**it.tags, **WashFidelityRun(s.name, gated_cfg["name"]).tags()},
            key=(s.name, "off"),
        )
        for s in stores.values()
    ]

    def compute(work: Work) -> Result:
        store: Store = stores[_store_arm(work.key)[0]]
        operator = it.operator((n.id, n.needle) for n in store.expected.muscle)
        gated_model = it.model("gated") if gated_cfg["name"] == cfg.wash.washer.get("name") else None
        gated, ungated = fidelity.arms(
            gated_cfg,
            gated_spec,
            lambda: _washer(gated_cfg, gated_model),
            it.model("plain"),
            operator,
            cfg.wash.operator,
        )
        kept = {"fixture": store.manifest, "source": it.source}  # the store as loaded, never read again
        return fidelity.store_result(m, store, gated, ungated, it.config_yaml, kept)

    return Planned(
        children,
        {**it.ident.spec, "stores": sorted(s.digest for s in stores.values())},
        compute,
        fidelity.summarize(it.config_yaml, {"source": it.source}),
        lambda metrics: fidelity.headline(m.name, metrics),
        "store run",
    )


def plan_rounds(it: Job) -> Planned:
    """The ceiling and the infinity loop: rounds of a wash on each store, per gauge arm."""
    cfg, w = it.cfg, it.cfg.wash
    stores, kind, gauges = it.stores, it.kind, it.gauges
    m = w.measurement
    children = [
        Work(
            f"{s.name} · gauge {gauges[arm]} · {kind}",  # the distinguishing part first: names are cut
            {**it.ident.spec, "store_sha256": s.digest, "arm": arm},  # content, never the path
            {**it.params, "store": s.name, "arm": arm},
            {
                **it.tags,
                **ported.releases(_gauge_for(arm, dict(w.gauge)).config.pins),
                **WashStoreRun(s.name, arm).tags(),
            },
            key=(s.name, arm),
        )
        for s in stores.values()
        for arm in m.arms
    ]

    def compute(work: Work) -> Result:
        name, arm = _store_arm(work.key)
        store: Store = stores[name]
        expected = store.expected.to_json()  # as validated: the user's store is read once
        operator = it.operator((n.id, n.needle) for n in store.expected.muscle)
        arm_gauge = _gauge_for(arm, dict(w.gauge))

        def wash(d: Path, round_: int):  # each round its own draw of a model washer
            washer = it.washer(f"gauge {gauges[arm]}", round_)
            return pipeline.wash(d, washer, arm_gauge, operator, tier="full", gates=w.gates)

        with scratch_dir("wash") as tmp:
            scratch = rounds.scratch_copy(store.path, Path(tmp) / name, store.files)
            start = caliper.measure(scratch).total_tokens_est
            rds = rounds.loop(scratch, store.files, expected, name, wash, m.rounds, m.dry_stop, cfg.model.name)
        kept = {"fixture": store.manifest, "source": it.source}  # the store as loaded, never read again
        result = summary.store_rounds(rds, expected, it.config_yaml, kept, m.rounds, m.dry_stop)
        result.metrics.update(_tokens_cut(start, rds))
        return result

    return Planned(
        children,
        {**it.ident.spec, "stores": sorted(s.digest for s in stores.values())},
        compute,
        summary.measurement(m.name, it.config_yaml, {"source": it.source}),
        lambda metrics: summary.headline(m.name, metrics, gauges),
        "store run",
    )


def _charged(compute, summarize, recorder):
    """``compute`` with the cost of the calls it made (``cost_usd``, ``calls_live``,
    ``calls_replayed``: the recorder's keys first used while it ran; a measurement's children run
    one at a time), ``summarize`` with their sums."""

    def charged_compute(work: Work) -> Result:
        before = recorder.used()
        result = compute(work)
        keys = recorder.used()[len(before) :]
        result.metrics.update(recorder.charge(keys).metrics())
        if keys:  # each call it used, so a record over several sweeps counts it once
            result.tables[CALLS_TABLE] = recorder.call_rows(keys)
        return result

    def charged_summarize(results) -> Result:
        result = summarize(results)
        return replace(result, metrics={**result.metrics, **sum_metrics(list(results.values()))})

    return charged_compute, charged_summarize


def _with_server_log(summarize, washer_model):
    def with_log(results) -> Result:
        result = summarize(results)
        logs = washer_model.logs()
        metrics = {**result.metrics, **prompt_tokens_evaluated(logs)}
        return replace(result, metrics=metrics, artifacts={**result.artifacts, **logs})

    return with_log


def _feed_muscle(feed, sessions: int) -> list[dict]:
    from washexp.wash.store.feed import expected_after

    return expected_after(feed, sessions)["muscle"]


def _traced(compute, recorder):
    """``compute`` with every model call it makes (on its thread) as a trace of its run
    (``tracking.traces``): the store's, or the feed's, calls in the order they were asked."""

    def traced(work: Work) -> Result:
        with recorder.collecting() as keys:
            result = compute(work)
        where = work.params.get("store") or work.params.get("feed")
        return replace(result, traces=calls_from(recorder, keys, where))

    return traced
