"""Washers from outside washexp: ``washer=plugin washer.target=pkg.module:factory`` or a name an
installed package registers under the ``washexp.washers`` entry-point group (``washer=<name>``).

A plugin washer is built exactly like the built-in ones (``make_washer``): its factory's keyword
parameters are its config keys, ``needs_model``/``gates_off_only``/``prompts`` mean the same. What
it was built from (target, package name and version, the sha256 of its module) is added to the
spec that enters each run's identity, so two versions never share a run. A factory that cannot be
loaded, raises or returns an object without ``propose`` is a one-line ``ConfigError`` (exit 2)
before any run; a ``propose`` that raises is a FAILED round (:class:`WasherError`), never a traceback.
"""

from __future__ import annotations

import hashlib
import inspect
from importlib import metadata
from pathlib import Path
from typing import Any

from washexp.errors import ConfigError, WashexpError, first_line
from washexp.registry import load

GROUP = "washexp.washers"


def entry_points() -> dict[str, metadata.EntryPoint]:
    """Installed ``washexp.washers`` names -> their entry points (nothing is imported)."""
    return {ep.name: ep for ep in metadata.entry_points(group=GROUP)}


def factory(target: str) -> Any:
    """The object ``target`` names; one line naming it when it cannot be loaded."""
    try:
        made = load(target)
    except Exception as err:  # the plugin boundary: importing a third party's module, any failure its config's
        raise ConfigError(f"washer.target={target}: cannot load it: {first_line(err, named=True)}") from None
    if not callable(made):
        raise ConfigError(f"washer.target={target}: is a {type(made).__name__}, not a factory")
    return made


def build(target: str, make, kwargs: dict[str, Any]):
    """``make(**kwargs)`` checked: a washer that proposes, wrapped so its crashes are failed rounds."""
    try:
        washer = make(**kwargs)
    except ConfigError:
        raise
    except Exception as err:  # the plugin boundary: its factory's failure is its config's
        raise ConfigError(f"washer.target={target}: the factory raised {first_line(err, named=True)}") from None
    if not callable(getattr(washer, "propose", None)):
        kind = type(washer).__name__
        raise ConfigError(f"washer.target={target}: the factory returned a {kind}, which has no propose(...)")
    return Guarded(washer, target)


class Guarded:
    """A plugin washer whose exceptions become :class:`WasherError` (a FAILED round, recorded)."""

    def __init__(self, washer, target: str):
        self._washer, self._target = washer, target
        self.name = str(getattr(washer, "name", "") or target.rpartition(":")[2])

    def __getattr__(self, item):
        return getattr(self._washer, item)

    def propose(self, files, keeps, scratch):
        from washexp.wash.washer import Proposal
        from washexp.wash.washers import WasherError

        where = f"washer {self.name} ({self._target})"
        try:
            proposal = self._washer.propose(files, keeps, scratch)
        except WashexpError:
            raise
        except Exception as err:  # the plugin boundary: a third party's washer failing is a failed round
            raise WasherError(f"{where}: {first_line(err, named=True)}") from None
        if not isinstance(proposal, Proposal):
            raise WasherError(f"{where}: propose() returned {type(proposal).__name__}, expected a Proposal")
        return proposal


def provenance(target: str, make, dist=None) -> dict[str, Any]:
    """Package name and version and the module's sha256 of a plugin washer's factory."""
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
