"""Every compaction method washexp has, declared once: here and nowhere else.

An entry is a method's name (``method=<name>``; its ``conf/method/<name>.yaml`` option, which a
test holds to this table, key for key), what builds it (a lazy ``"module:function"``, called with
the ``method`` config node and the roles), the ``method.<key>`` settings it reads, and whether a
record lists it as a baseline. The table's order is the record's: Full, the closed book, S, H,
then the baselines; a plug-in (``method=plugin``, or a name installed under ``washexp.methods``:
:mod:`washexp.plugins`) follows them by name and may not take one of these names. Nothing is
imported here, so ``config.register`` and ``run.py --help`` read it for free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from washexp import plugins
from washexp.errors import ConfigError
from washexp.registry import load


@dataclass(frozen=True)
class Entry:
    name: str
    """``method=<name>``, ``conf/method/<name>.yaml``, and the arm's name (a baseline's with its
    parameters: ``mask M=10``)."""
    build: str
    """``"module:function"``: ``function(config, roles) -> Method``, imported when the method is asked for."""
    keys: tuple[str, ...] = ()
    """The ``method.<key>`` settings it reads, as its config file sets them."""
    baseline: bool = False
    """A simple baseline beside S and H (``compaction/methods/baselines.py``), noted so in a record."""


_OWN = "washexp.compaction.methods.method:from_config"
_BASELINE = "washexp.compaction.methods.baselines:from_config"

METHODS = (
    Entry("full", _OWN),
    Entry("none", _OWN),
    Entry("S", _OWN),
    Entry("H", _OWN, ("h_impl",)),
    Entry("mask", _BASELINE, ("M",), baseline=True),
    Entry("recency", _BASELINE, ("K",), baseline=True),
    Entry("hybrid", _BASELINE, ("M", "budget"), baseline=True),
)
"""The methods, in the order a record lists their arms."""
NAMES = tuple(m.name for m in METHODS)
BY_NAME = {m.name: m for m in METHODS}
BASELINES = {m.name: m.keys for m in METHODS if m.baseline}
"""Each baseline's parameters, as ``method.<key>`` sets them."""


def rank(kind: str) -> int:
    """Where a method's arms sit in a record: the table's order, a plug-in after every own method."""
    return NAMES.index(kind) if kind in BY_NAME else len(NAMES)


def method_for(config: Any, roles: Any) -> Any:
    """The arm's method: one of the table's by name, else a plug-in (``method.target``, or a
    name installed under ``washexp.methods``); every check raises before anything runs."""
    own = BY_NAME.get(config.name)
    if own is not None and not config.target:
        return load(own.build)(config, roles)
    if own is not None:
        raise ConfigError(f"method.name={config.name!r} is the study's own; a plugin needs another name")
    from washexp.compaction.methods.plugin import build

    if config.target or config.name == plugins.PLUGIN:
        return build(config.name, config.target, config.args)
    target, dist = plugins.find("method", config.name, list(NAMES))
    return build(config.name, target, config.args, dist)
