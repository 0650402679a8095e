"""Band gauges: CoalWash v1.0.0's certain-fat Schmitt trigger, beta.5's BMI bands, off; state files; loading.

Walls are exercised on real stores written into tmp_path; the trigger and the bands on readings
whose figures are set directly (a gauge reads only the numbers of a measurement).
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from washexp.errors import ConfigError, WashexpError
from washexp.wash.coalwash.caliper import Measurement, measure
from washexp.wash.coalwash.files import md_names
from washexp.wash.coalwash.gauge import (
    RELEASE,
    STATE_NAME,
    GaugeConfig,
    GaugeState,
    _config_from,
    break_even,
    gauge_dir,
    gauge_names,
    load_gauge,
    load_state,
    save_state,
    state_path,
)

L24 = "- Node pinned at 22.4.1."  # 24 chars: a repeat costs 6 tok of certain fat


def reading(footprint: int = 20_000, fat: int = 0, total: int = 100_000, index_bytes: int = 0, index_lines: int = 0):
    """A measurement with the figures a gauge reads; a large store by default, so a run is not economical."""
    return Measurement(
        store="store",
        files=10,
        total_bytes=total * 4,
        total_tokens_est=total,
        always_loaded=("MEMORY.md",),
        always_loaded_bytes=footprint * 4,
        always_loaded_tokens_est=footprint,
        unread=(),
        index_bytes=index_bytes,
        index_lines=index_lines,
        mech_fat_dup_tokens=fat,
        mech_fat_blank_tokens=0,
    )


def _store(tmp_path: Path, index: str, **others: str) -> Path:
    store = tmp_path / "store"
    store.mkdir(exist_ok=True)
    (store / "MEMORY.md").write_text(index, encoding="utf-8")
    for name, text in others.items():
        (store / name).write_text(text, encoding="utf-8")
    return store


# --------------------------------------------------------------------------- coalwash-1.0


def test_v1_hysteresis_arms_at_500_holds_at_300_disarms_at_200():
    gauge = load_gauge("coalwash-1.0")
    state = GaugeState()
    seen = []
    for fat in (499, 500, 300, 201, 200, 300, 500):
        v = gauge.verdict(reading(fat=fat), state)
        state = v.state
        seen.append((fat, v.band, v.fires, state.armed))
    assert seen == [
        (499, "LEAN", False, False),
        (500, "OBESE", True, True),  # arms
        (300, "OBESE", True, True),  # the dead zone holds the armed state
        (201, "OBESE", True, True),
        (200, "LEAN", False, False),  # disarms at <= 200
        (300, "LEAN", False, False),  # the dead zone holds the unarmed state too
        (500, "OBESE", True, True),
    ]


def test_v1_full_when_armed_and_the_break_even_holds():
    gauge = load_gauge("coalwash-1.0")
    # fat 600 over a small store: runCost = 1000 x 3 = 3000 < carry = 600 x 14 = 8400
    v = gauge.verdict(reading(footprint=1000, fat=600, total=1000), GaugeState())
    assert (v.band, v.reason, v.fires) == ("FULL", "economic", True)
    assert v.break_even.economical and v.break_even.run_cost_tokens == 3000
    # the same fat over a big store does not pay: OBESE
    v = gauge.verdict(reading(footprint=1000, fat=600, total=1000_000), GaugeState())
    assert (v.band, v.reason, v.fires) == ("OBESE", "fat", True)
    # economical but unarmed: LEAN, nothing fires
    v = gauge.verdict(reading(footprint=100, fat=450, total=100), GaugeState())
    assert v.break_even.economical and (v.band, v.fires) == ("LEAN", False)


def test_v1_bmi_is_informational_only():
    gauge = load_gauge("coalwash-1.0")
    v = gauge.verdict(reading(footprint=1000, fat=400), GaugeState())
    assert v.bmi == pytest.approx(1000 / 600)
    assert v.band == "LEAN"


def test_v1_the_wall_at_200_index_lines(tmp_path):
    gauge = load_gauge("coalwash-1.0")
    # 199 newline-terminated lines are 200 by CoalWash's count (split('\n') keeps the empty tail)
    lines = "".join(f"- [[topic-{i:03d}]]: muscle fact number {i}\n" for i in range(199))
    store = _store(tmp_path, lines)
    m = measure(store)
    assert m.index_lines == 200 and m.mech_fat_tokens == 0
    v = gauge.verdict(m, GaugeState())
    assert (v.band, v.reason, v.fires) == ("FULL", "externalize", False)  # all muscle: a wash cannot help
    store = _store(tmp_path, lines[: lines.rindex("- [[topic-198")])
    assert measure(store).index_lines == 199
    assert gauge.verdict(measure(store), GaugeState()).band == "LEAN"


def test_v1_the_wall_at_25_kb_armed_is_absolute_cap(tmp_path):
    gauge = load_gauge("coalwash-1.0")
    fat = f"{L24}\n" * 100  # 99 repeats x 6 = 594 tok: arms
    index = ("# Memory\n" + fat).ljust(25 * 1024, "m")
    store = _store(tmp_path, index)
    m = measure(store)
    assert m.index_bytes == 25_600 and m.index_lines < 200 and m.mech_fat_tokens == 594
    v = gauge.verdict(m, GaugeState())
    assert (v.band, v.reason, v.fires) == ("FULL", "absolute-cap", True)
    store = _store(tmp_path, index[:-1])  # one byte under the cap
    v = gauge.verdict(measure(store), GaugeState())
    assert v.reason != "absolute-cap" and v.band in {"OBESE", "FULL"}


def test_v1_the_wall_at_600k_footprint():
    gauge = load_gauge("coalwash-1.0")
    assert gauge.verdict(reading(footprint=600_000, total=600_000), GaugeState()).reason == "externalize"
    assert gauge.verdict(reading(footprint=599_999, total=600_000), GaugeState()).band == "LEAN"


# --------------------------------------------------------------------------- coalwash-beta5


def test_beta5_stamps_the_floor_at_the_first_measurement_then_bands_on_bmi():
    gauge = load_gauge("coalwash-beta5")
    first = gauge.verdict(reading(footprint=1000, total=1000), GaugeState())
    assert (first.band, first.reason, first.fires, first.bmi) == ("LEAN", "no-floor-yet", False, None)
    assert first.state.floor_tokens == 1000
    bands = []
    for footprint in (1000, 1299, 1300, 1599, 1600, 1999, 2000, 5000):
        v = gauge.verdict(reading(footprint=footprint, total=footprint), first.state)
        assert v.state.floor_tokens == 1000  # the floor stays stamped
        bands.append((footprint, v.band, v.fires))
    assert bands == [
        (1000, "LEAN", False),
        (1299, "LEAN", False),
        (1300, "PLUMP", True),
        (1599, "PLUMP", True),
        (1600, "OBESE", True),
        (1999, "OBESE", True),
        (2000, "FULL", True),
        (5000, "FULL", True),
    ]


def test_beta5_cap_at_12000_tokens_comes_before_the_floor():
    gauge = load_gauge("coalwash-beta5")
    v = gauge.verdict(reading(footprint=12_000), GaugeState())
    assert (v.band, v.reason, v.fires) == ("FULL", "absolute-cap", True)
    assert v.state.floor_tokens == 12_000
    assert gauge.verdict(reading(footprint=11_999), GaugeState()).reason == "no-floor-yet"
    floor = GaugeState(floor_tokens=10_000)
    assert gauge.verdict(reading(footprint=1000, index_lines=200), floor).reason == "absolute-cap"
    assert gauge.verdict(reading(footprint=1000, index_bytes=25_600), floor).reason == "absolute-cap"


def test_beta5_break_even_fat_is_footprint_over_the_floor():
    gauge = load_gauge("coalwash-beta5")
    v = gauge.verdict(reading(footprint=1600, total=1600), GaugeState(floor_tokens=1000))
    assert v.break_even.fat_tokens == 600  # not the mechanical fat (0 here)
    assert v.break_even.economical  # 600 x 14 = 8400 > 1600 x 3 = 4800
    v = gauge.verdict(reading(footprint=1000, total=1000), GaugeState())
    assert v.break_even.fat_tokens == 1000  # no floor yet: the whole footprint, an upper bound


def test_beta5_after_wash_restamps_the_floor():
    gauge = load_gauge("coalwash-beta5")
    state = GaugeState(floor_tokens=1000)
    assert gauge.verdict(reading(footprint=2400), state).band == "FULL"
    state = gauge.after_wash(reading(footprint=1500), state)
    assert state.floor_tokens == 1500
    assert gauge.verdict(reading(footprint=1500), state).band == "LEAN"
    assert load_gauge("coalwash-1.0").after_wash(reading(footprint=1500), GaugeState(armed=True)).armed


# --------------------------------------------------------------------------- off


def test_off_never_stops_a_wash():
    gauge = load_gauge("off")
    for m in (reading(fat=0), reading(fat=900), reading(footprint=700_000, index_lines=500)):
        v = gauge.verdict(m, GaugeState(armed=True))
        assert (v.band, v.fires, v.reason) == ("OFF", True, "gauge-off")
        assert v.state == GaugeState(armed=True)


# --------------------------------------------------------------------------- break-even


def test_break_even_both_ways_at_the_boundary():
    # carry = 300 x 1 x 14 = 4200; runCost = max(total, footprint) x 3
    assert not break_even(300, footprint_tokens=1000, total_store_tokens=1400).economical  # 4200 = 4200
    be = break_even(300, footprint_tokens=1000, total_store_tokens=1399)  # 4197 < 4200
    assert be.economical and (be.run_cost_tokens, be.horizon_carry_tokens) == (4197, 4200)
    assert break_even(300, footprint_tokens=1400, total_store_tokens=10).run_cost_tokens == 4200  # the max


def test_break_even_sessions_per_day_is_clamped():
    assert break_even(100, 0, 0, sessions_per_day=100).per_day == 2000  # clamped to 20
    assert break_even(100, 0, 0, sessions_per_day=0.01).per_day == 10  # clamped to 0.1
    assert break_even(5, 0, 0, sessions_per_day=2.5).per_day == 13  # round(12.5) goes up, as in JavaScript
    be = break_even(0, 100, 100)
    assert (be.economical, be.break_even_days) == (False, None)


def test_the_state_carries_sessions_per_day_into_the_verdict():
    gauge = load_gauge("coalwash-1.0")
    m = reading(footprint=5000, fat=600, total=5000)  # runCost 15000; carry 8400 at 1/day, 16800 at 2/day
    assert gauge.verdict(m, GaugeState()).band == "OBESE"
    assert gauge.verdict(m, GaugeState(sessions_per_day=2)).band == "FULL"


# --------------------------------------------------------------------------- state file


def test_state_round_trips_beside_the_store_never_as_md(tmp_path):
    store = _store(tmp_path, "# Memory\n")
    assert load_state(store) == GaugeState()  # no file yet: fresh
    state = GaugeState(armed=True, floor_tokens=1234, sessions_per_day=3.0)
    path = save_state(store, state)
    assert path == state_path(store) == store / STATE_NAME
    assert load_state(store) == state
    assert md_names(store) == ["MEMORY.md"]  # the scored *.md set is untouched
    assert sorted(os.listdir(store)) == [STATE_NAME, "MEMORY.md"]  # no temp file left behind
    assert json.loads(path.read_text())["schema"] == 1


def test_a_failed_write_keeps_the_old_state_and_leaves_no_temp_file(tmp_path, monkeypatch):
    store = _store(tmp_path, "# Memory\n")
    save_state(store, GaugeState(armed=True))

    def boom(*_):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        save_state(store, GaugeState(armed=False))
    assert load_state(store) == GaugeState(armed=True)
    assert sorted(os.listdir(store)) == [STATE_NAME, "MEMORY.md"]


def test_state_refuses_a_md_path(tmp_path):
    store = _store(tmp_path, "# Memory\n")
    with pytest.raises(WashexpError, match=r"must not be a \*\.md"):
        save_state(store, GaugeState(), store / "gauge.md")
    assert md_names(store) == ["MEMORY.md"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[1, 2]", "expected a JSON object"),
        ('{"schema": 2}', "schema 2"),
        ('{"schema": 1, "armed": "yes"}', "armed must be"),
        ('{"schema": 1, "floor_tokens": -5}', "floor_tokens must be"),
        ('{"schema": 1, "sessions_per_day": 0}', "sessions_per_day must be"),
        ('{"schema": 1, "armd": true}', "unknown field 'armd'"),
        ("{", "not valid JSON"),
    ],
)
def test_a_bad_state_file_is_one_error_naming_it(tmp_path, text, problem):
    store = _store(tmp_path, "# Memory\n")
    state_path(store).write_text(text)
    with pytest.raises(WashexpError, match=problem) as err:
        load_state(store)
    assert STATE_NAME in str(err.value)


# --------------------------------------------------------------------------- loading


def test_every_option_file_names_itself_and_pins_a_version():
    assert gauge_names() == ["coalwash-1.0", "coalwash-beta5", "off"]
    for name in gauge_names():
        gauge = load_gauge(name)
        assert gauge.config.name == name  # e.g. a bare `off` in YAML would read as false
        assert gauge.config.pins


@pytest.mark.parametrize("name", ["coalwash-1.0", "coalwash-beta5", "off"])
def test_a_gauge_whose_pinned_version_is_removed_does_not_load(name, tmp_path):
    """The trap: beta5 without its `pins:` line once loaded as "CoalWash v1.0.0" (a default)."""
    text = (gauge_dir() / f"{name}.yaml").read_text(encoding="utf-8")
    unpinned = "".join(line for line in text.splitlines(True) if not line.startswith("pins:"))
    assert unpinned != text
    (tmp_path / f"{name}.yaml").write_text(unpinned, encoding="utf-8")
    with pytest.raises(ConfigError, match=f"gauge {name}: pins must name the CoalWash release"):
        load_gauge(_config_from(tmp_path / f"{name}.yaml"))
    from omegaconf import OmegaConf

    with pytest.raises(ConfigError, match="pins must name"):
        load_gauge(dict(OmegaConf.load(tmp_path / f"{name}.yaml")))  # as a Hydra node reaches it


def test_each_gauge_pins_the_release_of_its_own_bands():
    assert RELEASE.search(load_gauge("coalwash-1.0").config.pins).group() == "CoalWash v1.0.0"
    assert RELEASE.search(load_gauge("coalwash-beta5").config.pins).group() == "CoalWash v0.1.0-beta.5"
    with pytest.raises(ConfigError, match="pins must name"):
        load_gauge({"name": "b5", "model": "bmi-floor", "pins": "the beta-era bands"})


def test_option_files_hold_the_pinned_thresholds():
    v1 = load_gauge("coalwash-1.0").config
    assert (v1.fat_arm_tokens, v1.fat_disarm_tokens, v1.footprint_cap_tokens) == (500, 200, 600_000)
    b5 = load_gauge("coalwash-beta5").config
    assert (b5.plump_bmi, b5.obese_bmi, b5.full_bmi, b5.footprint_cap_tokens) == (1.3, 1.6, 2.0, 12_000)
    for cfg in (v1, b5):
        assert (cfg.index_cap_bytes, cfg.index_cap_lines, cfg.horizon_days, cfg.run_cost_multiplier) == (
            25_600,
            200,
            14,
            3,
        )


def test_an_unknown_gauge_answers_did_you_mean():
    with pytest.raises(ConfigError, match="unknown gauge 'coalwash-beta'; did you mean 'coalwash-beta5'"):
        load_gauge("coalwash-beta")


def test_a_gauge_from_a_config_or_a_mapping():
    cfg = replace(GaugeConfig(), name="strict", pins="CoalWash v1.0.0 bands", fat_arm_tokens=100, fat_disarm_tokens=50)
    assert load_gauge(cfg).verdict(reading(fat=100), GaugeState()).band == "OBESE"
    gauge = load_gauge({"name": "b5", "pins": "CoalWash v0.1.0-beta.5 bands", "model": "bmi-floor", "full_bmi": 3.0})
    assert gauge.verdict(reading(footprint=2500), GaugeState(floor_tokens=1000)).band == "OBESE"
    with pytest.raises(ConfigError, match="fat_arm_tokns"):
        load_gauge({"name": "x", "fat_arm_tokns": 3})
    with pytest.raises(ConfigError, match="did you mean 'bmi-floor'"):
        load_gauge({"name": "x", "model": "bmi-flor"})
    with pytest.raises(ConfigError, match="fat_disarm_tokens < fat_arm_tokens"):
        load_gauge(replace(GaugeConfig(), fat_disarm_tokens=500))
    with pytest.raises(ConfigError, match="plump_bmi < obese_bmi"):
        load_gauge({"name": "x", "model": "bmi-floor", "obese_bmi": 1.2})
