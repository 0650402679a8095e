"""Band gauges: from a caliper measurement (and the gauge's own state) to a band and whether a wash is due.

Each gauge pins one generation of CoalWash's band model; its option file ``conf/gauge/<name>.yaml``
names the version and holds the thresholds. ``model`` picks the rule:

- ``fat-schmitt`` (``coalwash-1.0``, CoalWash v1.0.0+ ``bandVerdict``): a Schmitt trigger on
  mechanical (certain) fat: unarmed, it arms at fat >= ``fat_arm_tokens``; armed, it stays armed
  while fat > ``fat_disarm_tokens``. The wall (footprint >= ``footprint_cap_tokens``, or index >=
  ``index_cap_bytes`` or >= ``index_cap_lines``) gives FULL: ``absolute-cap`` when armed,
  ``externalize`` when not. Otherwise FULL ``economic`` when armed and the break-even over the fat
  holds, OBESE when armed, LEAN when not. BMI = footprint / (footprint - fat), informational only.
  It fires on OBESE and FULL except ``externalize`` (all muscle: a wash cannot help, CoalWash only
  advises). Two CoalWash details are left out on purpose: the second break-even over the RE-TIER
  demotable mass (we have no re-tier envelope; CoalWash without one never reaches FULL/economic)
  and the per-episode economic latch (it can only relabel OBESE as FULL, never change ``fires``).
- ``bmi-floor`` (``coalwash-beta5``, CoalWash v0.1.0-beta.5 ``bandVerdict``): BMI = footprint /
  lean floor. The floor is stamped from the first measurement that has a footprint, which itself
  reads LEAN ``no-floor-yet``; ``after_wash`` re-stamps it from a gate-passed clean (beta.5's
  ``setLeanFloor``). The cap comes first: footprint >= ``footprint_cap_tokens`` (6% x 200,000) or the
  index caps give FULL ``absolute-cap``. Then FULL >= ``full_bmi``, OBESE >= ``obese_bmi``, PLUMP >=
  ``plump_bmi``, else LEAN. The break-even fat is footprint - floor (the whole footprint before a
  floor exists, an upper bound). It fires on every band but LEAN (each ask is taken; beta.5's
  day-based snoozes are not modelled, a simulated session has no clock).
- ``off``: band ``OFF``, always fires: a wash always proceeds.

Break-even (every generation): ``runCost = round(max(totalStore, footprint) x 3)``, ``perDay =
round(fat x sessionsPerDay)``, ``horizonCarry = perDay x 14``, economical when horizonCarry > runCost.
sessionsPerDay comes from the state (default 1), clamped to [0.1, 20].

State lives in ``<store>/.washexp-gauge.json`` (``STATE_NAME``): a JSON file, never a ``*.md``, so
the scorer, the no-op check and the caliper never see it. It is written atomically (temp file in
the same folder, then rename). A store under a ``fixtures/`` folder is committed input whose
identity is its content, so no state is kept in it (each measurement starts fresh) unless a
``--state`` file elsewhere is named.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from washexp.errors import ConfigError, WashexpError, first_line
from washexp.inputs import parse_json, read_untrusted
from washexp.registry import unknown_name

DEFAULT_GAUGE = "coalwash-1.0"
STATE_NAME = ".washexp-gauge.json"
STATE_SCHEMA = 1
FIXTURES = "fixtures"

SESSIONS_PER_DAY_MIN = 0.1
SESSIONS_PER_DAY_MAX = 20.0


def _js_round(value: float) -> int:
    """JavaScript ``Math.round``: halves go up."""
    return math.floor(value + 0.5)


# ---------------------------------------------------------------------------- config


@dataclass
class GaugeConfig:
    """One gauge option file. Defaults are CoalWash v1.0.0's; each model reads only its own fields:
    ``fat-schmitt``: fat marks, caps, economics; ``bmi-floor``: BMI bands, caps, economics."""

    name: str = DEFAULT_GAUGE
    pins: str = ""
    """The CoalWash release whose bands this gauge follows (``CoalWash v1.0.0 band gauge: ...``):
    required, never inherited (``gauge=off`` names no release)."""
    model: str = "fat-schmitt"
    fat_arm_tokens: int = 500
    fat_disarm_tokens: int = 200
    footprint_cap_tokens: int = 600_000
    index_cap_bytes: int = 25 * 1024
    index_cap_lines: int = 200
    plump_bmi: float = 1.3
    obese_bmi: float = 1.6
    full_bmi: float = 2.0
    horizon_days: int = 14
    run_cost_multiplier: int = 3


def gauge_dir() -> Path:
    """``conf/gauge/`` of the project around the working directory; outside any project, the
    one beside the package's source (``washexp caliper`` works anywhere)."""
    from washexp.project import find_root

    try:
        return find_root() / "conf" / "gauge"
    except ConfigError:
        return Path(__file__).resolve().parents[3] / "conf" / "gauge"


