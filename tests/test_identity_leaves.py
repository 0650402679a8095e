"""One identity rule: every leaf of a composed config moves a condition's identity unless
``washexp.config`` declares it (NOT_IDENTITY, BY_CONTENT, WHERE_USED). The trap it guards: a
setting that changes a result but is left out of the hash, so a stored run is reused for it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

import washexp.wash.measure.study as wash_study
from tests.conftest import ROOT
from washexp.app import JobInfo
from washexp.compaction import cliff_job
from washexp.compaction.cycles_job import plan_cycles
from washexp.compaction.study import plan_arm
from washexp.config import BY_CONTENT, WHERE_USED, leaves, not_identity, override_excludes, register
from washexp.engine import family
from washexp.engine.sweep import Sweep
from washexp.tracking.kinds import KIND_TAG, Kind

OTHER = {
    # a string or null leaf's other valid value (a number is moved by one, a bool flipped)
    "model.name": "other",
    "model.tier": "other",
    "model.platform": "other",
    "model.structured_output": "json_schema",
    "compaction.method.name": ["S", "H"],
    "compaction.method.h_impl": "hermes",
    "compaction.method.M": 3,
    "compaction.method.K": 3,
    "compaction.method.budget": 3000,
    "compaction.ranker": "bm25",
    "compaction.phase": "preflight",
    "compaction.task": [["payment"], ["backup"]],
    "compaction.measurement.name": ["single", "cycles"],
    "compaction.measurement.k": [[1, 2], [1, 2, 3]],
    "compaction.measurement.budgets": [[64], [128]],
    "compaction.measurement.lengths": [[1000], [2000]],
    "wash.measurement.name": ["infinity", "ceiling"],
    "wash.measurement.arms": [["configured"], ["off"]],
    "wash.operator": "approve-all",
    "wash.gauge.pins": "CoalWash v1.0.0 band gauge: another reading",
    "wash.gauge.name": "coalwash-beta5",
}
WITH = {
    "model.backend": {
        "reference": ("openai", ["endpoint.base_url=http://127.0.0.1:9/v1"]),
        "openai": ("reference", []),
    }
}
"""A leaf whose other value needs a not-identity setting beside it (an endpoint for a served model)."""
ALONE_INVALID = {
    "benchmark.name": "the family itself: the other benchmark is the other walk",
    "wash.washer.name": "another washer brings its own keys (washer=...): its spec enters whole",
    "wash.gauge.model": "the gauge's rule: another one is another gauge option (gauge=...), whose name moves",
    "compaction.measurement.split": "one split rule so far (turns): its name enters every cycles identity",
}
"""Leaves with no other value valid on their own; what makes them enter is said."""
SERVED = ["model=openai", "model.name=q", "endpoint.base_url=http://127.0.0.1:9/v1"]
CLIFF = {"tasks": 1, "budgets": "[64]", "budget_length": 1000, "lengths": "[1000]", "length_budget": 64}
"""The smallest cliff: one set of one task, at one budget and one length (each plan generates it)."""
WASH = ["benchmark=wash", "wash.store=[lean]", "tracking=off"]
WALKS = {
    "compaction": ["method=H", "compaction.topn=1", "compaction.task=[payment,backup]"],
    "compaction-served": ["method=H", "compaction.task=[payment]", *SERVED],
    "compaction-hybrid": ["method=hybrid", "compaction.topn=1", "compaction.task=[payment]"],
    "compaction-recency": ["method=recency", "compaction.task=[payment]"],
    "compaction-cycles": [
        "measurement=cycles",
        "method=S",
        "compaction.task=[payment]",
        "compaction.measurement.k=[1,2]",
    ],
    "compaction-cliff": [
        "measurement=cliff",
        "method=S",
        "tracking=off",  # its plan opens the tracker: no store is made for a walk
        *(f"compaction.measurement.{k}={v}" for k, v in CLIFF.items()),
    ],
    "wash": WASH,
    "wash-sawtooth": [*WASH, "measurement=sawtooth", "wash.measurement.sessions=2"],
    "wash-controlled": [*WASH, "measurement=controlled"],
    "wash-chain": [*WASH, "measurement=chain"],
}
"""Each benchmark, and the settings where the WHERE_USED leaves below are read."""
USED = {
    "compaction": {"compaction.topn", "compaction.ranker"},
    "compaction-hybrid": {"compaction.topn", "compaction.ranker", "compaction.method.M", "compaction.method.budget"},
    "compaction-recency": {"compaction.method.K"},
    "compaction-cycles": {"compaction.measurement.k"},
    "compaction-cliff": {f"compaction.measurement.{k}" for k in ["seed", *CLIFF]},
    "compaction-served": {"model.repeats", "model.answers_per_context", "compaction.method.h_impl"},
    "wash": set(),
    "wash-sawtooth": {"wash.measurement.sessions"},
    "wash-controlled": {"wash.measurement.target_pct", "wash.measurement.repeats"},
    "wash-chain": {"wash.measurement.passes", "wash.measurement.pass_keep_pct"},
}
"""The WHERE_USED leaves each walk's components read: there they must move the identity too."""
FIXED = {
    "wash-controlled": {"wash.gates"},
    "wash-chain": {"wash.gates"},
    "compaction-cliff": {"compaction.topn", "compaction.task"},
}
"""Leaves a walk's settings fix: these wash measurements set each arm's gates themselves
(gates=true); the cliff measures Top 0 only, over the tasks of the sets it generates."""


