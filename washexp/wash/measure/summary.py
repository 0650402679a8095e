"""From rounds and sessions to what a run logs: metrics, step series and artifacts.

Per store (ceiling, infinity): the first bad round (any muscle lost, or a no-fat store changed),
and the rounds run (with ``dry_stop_after`` when a user's early stop ended the loop). Fact-loss has
one meaning: **fact-loss % cumulative** = muscle needles lost at any round so far over the muscle
total (a needle restored later still counts: what a user fears); split by the phase of the round
that lost it. What score.mjs prints per round (``lossPct``) is the other thing, named **missing
now**. Past fat exhaustion two things are counted apart: rounds **stopped at LEAN** (the seed's
structural target: the receipt stopped before the quick tier and the washer was never asked) and
rounds that **applied nothing**; each fat-exhausted round that got past LEAN is a leak, listed in
``leaks.json`` (the hardening backlog). Per measurement: ceiling = min over stores of (first bad
round - 1), exact values and lower bounds (a store with no bad round) kept apart.
Per sawtooth arm: always-loaded tokens per session and their total, A's run costs;
delta % = (B - (A + A's costs)) / B.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from washexp.engine.runner import Result
from washexp.wash.measure.rounds import Round, artifacts
from washexp.wash.measure.sawtooth import Arm, arm_artifacts
from washexp.wash.pipeline import LEAN_STOP


def _pct(n: float, d: float | None) -> float | None:
    return 100.0 * n / d if d else None


def fact_loss_pct(lost_so_far: int, muscle_total: int | None) -> float | None:
    """Fact-loss % cumulative: needles lost at any round so far over the muscle total (None: no muscle)."""
    return _pct(lost_so_far, muscle_total)


def stopped_at_lean(receipt: dict[str, Any] | None) -> bool:
    """The round stopped at the LEAN band: before the quick tier, so the washer was never asked
    (no tier ran, no token spent). A failed round (no receipt) did not stop at LEAN."""
    if not receipt:
        return False
    asked = receipt["steps"] or receipt["calls"] or receipt["cost_tokens"]
    return receipt["stopped"] == LEAN_STOP and not asked


def _leak(r: Round) -> dict[str, Any]:
    """What a fat-exhausted round that got past LEAN reached (the hardening backlog's row)."""
    receipt = r.receipt or {}
    return {
        "round": r.round,
        "band": receipt.get("band"),
        "tiers": [s["tier"] for s in receipt.get("steps", [])],
        "proposed": receipt.get("proposed", 0),
        "refused": receipt.get("refused", 0),
        "applied": receipt.get("applied", 0),
        "cost_tokens": receipt.get("cost_tokens", 0),
        "failed": r.failed,
    }


def _calls(washes: Iterable[Mapping[str, int]]) -> dict[str, float]:
    """``calls/<seat>``: the washer's model calls per seat over the washes (none for a rule-based washer)."""
    out: dict[str, float] = {}
    for calls in washes:
        for seat, n in calls.items():
            out[f"calls/{seat}"] = out.get(f"calls/{seat}", 0.0) + n
    return out


def store_rounds(
    rds: list[Round], expected: dict[str, Any], config_yaml: str, manifest: dict, planned: int, dry_stop: int
) -> Result:
    """The store run's result; ``planned`` rounds were asked for, ``dry_stop`` is the user's early
    stop (0: none)."""
    muscle_total = len(expected.get("muscle", []))
    no_op_store = bool(expected.get("expectNoOp"))
    scored = [r for r in rds if r.score is not None]
    first_bad = 0
    lost_by_phase = {"has-fat": 0, "fat-exhausted": 0}
    series: dict[str, list[float]] = {
        k: []
        for k in (
            "round_muscle_kept",
            "round_fact_loss_pct",
            "round_fact_loss_cum_pct",
            "round_missing_now_pct",
            "round_fat_removed_pct",
            "round_no_op",
            "round_applied",
            "round_tokens_total",
            "round_tokens_always_loaded",
        )
    }
    for r in scored:
        score = r.score
        assert score is not None  # scored: the rounds with a score
        now = len(r.lost_now)
        lost_by_phase[r.phase] += now
        changed = bool(score["noOp"]["changed"])
        if not first_bad and (r.lost_so_far or (no_op_store and changed)):
            first_bad = r.round
        applied = r.receipt["applied"] if r.receipt else 0
        series["round_muscle_kept"].append(score["muscle"]["kept"])
        series["round_fact_loss_pct"].append(_pct(now, muscle_total) or 0.0)
        series["round_fact_loss_cum_pct"].append(fact_loss_pct(r.lost_so_far, muscle_total) or 0.0)
        series["round_missing_now_pct"].append(_pct(len(score["muscle"]["lost"]), muscle_total) or 0.0)
        fat = score["fat"]
        series["round_fat_removed_pct"].append(_pct(fat["removed"], fat["total"]) or 0.0)
        series["round_no_op"].append(float(not changed))
        series["round_applied"].append(float(applied))
        series["round_tokens_total"].append(float(r.tokens_total))
        series["round_tokens_always_loaded"].append(float(r.tokens_always_loaded))
    exhausted = [r for r in rds if r.phase == "fat-exhausted"]
    leaks = [_leak(r) for r in exhausted if not stopped_at_lean(r.receipt)]
    last = scored[-1].score if scored else None
    lost = scored[-1].lost_so_far if scored else 0
    stopped_early = bool(dry_stop) and len(rds) < planned and bool(rds) and rds[-1].failed is None
    metrics = {
        "rounds": float(len(rds)),
        "rounds_planned": float(planned),
        "dry_stop_after": float(dry_stop) if stopped_early else None,
        "failed_rounds": float(sum(r.failed is not None for r in rds)),
        "first_bad_round": float(first_bad),
        "store_ceiling": float((first_bad - 1) if first_bad else len(scored)),
        "store_ceiling_lower_bound": float(not first_bad),
        "muscle_total": float(muscle_total),
        "muscle_lost": float(lost),
        "fact_loss_pct": fact_loss_pct(lost, muscle_total),
        "fact_loss_has_fat_pct": _pct(lost_by_phase["has-fat"], muscle_total),
        "fact_loss_fat_exhausted_pct": _pct(lost_by_phase["fat-exhausted"], muscle_total),
        "missing_now_pct": _pct(len(last["muscle"]["lost"]), muscle_total) if last else None,
        "fat_total": float(len(expected.get("fat", []))),
        "fat_removed_pct": _pct(last["fat"]["removed"], last["fat"]["total"]) if last else None,
        "phase_boundary_round": float(exhausted[0].round) if exhausted else 0.0,
        "post_exhaustion_rounds": float(len(exhausted)),
        "post_exhaustion_stopped_at_lean": float(not leaks) if exhausted else None,
        "post_exhaustion_leaks": float(len(leaks)) if exhausted else None,
        "post_exhaustion_applied_nothing": (
            float(all(r.receipt is not None and r.receipt["applied"] == 0 for r in exhausted)) if exhausted else None
        ),
        "refused_muscle_deletes": float(
            sum(
                "holds muscle" in f.get("why", "")
                for r in scored
                for s in (r.receipt or {}).get("steps", [])
                for f in s["refused"]
            )
        ),
        "cost_tokens": float(sum((r.receipt or {}).get("cost_tokens", 0) for r in scored)),
        # issue 49: a round that repeats an earlier one is no new observation, and a washer that
        # changed nothing still spent its tokens
        "rounds_copied": float(sum(r.copy_of is not None for r in scored)),
        "cost_tokens_idle": float(
            sum((r.receipt or {}).get("cost_tokens", 0) for r in scored if not (r.receipt or {}).get("applied"))
        ),
        **_calls((r.receipt or {}).get("calls", {}) for r in scored),
    }
    files = artifacts(rds)
    files["config.yaml"] = config_yaml
    files["leaks.json"] = json.dumps(leaks, indent=1) + "\n"
    muscle = {m["id"]: m["needle"] for m in expected.get("muscle", [])}
    files["muscle.json"] = json.dumps(muscle, indent=1, ensure_ascii=False) + "\n"  # for washexp compare
    return Result({k: v for k, v in metrics.items() if v is not None}, files, manifest=manifest, series=series)


def ceiling_of(stores: list[dict[str, float]]) -> dict[str, float]:
    """The minimum over stores of their ceilings, exact values and lower bounds kept apart: the
    ceiling is exact when some exact value is at or below every lower bound (a store measured
    exactly 2 beside one that is >= 2 gives exactly 2), else it is the lowest lower bound."""
    exact = [v["store_ceiling"] for v in stores if not v["store_ceiling_lower_bound"]]
    bound = [v["store_ceiling"] for v in stores if v["store_ceiling_lower_bound"]]
    out = {}
    if exact:
        out["ceiling_exact_min"] = min(exact)
    if bound:
        out["ceiling_bound_min"] = min(bound)
    is_exact = bool(exact) and (not bound or min(exact) <= min(bound))
    out["ceiling"] = min(exact) if is_exact else min(bound)
    out["ceiling_lower_bound"] = float(not is_exact)
    return out


def measurement(name: str, config_yaml: str, manifest: dict) -> Callable[[dict], Result]:
    def summarize(per_child: dict[tuple[str, str], dict[str, float] | None]) -> Result:
        """``per_child``: (store, gauge arm) -> the store run's metrics (None: it failed)."""
        out: dict[str, float] = {"stores": float(len(per_child))}
        done = {k: v for k, v in per_child.items() if v is not None}
        out["failed"] = float(len(per_child) - len(done))
        arms = sorted({arm for _, arm in per_child})
        for arm in arms:
            rows = [v for (_, a), v in done.items() if a == arm]
            if not rows:
                continue
            prefix = f"{arm}/"
            out |= {prefix + k: v for k, v in ceiling_of(rows).items()}
            out[prefix + "muscle_lost"] = sum(v["muscle_lost"] for v in rows)
            out[prefix + "muscle_total"] = sum(v["muscle_total"] for v in rows)
            for key in ("fact_loss_pct", "fact_loss_has_fat_pct", "fact_loss_fat_exhausted_pct", "fat_removed_pct"):
                values = [v[key] for v in rows if key in v]
                if values:
                    out[prefix + key] = sum(values) / len(values)
            lean = [v["post_exhaustion_stopped_at_lean"] for v in rows if "post_exhaustion_stopped_at_lean" in v]
            if lean:
                out[prefix + "post_exhaustion_stopped_at_lean_stores"] = float(sum(lean))
                out[prefix + "post_exhaustion_applied_nothing_stores"] = float(
                    sum(v["post_exhaustion_applied_nothing"] for v in rows if "post_exhaustion_applied_nothing" in v)
                )
                out[prefix + "post_exhaustion_stores"] = float(len(lean))
        return Result(out, {"config.yaml": config_yaml}, manifest=manifest)

    return summarize


def sawtooth_arm(arm: Arm, config_yaml: str, manifest: dict) -> Result:
    score = arm.final_score or {}
    muscle = score.get("muscle", {})
    metrics = {
        "sessions": float(len(arm.sessions)),
        "always_loaded_total": float(arm.total),
        "run_cost_tokens": float(arm.cost),
        "total_with_costs": float(arm.total + arm.cost),
        "washes": float(sum(s.fired and s.failed is None for s in arm.sessions if arm.name == "A")),
        "gauge_fired": float(sum(s.fired for s in arm.sessions)),
        "failed_washes": float(sum(s.failed is not None for s in arm.sessions)),
        "muscle_total": float(muscle.get("total", 0)),
        "muscle_kept": float(muscle.get("kept", 0)),
        **_calls(s.calls for s in arm.sessions),
    }
    series = {
        "session_always_loaded": [float(s.always_loaded) for s in arm.sessions],
        "session_fired": [float(s.fired) for s in arm.sessions],
        "session_applied": [float(s.applied) for s in arm.sessions],
    }
    files = {**arm_artifacts(arm), "config.yaml": config_yaml}
    return Result(metrics, files, manifest=manifest, series=series)


def sawtooth_totals(config_yaml: str, manifest: dict) -> Callable[[dict], Result]:
    def summarize(per_arm: dict[str, dict[str, float] | None]) -> Result:
        a, b = per_arm.get("A"), per_arm.get("B")
        out: dict[str, float] = {}
        if a and b:
            out = {
                "A/total": a["always_loaded_total"],
                "A/run_costs": a["run_cost_tokens"],
                "A/total_with_costs": a["total_with_costs"],
                "A/washes": a["washes"],
                "A/muscle_kept": a["muscle_kept"],
                "A/muscle_total": a["muscle_total"],
                "B/total": b["always_loaded_total"],
                "delta_pct": 100.0 * (b["always_loaded_total"] - a["total_with_costs"]) / b["always_loaded_total"],
            }
        return Result(out, {"config.yaml": config_yaml}, manifest=manifest)

    return summarize


def headline(name: str, metrics: dict[str, float], gauges: dict[str, str]) -> str:
    """The measurement's closing line; ``gauges``: each arm's gauge name (``configured`` -> its name)."""
    if name == "sawtooth":
        d = metrics.get("delta_pct")
        return "delta n/a" if d is None else f"delta {d:.1f}% over B (A's run costs included)"
    parts = []
    for arm in ("configured", "off"):
        if f"{arm}/ceiling" in metrics:
            bound = "≥" if metrics.get(f"{arm}/ceiling_lower_bound") else ""
            parts.append(
                f"gauge {gauges[arm]}: ceiling {bound}{metrics[f'{arm}/ceiling']:.0f}, "
                f"muscle lost {metrics[f'{arm}/muscle_lost']:.0f}/{metrics[f'{arm}/muscle_total']:.0f}"
            )
    return "; ".join(parts) or "no store finished"