def gauge_names() -> list[str]:
    """The gauges that have an option file in ``conf/gauge/``."""
    return sorted(p.stem for p in gauge_dir().glob("*.yaml"))


def load_config(name: str) -> GaugeConfig:
    """The ``GaugeConfig`` of ``conf/gauge/<name>.yaml``; an unknown name answers "did you mean"."""
    known = gauge_names()
    if name not in known:
        raise ConfigError(unknown_name("gauge", name, known))
    return _config_from(gauge_dir() / f"{name}.yaml")


def _config_from(source: Path | Mapping) -> GaugeConfig:
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    where = str(source) if isinstance(source, Path) else "gauge config"
    try:
        raw = OmegaConf.load(source) if isinstance(source, Path) else OmegaConf.create(dict(source))
        merged = OmegaConf.merge(OmegaConf.structured(GaugeConfig), raw)
        made = OmegaConf.to_object(merged)
    except OmegaConfBaseException as err:
        raise ConfigError(f"{where}: {first_line(err)}") from None
    assert isinstance(made, GaugeConfig)  # merged onto the structured GaugeConfig
    return made


# ---------------------------------------------------------------------------- state


@dataclass(frozen=True)
class GaugeState:
    """What a gauge carries between measurements of one store."""

    armed: bool = False
    """fat-schmitt: the trigger's state after the last measurement."""
    floor_tokens: int | None = None
    """bmi-floor: the stamped lean floor (footprint tokens), None before the first stamp."""
    sessions_per_day: float = 1.0
    """Sessions a day, for the break-even; clamped to [0.1, 20] where it is used."""

    def to_dict(self) -> dict:
        return {"schema": STATE_SCHEMA, **asdict(self)}

    @classmethod
    def from_dict(cls, data: Any, where: str) -> GaugeState:
        """Parse a state file's JSON, or raise ``WashexpError`` naming ``where`` and the bad field."""
        if not isinstance(data, dict):
            raise WashexpError(f"{where}: not a gauge state (expected a JSON object)")
        if data.get("schema") != STATE_SCHEMA:
            raise WashexpError(f"{where}: schema {data.get('schema')!r} is not {STATE_SCHEMA}")
        unknown = set(data) - {"schema", "armed", "floor_tokens", "sessions_per_day"}
        if unknown:
            raise WashexpError(f"{where}: unknown field {sorted(unknown)[0]!r}")
        armed = data.get("armed", False)
        floor = data.get("floor_tokens")
        spd = data.get("sessions_per_day", 1.0)
        if not isinstance(armed, bool):
            raise WashexpError(f"{where}: armed must be true or false")
        if floor is not None and (isinstance(floor, bool) or not isinstance(floor, int) or floor < 0):
            raise WashexpError(f"{where}: floor_tokens must be a non-negative integer or null")
        if isinstance(spd, bool) or not isinstance(spd, int | float) or not math.isfinite(spd) or spd <= 0:
            raise WashexpError(f"{where}: sessions_per_day must be a positive number")
        return cls(armed=armed, floor_tokens=floor, sessions_per_day=float(spd))


def state_path(store: str | Path) -> Path | None:
    """Where a store's gauge state lives: ``<store>/.washexp-gauge.json`` (not a ``*.md``); None
    for a store under a ``fixtures/`` folder, which keeps no state."""
    if FIXTURES in Path(store).resolve().parts[:-1]:
        return None
    return Path(store) / STATE_NAME


def _check_not_md(path: Path) -> None:
    if path.name.endswith(".md"):
        raise WashexpError(f"{path}: a gauge state file must not be a *.md file (it would join the scored store)")


def load_state(store: str | Path, path: str | Path | None = None) -> GaugeState:
    """The store's gauge state; a fresh ``GaugeState()`` when there is no file yet (or none is kept)."""
    inside = path is None  # the store's own file (a path the user names may be a symlink)
    path = Path(path) if path is not None else state_path(store)
    if path is None:
        return GaugeState()
    _check_not_md(path)
    data = read_untrusted(path, inside=inside)  # a regular file, capped: never a FIFO, device or link out
    if data is None:
        return GaugeState()
    return GaugeState.from_dict(parse_json(data, path), str(path))