FAMILIES = ("compaction", "wash")


class Planned(Exception):
    """Raised instead of running a wash group: its works are what the test reads."""


def _compose(overrides: list[str]):
    register()
    with initialize_config_dir(str(ROOT / "conf"), version_base=None):
        return OmegaConf.to_object(compose("config", overrides=overrides))


def _hashes(overrides: list[str], monkeypatch, tmp_path: Path) -> frozenset[str]:
    cfg = _compose(overrides)
    job, sweep = JobInfo("", "s", ROOT), Sweep(ROOT)
    measured = cfg.compaction.measurement.name if cfg.benchmark.name == "compaction" else None
    if measured == "cycles":
        cycles = plan_cycles(cfg, job, sweep)
        return frozenset(w.hash for w in [cycles.parent, *cycles.children])
    if measured == "cliff":  # its sets into a folder of their own, each plan's new (a set is never overwritten)
        job = JobInfo("", str(tmp_path / f"sweep{len(list(tmp_path.iterdir()))}"), ROOT)
        works = _planned(cliff_job.run_job, cfg, job, sweep, monkeypatch)
        assert {w.tags[KIND_TAG] for w in works} == {Kind.CLIFF, Kind.CLIFF_CELL}  # the cliff's, both kinds
        return frozenset(w.hash for w in works)
    if cfg.benchmark.name == "compaction":
        plan = plan_arm(cfg, job, sweep)
        return frozenset(w.hash for w in [plan.parent, *plan.children])
    return frozenset(w.hash for w in _planned(wash_study.run_job, cfg, job, sweep, monkeypatch))


def _planned(run_job, cfg, job, sweep, monkeypatch) -> list:
    """The works (parent, then children) of the group ``run_job`` hands over, never run."""

    def planned(cfg, job, sweep, group, **kwargs):
        raise Planned([group.parent, *group.children])

    monkeypatch.setattr(family, "run", planned)
    with pytest.raises(Planned) as caught:
        run_job(cfg, job, sweep)
    return caught.value.args[0]


def _other(path: str, value) -> tuple[object, list[str]]:
    if path in WITH:
        return WITH[path][value]
    if path in OTHER:
        candidates = OTHER[path] if isinstance(OTHER[path], list) else [OTHER[path]]
        return next(c for c in candidates if c != value), []
    if isinstance(value, bool):
        return (not value), []
    if isinstance(value, int):
        return value + 1, []
    if isinstance(value, float):
        return value + 0.25, []
    if value == {}:
        return {"x": 1}, []
    raise AssertionError(f"{path}={value!r}: name another valid value in OTHER")


def _override(path: str, value) -> str:
    return f"++{path}={yaml.safe_dump(value, default_flow_style=True).strip().removesuffix('...').strip()}"


def _declared(path: str, walk: str) -> bool:
    return not_identity(path) or path in BY_CONTENT or (path in WHERE_USED and path not in USED[walk])


# The default suite walks compaction's leaves (about 20 s); every other walk, wash's (about 45 s on
# 2 busy cores) included, runs with the slow suite (CI runs both).
@pytest.mark.parametrize(
    "benchmark", [w if w == "compaction" else pytest.param(w, marks=pytest.mark.slow) for w in sorted(WALKS)]
)
def test_every_leaf_moves_the_identity_unless_declared(benchmark, monkeypatch, tmp_path):
    base = WALKS[benchmark]
    before = _hashes(base, monkeypatch, tmp_path)
    walked, still = 0, []
    for path, value in leaves(_compose(base)).items():
        if _declared(path, benchmark) or path in ALONE_INVALID or path in FIXED.get(benchmark, ()):
            continue
        if path in FAMILIES and value is None:
            continue  # the other family's node: None, a job carries only its own family's keys
        other, beside = _other(path, value)
        after = _hashes([*base, *beside, _override(path, other)], monkeypatch, tmp_path)
        walked += 1
        if after == before:
            still.append(f"{path}: {value!r} -> {other!r}")
    assert not still, f"{benchmark}: these leaves change nothing in the identity and are not declared: {still}"
    assert walked >= (18 if benchmark.startswith("wash") else 12)  # the walk cannot pass on an empty config
    assert USED[benchmark] <= {p for p in leaves(_compose(base))}  # each leaf it says is read was walked


def test_a_declared_leaf_leaves_the_identity_where_it_is(monkeypatch, tmp_path):
    base = WALKS["compaction"]
    before = _hashes(base, monkeypatch, tmp_path)
    for override in ("endpoint.timeout_s=7", "endpoint.price.input_per_mtok=1.5", "rerun=true", "tracking=off"):
        assert _hashes([*base, override], monkeypatch, tmp_path) == before, override


def test_hydras_exclude_keys_are_the_declared_ones():
    text = Path(ROOT / "conf" / "config.yaml").read_text(encoding="utf-8")
    listed = yaml.safe_load(re.search(r"exclude_keys: (\[[^\]]*\])", text).group(1))
    assert listed == override_excludes()
