"""What every fixture loader checks first on what a user hands it: a name stays in its folder, and
a file is UTF-8 text in the format it claims to be.

Each check ends in one :class:`~washexp.errors.WashexpError` line naming what and where; nothing
else escapes (a random byte string yields a ``FixtureError``, never a ``UnicodeDecodeError``,
``RecursionError`` or a YAML timestamp's ``ValueError``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from washexp.errors import ConfigError, FixtureError


def bare_name(kind: str, name: Any, root: Path) -> str:
    """``name`` when it is a bare folder name under ``root``; a path (``/``, ``\\``, ``..``,
    absolute, a NUL byte) is refused, so a user-given name can never reach outside ``root``."""
    if not isinstance(name, str) or not name or name in (".", "..") or any(c in name for c in "/\\\0"):
        raise ConfigError(f"{kind} {name!r}: a bare folder name under {root}, without '/' or '..'")
    return name


def read_text(path: Path) -> str:
    """The file's text, decoded as UTF-8 (a BOM is kept: it is the file's content)."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise FixtureError(path, None, f"not UTF-8 (byte 0x{data[err.start]:02x} at offset {err.start})") from None


def load_json(path: Path) -> Any:
    """The file parsed as JSON, or one line saying where it breaks."""
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise FixtureError(path, None, f"not valid JSON: {err.msg} at line {err.lineno} column {err.colno}") from None
    except RecursionError:
        raise FixtureError(path, None, "not usable JSON: nested too deeply") from None


def load_yaml(path: Path) -> Any:
    """The file parsed with ``yaml.safe_load``, or one line saying where it breaks."""
    text = read_text(path)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise FixtureError(path, None, f"not valid YAML{where}: {problem}") from None
    except (ValueError, RecursionError) as err:  # e.g. a timestamp in year 0: valid YAML syntax, no value
        raise FixtureError(path, None, f"not usable YAML: {str(err).splitlines()[0] if str(err) else err!r}") from None