def save_state(store: str | Path, state: GaugeState, path: str | Path | None = None) -> Path | None:
    """Write the state atomically (same-folder temp file, then rename); return its path (None: the
    store keeps no state, nothing is written). The file keeps its mode and owner; the temporary
    files a write killed midway left are removed first."""
    path = Path(path) if path is not None else state_path(store)
    if path is None:
        return None
    _check_not_md(path)
    for leftover in path.parent.glob(f".{path.name}.*.tmp"):  # what a write killed midway left
        if leftover.is_file() and not leftover.is_symlink():
            leftover.unlink(missing_ok=True)
    try:
        like = os.lstat(path)
    except FileNotFoundError:
        like = None
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        if like is not None:  # the state file keeps its mode and (where we may) its owner; a new one is 0600
            os.fchmod(fd, like.st_mode & 0o777)
            if (like.st_uid, like.st_gid) != (os.getuid(), os.getgid()):
                with contextlib.suppress(PermissionError):
                    os.fchown(fd, like.st_uid, like.st_gid)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(state.to_dict(), f, indent=2)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


# ---------------------------------------------------------------------------- verdict


class Footprint(Protocol):
    """What a gauge reads from a measurement (``washexp.wash.coalwash.caliper.Measurement`` has it)."""

    @property
    def footprint_tokens(self) -> int: ...
    @property
    def total_tokens_est(self) -> int: ...
    @property
    def mech_fat_tokens(self) -> int: ...
    @property
    def index_bytes(self) -> int: ...
    @property
    def index_lines(self) -> int: ...


@dataclass(frozen=True)
class BreakEven:
    """Is one wash run cheaper than carrying ``fat_tokens`` for the horizon? (all ``~est``)"""

    fat_tokens: int
    sessions_per_day: float
    per_day: int
    run_cost_tokens: int
    horizon_carry_tokens: int
    horizon_days: int
    break_even_days: float | None
    """Days until the run pays for itself; None when nothing is carried (never)."""
    economical: bool

    def to_dict(self) -> dict:
        return asdict(self)


def clamp_sessions_per_day(value: float) -> float:
    return min(SESSIONS_PER_DAY_MAX, max(SESSIONS_PER_DAY_MIN, float(value)))


def break_even(
    fat_tokens: float,
    footprint_tokens: int,
    total_store_tokens: int,
    sessions_per_day: float = 1.0,
    horizon_days: int = 14,
    run_cost_multiplier: int = 3,
) -> BreakEven:
    """CoalWash ``breakEven``: economical when ``round(fat x spd) x horizon > round(max(total, footprint) x 3)``."""
    spd = clamp_sessions_per_day(sessions_per_day)
    fat = max(0, _js_round(fat_tokens))
    per_day = _js_round(fat * spd)
    run_cost = _js_round(max(total_store_tokens, footprint_tokens) * run_cost_multiplier)
    carry = per_day * horizon_days
    return BreakEven(
        fat_tokens=fat,
        sessions_per_day=spd,
        per_day=per_day,
        run_cost_tokens=run_cost,
        horizon_carry_tokens=carry,
        horizon_days=horizon_days,
        break_even_days=run_cost / per_day if per_day > 0 else None,
        economical=carry > run_cost,
    )


@dataclass(frozen=True)
class Verdict:
    """A gauge's answer: the band, whether a wash is due now, why, and the state to keep."""

    band: str
    fires: bool
    reason: str
    state: GaugeState
    bmi: float | None = None
    break_even: BreakEven | None = field(default=None)

    def to_dict(self) -> dict:
        return {
            "band": self.band,
            "fires": self.fires,
            "reason": self.reason,
            "bmi": None if self.bmi is None else round(self.bmi, 4),
            "breakEven": None if self.break_even is None else self.break_even.to_dict(),
            "state": asdict(self.state),
        }


class Gauge(Protocol):
    @property
    def config(self) -> GaugeConfig: ...  # read-only: the gauges are frozen dataclasses

    def verdict(self, m: Footprint, state: GaugeState) -> Verdict:
        """The band for measurement ``m`` given the state after the previous one."""
        ...

    def after_wash(self, m: Footprint, state: GaugeState) -> GaugeState:
        """The state to keep after a gate-passed wash measured as ``m``."""
        ...


def _cap_hit(cfg: GaugeConfig, m: Footprint) -> bool:
    return (
        m.footprint_tokens >= cfg.footprint_cap_tokens
        or m.index_bytes >= cfg.index_cap_bytes
        or m.index_lines >= cfg.index_cap_lines
    )


def _economics(cfg: GaugeConfig, m: Footprint, fat: float, state: GaugeState) -> BreakEven:
    return break_even(
        fat, m.footprint_tokens, m.total_tokens_est, state.sessions_per_day, cfg.horizon_days, cfg.run_cost_multiplier
    )


