"""``measurement=controlled`` and ``measurement=chain`` as MLflow runs: one run per store.

What the study hands over (:mod:`washexp.wash.measure.study` plans the runs, names and tags them): the
measurement's spec as it enters the identity (:func:`measurement_spec`), the arms built from the
configured washer (:func:`arms`), and one store run's result (:func:`store_result`).

The arms: the gated washer under test is the configured washer (``washer=reference`` offline,
``washer=coalwash`` with a model); ``washer=plain`` names the model compressor arm, and then the
gated arm is the reference washer. The ungated arms are ``truncate`` always and ``plain`` whenever
the sweep has a served model. These measurements set each arm's gates themselves, so
``gates=false`` is refused (one line, exit 2).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

from washexp.engine.runner import Result
from washexp.errors import ConfigError
from washexp.wash.coalwash import caliper
from washexp.wash.measure import chain, controlled, cutters
from washexp.wash.store.scratch import scratch_dir

FIDELITY = ("controlled", "chain")
OWN_KEYS = {"target_pct": "controlled", "repeats": "controlled", "passes": "chain", "pass_keep_pct": "chain"}
"""The measurement keys only these measurements read (left out of every other one's identity)."""
CODE = ("washexp.wash.measure.fidelity",)
"""Added to the wash code entries for these measurements only (their modules are found from it)."""


def measurement_spec(m) -> dict[str, Any]:
    """The measurement's settings as they enter the identity: a key of :data:`OWN_KEYS` only in
    the measurement that reads it, so ceiling, infinity and sawtooth keep their identities."""
    return {k: v for k, v in asdict(m).items() if OWN_KEYS.get(k, m.name) == m.name}


def check(m, gates: bool) -> None:
    """One-line refusals before any run: ``gates=false``, and out-of-range settings."""
    if not gates:
        raise ConfigError(f"measurement={m.name} sets each arm's gates itself: leave gates=true (drop gates=false)")
    if m.name == "controlled":
        if not 0 < m.target_pct < 100:
            raise ConfigError(f"controlled.target_pct={m.target_pct}: expected 1..99 (% of the store's bytes)")
        if m.repeats < 1:
            raise ConfigError(f"controlled.repeats={m.repeats}: expected >= 1")
    else:
        if m.passes < 1:
            raise ConfigError(f"chain.passes={m.passes}: expected >= 1")
        if not 0 < m.pass_keep_pct < 100:
            raise ConfigError(f"chain.pass_keep_pct={m.pass_keep_pct}: expected 1..99 (% of each pass's input)")


def gated_spec(washer: dict[str, Any]) -> dict[str, Any]:
    """The gated arm's washer config: the configured one, or the reference for ``washer=plain``."""
    return {"name": "reference"} if washer.get("name") == "plain" else dict(washer)


def always_loaded(files: dict[str, str]) -> int:
    """The always-loaded bytes of a store with these files, as the caliper counts them."""
    with scratch_dir("fidelity") as tmp:
        for name, text in files.items():
            (Path(tmp) / name).write_bytes(text.encode("utf-8"))
        return caliper.measure(Path(tmp)).always_loaded_bytes


def _gated_instruction(spec: dict[str, Any], operator: str) -> str:
    args = ", ".join(f"{k}={v}" for k, v in spec.items() if k not in ("name", "prompts"))
    prompts = "; ".join(f"prompts/{n}.txt sha256 {d}" for n, d in (spec.get("prompts") or {}).items())
    return (
        f"the {spec['name']} washer ({args or 'no arguments'}{'; ' + prompts if prompts else ''}) through the full "
        f"pipeline with the gates on (quick tier, keeps, operator {operator}, fidelity gate, transactional apply), "
        "gauge off; never told a target."
    )


def arms(gated_cfg: dict, gated_spec_: dict, make_gated, model, operator, operator_name: str):
    """(gated cutter, ungated cutters): ``make_gated()`` builds a fresh gated washer per cut; the
    plain arm's repeats are draws of the model layer (``WasherModel.drawn``)."""
    from washexp.wash.washers.model import prompt

    gated = cutters.gated(gated_cfg["name"], make_gated, operator, _gated_instruction(gated_spec_, operator_name))
    ungated = [cutters.truncate()]
    if model is not None:
        ungated.append(
            cutters.plain(
                model, operator, prompt("plain-target"), prompt("plain-refit"), prompt("plain"), controlled.BAND_PCT
            )
        )
    return gated, ungated


def store_result(m, store, gated, ungated, config_yaml: str, manifest: dict) -> Result:
    """One store's run: every arm (controlled) or every chain (chain), raw JSON and metrics."""
    files, expected = dict(store.files), store.expected.to_json()
    muscle = len(expected.get("muscle", []))
    series: dict[str, list[float]]
    if m.name == "controlled":
        raw = controlled.run_store(files, expected, store.name, gated, ungated, m.target_pct, m.repeats, always_loaded)
        out, series, name = controlled.metrics(raw, muscle), {}, "controlled.json"
    else:
        chains = [
            chain.run_chain(files, expected, store.name, c, m.passes, m.pass_keep_pct, True, always_loaded)
            if c.name == "truncate"
            else chain.run_chain(files, expected, store.name, c, m.passes, None, True, always_loaded)
            for c in ungated
        ]
        chains.append(chain.run_chain(files, expected, store.name, gated, m.passes, None, False, always_loaded))
        raw = {"store": store.name, "store_bytes": sum(len(t.encode()) for t in files.values()), "chains": chains}
        out, series = chain.metrics(chains, m.passes)
        out["muscle_total"] = float(muscle)
        name = "chain.json"
    artifacts = {name: json.dumps(raw, indent=1, ensure_ascii=False) + "\n", "config.yaml": config_yaml}
    return Result(out, artifacts, manifest=manifest, series=series)


def summarize(config_yaml: str, manifest: dict):
    def summary(per_store: dict[Any, dict[str, float] | None]) -> Result:
        done = [v for v in per_store.values() if v is not None]
        out = {"stores": float(len(per_store)), "failed": float(len(per_store) - len(done))}
        keys = sorted({k for v in done for k in v if k.endswith("recall_pct") or k.endswith("cumulative_pct")})
        for k in keys:
            vals = [v[k] for v in done if k in v]
            out[f"mean/{k}"] = sum(vals) / len(vals)
        out |= headline_metrics(out)
        return Result(out, {"config.yaml": config_yaml}, manifest=manifest)

    return summary


HEADLINE_ROLES = ("gated", "truncate", "plain")
"""The arms (controlled) or chains (chain) every fidelity measurement may have, by the first word
of their name (``gated <washer>``, ``truncate``, ``plain``)."""


def headline_metrics(means: dict[str, float]) -> dict[str, float]:
    """The measurement's headline under fixed names, so the runs table has a column for it
    whatever the washer is called: ``headline/<role>_recall_pct``, each arm's mean recall over
    stores (controlled), or each chain's mean cumulative recall at its last pass (chain)."""
    out: dict[str, float] = {}
    last: dict[str, int] = {}
    for k, v in sorted(means.items()):
        arm = re.fullmatch(r"mean/([^/]+)/recall_pct", k)
        chain = re.fullmatch(r"mean/([^/]+)/pass(\d+)/cumulative_pct", k)
        found = arm or chain
        role = found[1].split()[0] if found else None
        if role not in HEADLINE_ROLES:
            continue
        if chain and int(chain[2]) < last.get(role, 0):
            continue
        if chain:
            last[role] = int(chain[2])
        out[f"headline/{role}_recall_pct"] = v
    return out


def headline(name: str, metrics: dict[str, float]) -> str:
    """The closing line: each arm's mean recall over stores (controlled), or each chain's
    cumulative recall at its last pass (chain)."""
    if name == "chain":
        last: dict[str, tuple[int, float]] = {}
        for k, v in metrics.items():
            m = re.fullmatch(r"mean/(.+)/pass(\d+)/cumulative_pct", k)
            if m and int(m[2]) >= last.get(m[1], (0, 0.0))[0]:
                last[m[1]] = (int(m[2]), v)
        parts = [f"{c} cumulative recall {v:.1f}% at pass {n}" for c, (n, v) in sorted(last.items())]
    else:
        parts = [
            f"{k.removeprefix('mean/').removesuffix('/recall_pct')} recall {v:.1f}%"
            for k, v in sorted(metrics.items())
            if k.startswith("mean/") and k.count("/") == 2 and k.endswith("/recall_pct")
        ]
    return "; ".join(parts) or "no store finished"
