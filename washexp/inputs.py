"""What every fixture loader checks first on what a user hands it: a name stays in its folder, and
a file is UTF-8 text in the format it claims to be.

Each check ends in one :class:`~washexp.errors.WashexpError` line naming what and where; nothing
else escapes (a random byte string yields a ``FixtureError``, never a ``UnicodeDecodeError``,
``RecursionError`` or a YAML timestamp's ``ValueError``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml

from washexp.errors import ConfigError, FixtureError
from washexp.registry import unknown_name


def bare_name(kind: str, name: Any, root: Path) -> str:
    """``name`` when it is a bare folder name under ``root``; a path (``/``, ``\\``, ``..``,
    absolute, a NUL byte) is refused, so a user-given name can never reach outside ``root``."""
    if not isinstance(name, str) or not name or name in (".", "..") or any(c in name for c in "/\\\0"):
        raise ConfigError(f"{kind} {name!r}: a bare folder name under {root}, without '/' or '..'")
    return name


def is_path(arg: Any) -> bool:
    """A folder argument is a path, not a bare name, when it holds a separator, starts with ``~``
    or is ``.``/``..``."""
    return isinstance(arg, str) and (arg in (".", "..") or arg.startswith("~") or "/" in arg or os.sep in arg)


def named_folder(kind: str, arg: Any, root: Path, known: list[str], cwd: Path) -> Path:
    """The folder a user's ``arg`` names: a path (:func:`is_path`), or else a bare name in
    ``known``, the folders under ``root`` (unknown -> "did you mean"). A path is ``~``-expanded
    and read relative to ``cwd``, the directory the user ran from (not the job's: Hydra may change
    that), normalised but not resolved, so the folder's name is the last part the user typed. A
    path that is no folder is refused in one line."""
    if is_path(arg):
        path = Path(os.path.abspath(Path(cwd) / Path(arg).expanduser()))
        if not path.is_dir():
            raise ConfigError(f"{kind} {arg!r}: no such folder ({path})")
        return path
    if bare_name(kind, arg, root) not in known:
        raise ConfigError(f"{root}: {unknown_name(kind, arg, known)}")
    return root / arg


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
