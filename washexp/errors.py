"""Errors a user can cause. Each ends a command in one clear line and a non-zero exit.

    WashexpError            anything the user can fix: the message names what and where
    ├── ConfigError         a bad override or config value
    ├── FixtureError        a fixture file or field that breaks the format
    └── ModelError          an endpoint that cannot be used (unreachable, refuses, answers badly)

A low score is never an error: it is a result, recorded like any other.
"""

from __future__ import annotations


class WashexpError(Exception):
    """A problem the user can fix; ``str(err)`` is the one line they see."""


class ConfigError(WashexpError):
    pass


class FixtureError(WashexpError):
    def __init__(self, path, field: str | None, problem: str):
        where = f"{path}" + (f": {field}" if field else "")
        super().__init__(f"{where}: {problem}")


class ModelError(WashexpError):
    pass
