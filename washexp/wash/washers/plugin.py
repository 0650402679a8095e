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

from typing import Any

from washexp import plugins
from washexp.errors import WashexpError, first_line


def build(target: str, make, kwargs: dict[str, Any]):
    """``make(**kwargs)`` checked: a washer that proposes, wrapped so its crashes are failed rounds."""
    return Guarded(plugins.build(f"washer.target={target}", make, kwargs, "propose(...)"), target)


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
