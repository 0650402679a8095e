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

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from washexp import console, machine
from washexp.config import identify
from washexp.errors import ConfigError, ModelError
from washexp.hashing import tree_digest
from washexp.ledger import Entry
from washexp.models.cost import sum_metrics
from washexp.models.llama_server import prompt_tokens_evaluated
from washexp.models.local import flat_params
from washexp.provenance import code_digest, files_digest, git_commit, package_source, public_config
from washexp.runner import Result, Work, run_group
from washexp.tracking.traces import calls_from
from washexp.wash import caliper, fidelity, gauge, pipeline, ported, rounds, sawtooth, summary
from washexp.wash.feed import feed_folder, load_feed
from washexp.wash.operators import make_operator
from washexp.wash.scratch import scratch_dir, sweep_scratch
from washexp.wash.stores import Store, load_stores

log = logging.getLogger("washexp")

MEASUREMENTS = ("ceiling", "infinity", "sawtooth", *fidelity.FIDELITY)
CODE = (
    "washexp.wash.pipeline",
    "washexp.wash.rounds",
    "washexp.wash.summary",
    "washexp.wash.sawtooth",
    "washexp.wash.operators",
    "washexp.wash.stores",
    "washexp.wash.feed",
    "washexp.wash.washers",
)
"""What computes a wash result: a wash, its rounds and scores, their summaries, the operator, the
stores and feeds; what they import is found from their source
(:func:`washexp.provenance.code_modules`). The record builders are not in it."""
CODE_DATA = ("wash/washers/*.py", "wash/prompts/*.txt")
"""The washers (a registry names them lazily) and the model washers' prompts."""


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


BOUNDS = (
    ("rounds", 1, 1000),
    ("dry_stop", 0, 1000),
    ("sessions", 1, 10_000),
    ("target_pct", 1, 99),
    ("repeats", 1, 100),
    ("passes", 1, 100),
    ("pass_keep_pct", 1, 99),
)
"""Each measurement option's accepted range (``wash.measurement.<key>``)."""


