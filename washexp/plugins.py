"""Plug-ins from outside washexp, every kind through this one door.

A plug-in (a compaction method, a washer, a measurement) is named either by a target, ``package.module:factory``,
or by a name an installed package registers under its kind's entry-point group (:data:`GROUPS`);
lm-eval's registry, which takes a name or an entry point, is the model. Only metadata is read
until a plug-in is asked for (``config.register`` and ``run.py --help`` list the installed names).
A factory that cannot be loaded, raises or returns an object without the kind's method is one
:class:`ConfigError` line naming the target (exit 2), raised before any run; what it was built
from (:func:`provenance`) enters each run's identity, so two versions never share a run.
"""

from __future__ import annotations

import hashlib
import inspect
from importlib import metadata
from pathlib import Path
from typing import Any

from washexp.errors import ConfigError, first_line
from washexp.registry import load, unknown_name

GROUPS = {"method": "washexp.methods", "washer": "washexp.washers", "measurement": "washexp.measurements"}
"""A plug-in kind (its config group) -> the entry-point group installed packages register under."""
OPTIONS = ("method", "washer")
"""Kinds whose installed names are config options of their own (``config.register``); an installed
measurement brings its config file (``docs/guide/plugins.md``)."""
LABELS = {"method": "compaction method", "washer": "washer", "measurement": "measurement"}
"""A kind as an error line names it."""
PLUGIN = "plugin"
"""The option that names a factory by its target (``method=plugin``, ``washer=plugin``)."""


def installed(kind: str) -> dict[str, metadata.EntryPoint]:
    """Installed names of a kind -> their entry points (nothing is imported)."""
    return {ep.name: ep for ep in metadata.entry_points(group=GROUPS[kind])}


def find(kind: str, name: str, known: list[str]) -> tuple[str, metadata.Distribution | None]:
    """The target and distribution of the installed plug-in ``name``; an unknown name is one line
    with "did you mean" among ``known`` (the kind's own names) and the installed ones."""
    eps = installed(kind)
    if name not in eps:
        raise ConfigError(unknown_name(LABELS[kind], name, [*known, *eps, PLUGIN]))
    return eps[name].value, eps[name].dist


def loaded(where: str, target: str) -> Any:
    """The object ``target`` names; one line starting with ``where`` when it cannot be loaded."""
    try:
        return load(target)
    except Exception as err:  # the plugin boundary: importing a third party's module, any failure its config's
        raise ConfigError(f"{where}: cannot load it: {first_line(err, named=True)}") from None


def factory(where: str, target: str) -> Any:
    """The callable ``target`` names (:func:`loaded`)."""
    made = loaded(where, target)
    if not callable(made):
        raise ConfigError(f"{where}: is a {type(made).__name__}, not a factory")
    return made


def build(where: str, make: Any, kwargs: dict[str, Any], method: str) -> Any:
    """``make(**kwargs)``, checked to have the kind's ``method`` (``compact(request)``, ``propose(...)``)."""
    try:
        made = make(**kwargs)
    except ConfigError:
        raise
    except Exception as err:  # the plugin boundary: its factory's failure is its config's
        raise ConfigError(f"{where}: the factory raised {first_line(err, named=True)}") from None
    if not callable(getattr(made, method.partition("(")[0], None)):
        raise ConfigError(f"{where}: the factory returned a {type(made).__name__}, which has no {method}")
    return made


def provenance(target: str, make: Any, dist: metadata.Distribution | None = None) -> dict[str, Any]:
    """What a plug-in was built from: its target, package name and version (the entry point's
    distribution, else the one that provides its top-level package) and its module's sha256."""
    if dist is None:
        names = metadata.packages_distributions().get(target.partition(":")[0].partition(".")[0], [])
        dist = metadata.distribution(names[0]) if names else None
    try:
        module = inspect.getmodule(make)
        source = (inspect.getsourcefile(module) if module else None) or ""
        digest = hashlib.sha256(Path(source).read_bytes()).hexdigest() if source else None
    except (TypeError, OSError):
        digest = None
    return {
        "target": target,
        "package": dist.metadata["Name"] if dist else None,
        "version": dist.version if dist else None,
        "module_sha256": digest,
    }