@dataclass(frozen=True)
class FatSchmittGauge:
    """CoalWash v1.0.0+: certain fat arms a Schmitt trigger; the wall is the capacity line."""

    config: GaugeConfig

    def __post_init__(self):
        c = self.config
        if not 0 <= c.fat_disarm_tokens < c.fat_arm_tokens:
            raise ConfigError(f"gauge {c.name}: need 0 <= fat_disarm_tokens < fat_arm_tokens")

    def verdict(self, m: Footprint, state: GaugeState) -> Verdict:
        c = self.config
        fat = max(0, _js_round(m.mech_fat_tokens))
        # the dead zone between the marks keeps whatever state the trigger already had
        armed = fat > c.fat_disarm_tokens if state.armed else fat >= c.fat_arm_tokens
        muscle = max(0, _js_round(m.footprint_tokens - fat))
        bmi = m.footprint_tokens / muscle if muscle > 0 else None
        econ = _economics(c, m, fat, state)
        new_state = replace(state, armed=armed)
        if _cap_hit(c, m):
            if armed:
                return Verdict("FULL", True, "absolute-cap", new_state, bmi, econ)
            return Verdict("FULL", False, "externalize", new_state, bmi, econ)
        if armed and econ.economical:
            return Verdict("FULL", True, "economic", new_state, bmi, econ)
        if armed:
            return Verdict("OBESE", True, "fat", new_state, bmi, econ)
        return Verdict("LEAN", False, "fat", new_state, bmi, econ)

    def after_wash(self, m: Footprint, state: GaugeState) -> GaugeState:
        return state  # fat is re-measured every time; nothing is stamped


@dataclass(frozen=True)
class BmiFloorGauge:
    """CoalWash v0.1.0-beta.5: four bands on footprint / stamped lean floor, plus the cap."""

    config: GaugeConfig

    def __post_init__(self):
        c = self.config
        if not 1.0 <= c.plump_bmi < c.obese_bmi < c.full_bmi:
            raise ConfigError(f"gauge {c.name}: need 1 <= plump_bmi < obese_bmi < full_bmi")

    def verdict(self, m: Footprint, state: GaugeState) -> Verdict:
        c = self.config
        floor = state.floor_tokens or 0
        bmi = m.footprint_tokens / floor if floor > 0 else None
        econ = _economics(c, m, m.footprint_tokens - floor, state)
        new_state = state
        if floor <= 0 and m.footprint_tokens > 0:
            new_state = replace(state, floor_tokens=m.footprint_tokens)  # the first measurement is the floor
        if _cap_hit(c, m):
            band, reason = "FULL", "absolute-cap"
        elif bmi is None:
            band, reason = "LEAN", "no-floor-yet"
        elif bmi >= c.full_bmi:
            band, reason = "FULL", "bmi"
        elif bmi >= c.obese_bmi:
            band, reason = "OBESE", "bmi"
        elif bmi >= c.plump_bmi:
            band, reason = "PLUMP", "bmi"
        else:
            band, reason = "LEAN", "bmi"
        return Verdict(band, band != "LEAN", reason, new_state, bmi, econ)

    def after_wash(self, m: Footprint, state: GaugeState) -> GaugeState:
        # beta.5 stamps the post-clean footprint as the new floor, after a gate-passed clean only
        return replace(state, floor_tokens=m.footprint_tokens) if m.footprint_tokens > 0 else state


@dataclass(frozen=True)
class OffGauge:
    """No gauge: nothing is ever stopped (the break-even is still shown, over mechanical fat)."""

    config: GaugeConfig

    def verdict(self, m: Footprint, state: GaugeState) -> Verdict:
        return Verdict("OFF", True, "gauge-off", state, None, _economics(self.config, m, m.mech_fat_tokens, state))

    def after_wash(self, m: Footprint, state: GaugeState) -> GaugeState:
        return state


RELEASE = re.compile(r"\bCoalWash v\d+\.\d+\.\d+(?:-[0-9A-Za-z.]+)?")
"""How a gauge's ``pins`` names the release it follows (``CoalWash v0.1.0-beta.5``)."""

MODELS: dict[str, Callable[[GaugeConfig], Gauge]] = {
    "fat-schmitt": FatSchmittGauge,
    "bmi-floor": BmiFloorGauge,
    "off": OffGauge,
}
"""``model`` in a gauge's option file -> the rule."""


def load_gauge(name_or_config: str | GaugeConfig | Mapping) -> Gauge:
    """A gauge from its option-file name, a ``GaugeConfig``, or a mapping (a Hydra node) of one."""
    if isinstance(name_or_config, str):
        cfg = load_config(name_or_config)
    elif isinstance(name_or_config, GaugeConfig):
        cfg = name_or_config
    else:
        cfg = _config_from(name_or_config)
    if cfg.model not in MODELS:
        raise ConfigError(unknown_name("gauge model", cfg.model, list(MODELS)))
    gauge = MODELS[cfg.model](cfg)
    if not (RELEASE.search(cfg.pins) if cfg.model != "off" else cfg.pins.strip()):
        raise ConfigError(
            f"gauge {cfg.name}: pins must name the CoalWash release its bands follow "
            f"(e.g. 'CoalWash v1.0.0 band gauge: ...'), got {cfg.pins!r}"
        )
    return gauge