def run_job(cfg, job, sweep) -> dict[str, float]:
    w = cfg.wash
    m = w.measurement
    if m.name not in MEASUREMENTS:
        raise ConfigError(f"measurement={m.name!r}: expected one of {', '.join(MEASUREMENTS)}")
    for key, low, high in BOUNDS:  # a count of 0 would be a measurement of nothing, recorded as one
        if not low <= getattr(m, key) <= high:
            raise ConfigError(f"{key}={getattr(m, key)}: must be from {low} to {high}")
    for arm in m.arms:
        if arm not in ("configured", "off"):
            raise ConfigError(f"wash.measurement.arms: {arm!r} is neither 'configured' nor 'off'")
    the_gauge = gauge.load_gauge(dict(w.gauge))  # checked before any run starts
    checked = m.name in fidelity.FIDELITY  # these set each arm's gates themselves
    if checked:
        fidelity.check(m, w.gates)
    washer_spec = _washer_spec(dict(w.washer), w.gates and not checked)
    if m.name == "sawtooth":  # the inputs, validated whole before any model is opened
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
    family = {
        "measurement": fidelity.measurement_spec(m),
        "washer": washer_spec,
        "gauge": dict(w.gauge),
        "operator": w.operator,
        "gates": w.gates,
        **({"served": served} if served else {}),
    }
    code = (*CODE, *fidelity.CODE) if checked else CODE
    if checked:  # the arms: the gated washer's spec, and the plain arm's prompts when there is a model
        gated_cfg = fidelity.gated_spec(dict(w.washer))
        family["gated"] = _washer_spec(gated_cfg, True)
        if washer_model is not None:
            from washexp.wash.washers.model import prompt_digests

            family["plain_prompts"] = prompt_digests(("plain", "plain-target"))
    ident = identify(cfg, family, sweep.shared(("code", code), lambda: code_digest(code, CODE_DATA)))
    source = sweep.shared("package_source", package_source)  # one command, one source tree
    tags = {
        "measurement": m.name,
        "washer": washer_name,
        "gauge": gauge_name,
        "operator": w.operator,
        "gates": str(w.gates).lower(),
        "model": cfg.model.name,
        "tier": cfg.model.tier,
        "platform": cfg.model.platform,
        "sweep": job.sweep,
        "washexp.overrides": job.overrides,
        "washexp.source": tree_digest(source),
        "mlflow.source.git.commit": sweep.shared("git_commit", lambda: git_commit(sweep.root)) or "unknown",
        "washexp.machine": sweep.shared("machine", machine.describe),
    }
    params = {**ident.params, **flat_params(served)}
    tags |= ported.releases(the_gauge.config.pins)
    if getattr(built, "confinement", None):  # what contained a command washer on this machine
        params["confinement"] = built.confinement
    gauges = {"configured": gauge_name, "off": "off"}  # an arm's gauge: what the line and run names say
    used = " vs ".join(dict.fromkeys(gauges[a] for a in m.arms))
    kind = f"{m.name} · {washer_name}" + ("" if w.gates else " · gates off")
    label = f"{kind} · gauge {used}"
    config_yaml = public_config(cfg)

    if m.name == "sawtooth":
        feed_files = files_digest(feed.path, ("**/*",))
        units = {"A": True, "B": False}
        children = [
            Work(
                f"arm {a}, {'washed when the gauge fires' if units[a] else 'never washed'} · {label}",
                {**ident.spec, "feed_sha256": tree_digest(feed_files), "arm": a},  # content, never the path
                {**params, "feed": feed.name, "arm": a},
                {**tags, "washexp.kind": "wash-arm", "arm": a, "feed": feed.name},
                key=a,
            )
            for a in units
        ]
        parent_identity = {**ident.spec, "feed_sha256": tree_digest(feed_files)}
        manifest = {"feed": feed_files, "source": source}

        def compute(work: Work) -> Result:
            with scratch_dir("sawtooth") as tmp:  # named so a killed run's copy is swept later
                muscle = tuple((n["id"], n["needle"]) for n in _feed_muscle(feed, m.sessions))
                operator = make_operator(w.operator, muscle)
                washer = _washer(dict(w.washer), washer_model)

                def wash(store: Path):
                    return pipeline.wash(store, washer, the_gauge, operator, tier="full", gates=w.gates)

                arm = sawtooth.run_arm(feed, m.sessions, Path(tmp), the_gauge, wash, units[work.key])
            return summary.sawtooth_arm(arm, config_yaml, manifest)

        summarize = summary.sawtooth_totals(config_yaml, manifest)
    elif checked:
        children = [
            Work(
                f"{s.name} · {m.name} · gated {gated_cfg['name']}",
                {**ident.spec, "store_sha256": s.digest},  # content, never the path
                {**params, "store": s.name, "arm": "off"},
                {**tags, "washexp.kind": "wash-fidelity", "store": s.name, "arm": "off", "gated": gated_cfg["name"]},
                key=(s.name, "off"),
            )
            for s in stores.values()
        ]
        parent_identity = {**ident.spec, "stores": sorted(s.digest for s in stores.values())}
        manifest = {"source": source}

        def compute(work: Work) -> Result:
            store: Store = stores[work.key[0]]
            operator = make_operator(w.operator, tuple((n.id, n.needle) for n in store.expected.muscle))
            gated_model = washer_model if gated_cfg["name"] == w.washer.get("name") else None
            gated, ungated = fidelity.arms(
                gated_cfg,
                family["gated"],
                lambda: _washer(gated_cfg, gated_model),
                washer_model,
                operator,
                w.operator,
                cfg.model.generation_temperature if m.name == "controlled" and m.repeats > 1 else None,
            )
            kept = {"fixture": store.manifest, "source": source}  # the store as loaded, never read again
            return fidelity.store_result(m, store, gated, ungated, config_yaml, kept)

        summarize = fidelity.summarize(config_yaml, manifest)
    else:
        children = [
            Work(
                f"{s.name} · gauge {gauges[arm]} · {kind}",  # the distinguishing part first: names are cut
                {**ident.spec, "store_sha256": s.digest, "arm": arm},  # content, never the path
                {**params, "store": s.name, "arm": arm},
                {
                    **tags,
                    **ported.releases(_gauge_for(arm, dict(w.gauge)).config.pins),
                    "washexp.kind": "wash-store",
                    "store": s.name,
                    "arm": arm,
                },
                key=(s.name, arm),
            )
            for s in stores.values()
            for arm in m.arms
        ]
        parent_identity = {**ident.spec, "stores": sorted(s.digest for s in stores.values())}
        manifest = {"source": source}

        def compute(work: Work) -> Result:
            name, arm = work.key
            store: Store = stores[name]
            expected = store.expected.to_json()  # as validated: the user's store is read once
            operator = make_operator(w.operator, tuple((n.id, n.needle) for n in store.expected.muscle))
            washer, arm_gauge = _washer(dict(w.washer), washer_model), _gauge_for(arm, dict(w.gauge))

            def wash(d: Path):
                return pipeline.wash(d, washer, arm_gauge, operator, tier="full", gates=w.gates)

            with scratch_dir("wash") as tmp:
                scratch = rounds.scratch_copy(store.path, Path(tmp) / name, store.files)
                start = caliper.measure(scratch).total_tokens_est
                rds = rounds.loop(scratch, store.files, expected, name, wash, m.rounds, m.dry_stop, cfg.model.name)
            kept = {"fixture": store.manifest, "source": source}  # the store as loaded, never read again
            result = summary.store_rounds(rds, expected, config_yaml, kept, m.rounds, m.dry_stop)
            result.metrics.update(_tokens_cut(start, rds))
            return result

        summarize = summary.measurement(m.name, config_yaml, manifest)

    if washer_model is not None and washer_model.served:  # the local server's log, as the parent's artifact
        summarize = _with_server_log(summarize, washer_model)
    tracker = _tracker(cfg, sweep)
    if washer_model is not None and cfg.tracking.traces and tracker.traces is not None:
        compute = _traced(compute, washer_model.recorder)
    if washer_model is not None:  # what each child's calls cost, and the measurement's sum
        compute, summarize = _charged(compute, summarize, washer_model.recorder)
    parent = Work(f"{label} · {m.name}", parent_identity, params, {**tags, "washexp.kind": "measurement"})
    bar = sweep.shared(("bar", parent.hash), lambda: console.ArmBar(f"{label} · {m.name}", len(children), "run", log))

    def progress(work: Work, state: str, counts: dict[str, int]) -> None:
        done = sum(counts.values())
        bar.step(done, f"  {work.name}: {state} ({done}/{len(children)}, {counts['failed']} failed)")

    try:
        outcome = run_group(
            tracker, parent, children, compute, summarize, rerun=cfg.rerun, fatal=(ModelError,), on_done=progress
        )
    finally:
        bar.close()  # the result line takes its place
    sweep.ledger.append(Entry.of(job.sweep, cfg.benchmark.name, cfg.tracking, len(children), outcome))
    if outcome.reused:
        console.result(log, "%s: finished already; rerun=true runs it again", label)
    else:
        n = outcome.counts
        console.result(
            log,
            "%s: %d run, %d reused, %d failed · %s",
            label,
            n["run"],
            n["reused"],
            n["failed"],
            fidelity.headline(m.name, outcome.metrics)
            if checked
            else summary.headline(m.name, outcome.metrics, gauges),
        )
    return outcome.metrics


def _charged(compute, summarize, recorder):
    """``compute`` with the cost of the calls it made (``cost_usd``, ``calls_live``,
    ``calls_replayed``: the recorder's keys first used while it ran; a measurement's children run
    one at a time), ``summarize`` with their sums."""

    def charged_compute(work: Work) -> Result:
        before = recorder.used()
        result = compute(work)
        result.metrics.update(recorder.charge(recorder.used()[len(before) :]).metrics())
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
    from washexp.wash.feed import expected_after

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


def _tracker(cfg, sweep):
    from washexp.tracking import open_tracker

    t = cfg.tracking
    name = t.experiment or cfg.benchmark.name
    return sweep.shared(
        ("tracker", t.enabled, t.uri, t.artifacts, name),
        lambda: open_tracker(t.enabled, t.uri, t.artifacts, name, sweep.root),
    )
