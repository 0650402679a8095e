"""The washers a wash can use, built by name from a config node (``conf/washer/*.yaml``).

``WASHERS`` maps a name to a lazy ``"module:object"`` entry, so this package never imports a
washer it does not build. ``make_washer({"name": ..., **args}, model)`` builds one; an unknown
name, an unknown or missing argument, or a bad value is a one-line
:class:`~washexp.errors.ConfigError`.

A washer class that calls a chat model says so with ``needs_model = True``: it is built with the
sweep's model layer (``washexp.wash.washers.model``; ``model`` is never a config key), and a
``prompts()`` that gives its prompt files' sha256, which :func:`washer_spec` adds to the spec that
enters the run's identity. ``gates_off_only = True`` marks a control that runs only with
``gates=false`` (:func:`check_gates`).

Also here, shared by every washer: :class:`WasherError` (a washer that could not propose: the
pipeline records a FAILED round) and :func:`entailed_drops` (the drops a plan's own edits entail,
declared as ``approved_drops`` *candidates*: only an operator's approval makes them pass).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf

from washexp import plugins
from washexp.errors import ConfigError, WashexpError
from washexp.registry import Registry, unknown_name
from washexp.wash.coalwash.gate import drops_between
from washexp.wash.plan import Plan, PlanItem, apply_to_texts
from washexp.wash.washer import Washer
from washexp.wash.washers import plugin

WASHERS = Registry(
    "washer",
    {
        "reference": "washexp.wash.washers.reference:ReferenceWasher",
        "command": "washexp.wash.washers.command:CommandWasher",
        "coalwash": "washexp.wash.washers.coalwash:CoalWashWasher",
        "plain": "washexp.wash.washers.plain:PlainWasher",
    },
)
"""``wash.washer.name`` -> the washer class; its constructor's keyword arguments are the config keys."""

MISSING = "???"
"""OmegaConf's mandatory-value marker: a config key still set to it was never given."""


class WasherError(WashexpError):
    """A washer that could not propose a plan (a command that failed, was not found, or timed out).

    ``str(err)`` is one line; ``artifacts`` holds what the washer produced before it failed (a
    command's stdout and stderr), for the round's record.
    """

    def __init__(self, message: str, artifacts: Mapping[str, str] | None = None):
        super().__init__(message)
        self.artifacts = dict(artifacts or {})


def entailed_drops(files: Mapping[str, str], items: Iterable[PlanItem]) -> tuple[dict, ...]:
    """The gate's drops for ``items`` applied to ``files``, as ``{"type", "value"}`` candidates in
    the gate's order: what a washer declares in ``approved_drops`` for the operator to judge."""
    after = apply_to_texts(dict(files), Plan(tuple(items)))
    return tuple({"type": d.type, "value": d.value} for d in drops_between(files, after))


def _plain(cfg: Mapping) -> dict[str, Any]:
    """A config node as a plain dict; a key left at ``???`` is reported, never passed on."""
    if isinstance(cfg, DictConfig):
        missing = sorted(OmegaConf.missing_keys(cfg))
        container = {} if missing else OmegaConf.to_container(cfg, resolve=True)
        assert isinstance(container, dict)  # a DictConfig's container is a dict
        data = {str(k): v for k, v in container.items()}
    elif isinstance(cfg, Mapping):
        data = dict(cfg)
        missing = sorted(str(k) for k, v in data.items() if isinstance(v, str) and v == MISSING)
    else:
        raise ConfigError(f"washer: the config must be a mapping with a name, got {type(cfg).__name__}")
    if missing:
        who = cfg.get("name") if "name" not in missing else None
        where = f"washer {who}" if isinstance(who, str) else "washer"
        raise ConfigError(f"{where}: {', '.join(missing)} must be set (it is ???)")
    return data


def _class(data: dict[str, Any]) -> tuple[str, type]:
    """The washer's name and its class (or a plugin's factory); pops ``name`` (and ``target``)."""
    name, cls, _ = _resolve(data)
    return name, cls


def _resolve(data: dict[str, Any]) -> tuple[str, Any, dict[str, Any] | None]:
    """(name, class or factory, a plugin's provenance or None): a built-in name, ``plugin`` with
    ``target``, or a ``washexp.washers`` entry point."""
    name = data.pop("name", None)
    target = data.pop("target", None)
    if not isinstance(name, str) or not name:
        raise ConfigError(f"washer: name must be one of {', '.join(WASHERS.names())}, got {name!r}")
    if name in WASHERS.names() and not target:
        return name, WASHERS.get(name), None
    dist = None
    if not target:
        target, dist = plugins.find("washer", name, WASHERS.names())
    make = plugins.factory(f"washer.target={target}", str(target))
    named = name if name != plugins.PLUGIN else str(target).rpartition(":")[2]
    return named, make, plugins.provenance(str(target), make, dist)


def needs_model(cfg: Mapping) -> bool:
    """Whether the washer ``cfg`` names calls a chat model (then ``make_washer`` needs one)."""
    _, cls = _class(_plain(cfg))
    return bool(getattr(cls, "needs_model", False))


def check_gates(cfg: Mapping, gates: bool) -> None:
    """Refuse a control washer (``gates_off_only``) with the gates on: one line."""
    name, cls = _class(_plain(cfg))
    if gates and getattr(cls, "gates_off_only", False):
        raise ConfigError(f"washer {name} is the no-CoalWash control and runs only with gates=false (add gates=false)")


def washer_spec(cfg: Mapping) -> dict[str, Any]:
    """The washer's spec as it enters a run's identity: its config, plus ``prompts`` (name ->
    sha256 of each prompt file) for a washer that has prompts, and ``draws`` for a model washer
    (each round and repeat a sampled draw: runs made before it replayed round 1)."""
    data = _plain(cfg)
    _, cls, origin = _resolve(dict(data))
    prompts = getattr(cls, "prompts", None)
    data = {**data, "plugin": origin} if origin else data
    if getattr(cls, "needs_model", False):  # issue 49: rounds and repeats are sampled draws, not replays
        data = {**data, "draws": True}
    return {**data, "prompts": prompts()} if prompts else data


def make_washer(cfg: Mapping, model: Any = None) -> Washer:
    """The washer ``cfg`` names (``{name: ..., **args}``), built with the remaining keys as its
    constructor's keyword arguments, and ``model`` (the model layer) when it needs one."""
    data = _plain(cfg)
    name, cls, origin = _resolve(data)
    wants_model = bool(getattr(cls, "needs_model", False))
    named = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    params = {p.name: p for p in inspect.signature(cls).parameters.values() if p.kind in named}
    params.pop("model", None)  # the model layer is passed in, never configured
    for key in data:
        if key not in params:
            raise ConfigError(unknown_name(f"washer {name} argument", str(key), list(params)))
    needed = [p for p, spec in params.items() if spec.default is spec.empty and p not in data]
    if needed:
        raise ConfigError(f"washer {name}: {', '.join(needed)} must be set")
    if wants_model:
        if model is None:
            raise ConfigError(f"washer {name} needs a served model (model=openai model.name=... endpoint.base_url=...)")
        data["model"] = model
    if origin is not None:  # a plugin: its crashes are failed rounds, its bad factory one line
        return plugin.build(origin["target"], cls, data)
    return cls(**data)


__all__ = ["WASHERS", "WasherError", "check_gates", "entailed_drops", "make_washer", "needs_model", "washer_spec"]
