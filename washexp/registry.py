"""Name -> ``"module:object"`` registries, imported only when a name is asked for.

An entry is a string, so a registry never imports what it lists and an implementation never
imports its registry: nothing is imported for a side effect and no import circle can form. An
unknown name is answered with "did you mean".
"""

from __future__ import annotations

import difflib
import importlib
from typing import Any

from washexp.errors import ConfigError


def close_names(name: str, known: list[str]) -> list[str]:
    """What a mistyped ``name`` may have meant: a case-only slip first (``s`` -> ``S``), then the
    close spellings, case ignored."""
    same = [k for k in known if k.lower() == name.lower()]
    if same:
        return same
    by_lower = {k.lower(): k for k in known}
    return [by_lower[c] for c in difflib.get_close_matches(name.lower(), list(by_lower), n=3)]


def did_you_mean(name: str, known: list[str]) -> str:
    """``"; did you mean 'S'?"`` for a line that names a slip, or ``""`` when nothing is close."""
    close = close_names(name, known)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def unknown_name(kind: str, name: str, known: list[str]) -> str:
    hint = did_you_mean(name, known)
    return f"unknown {kind} {name!r}{hint} (known: {', '.join(sorted(known))})"


def load(target: str) -> Any:
    """The object a ``"package.module:name"`` string names."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


class Registry:
    """Lazy entries for one kind of thing (a model backend, a benchmark family...)."""

    def __init__(self, kind: str, entries: dict[str, str]):
        self.kind = kind
        self._entries = dict(entries)

    def get(self, name: str) -> Any:
        try:
            target = self._entries[name]
        except KeyError:
            raise ConfigError(unknown_name(self.kind, name, list(self._entries))) from None
        return load(target)

    def names(self) -> list[str]:
        return sorted(self._entries)
