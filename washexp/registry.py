"""Name -> factory registries. An unknown name is answered with "did you mean"."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Generic, TypeVar

from washexp.errors import ConfigError

T = TypeVar("T")


def unknown_name(kind: str, name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=3)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return f"unknown {kind} {name!r}{hint} (known: {', '.join(sorted(known))})"


class Registry(Generic[T]):
    """Factories registered by name, for one kind of thing (a backend, a record builder...)."""

    def __init__(self, kind: str):
        self.kind = kind
        self._factories: dict[str, Callable[..., T]] = {}

    def register(self, name: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
        def decorate(factory: Callable[..., T]) -> Callable[..., T]:
            if name in self._factories:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self._factories[name] = factory
            return factory

        return decorate

    def get(self, name: str) -> Callable[..., T]:
        try:
            return self._factories[name]
        except KeyError:
            raise ConfigError(unknown_name(self.kind, name, list(self._factories))) from None

    def names(self) -> list[str]:
        return sorted(self._factories)
