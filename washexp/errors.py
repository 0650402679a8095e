"""Errors a user can cause, and how each ends a command: one clear line and a non-zero exit.

    WashexpError            anything the user can fix: the message names what and where
    ├── ConfigError         a bad override or config value
    │   └── UsageError      a bad command-line argument (argparse's, through :class:`Parser`)
    ├── FixtureError        a fixture file or field that breaks the format
    └── ModelError          an endpoint that cannot be used (unreachable, refuses, answers badly)

The exit codes (every command's; :func:`fail`, by :func:`exit_code`, is the one mapping): 0 the job ran; 1 it could not
finish (``FAILED``: an endpoint died, a gate blocked, compare found a regression); 2 a usage or
input error found before any work (``USAGE``: one line naming what and where, nothing written).
``washexp score`` keeps CoalWash score.mjs's codes: 1 for usage and I/O alike.

A low score is never an error: it is a result, recorded like any other.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

FAILED = 1
"""The command could not finish."""
USAGE = 2
"""A usage or input error, found before any work."""


class WashexpError(Exception):
    """A problem the user can fix; ``str(err)`` is the one line they see."""


class ConfigError(WashexpError):
    pass


class UsageError(ConfigError):
    """A bad argument or an unreadable input named on the command line."""


class FixtureError(WashexpError):
    def __init__(self, path, field: str | None, problem: str):
        where = f"{path}" + (f": {field}" if field else "")
        super().__init__(f"{where}: {problem}")


class ModelError(WashexpError):
    pass


class Parser(argparse.ArgumentParser):
    """argparse for every ``washexp`` command: a usage error is a :class:`UsageError` (one line,
    exit 2 through :func:`fail`), never argparse's usage block."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def first_line(err: BaseException, named: bool = False) -> str:
    """The first line of ``err``'s text, or its class name when it has none; ``named``: after its
    class name (``OSError: ...``), for an exception that is not washexp's own line."""
    text = str(err).strip()
    line = text.splitlines()[0] if text else type(err).__name__
    return f"{type(err).__name__}: {line}" if named and text else line


def exit_code(err: BaseException) -> int:
    """The exit code by the error's class: ``USAGE`` for a :class:`ConfigError` (a usage error is
    one) or a :class:`FixtureError` (found before any work), ``FAILED`` for any other."""
    return USAGE if isinstance(err, ConfigError | FixtureError) else FAILED


def fail(prog: str, err: BaseException, code: int | None = None) -> int:
    """End a command on ``err``: its first line on stderr after ``prog``, and the exit code to
    return: ``code`` when the command knows it by where it stopped (``USAGE`` for whatever it finds
    while it checks its input, before any work; score's 1), else :func:`exit_code`."""
    named = isinstance(err, OSError | UnicodeDecodeError)  # their text alone does not say what failed
    print(f"{prog}: {first_line(err, named)}", file=sys.stderr)
    return exit_code(err) if code is None else code
