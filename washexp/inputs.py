"""What every fixture loader checks first on what a user hands it: a name stays in its folder, and
a file is UTF-8 text in the format it claims to be.

Each check ends in one :class:`~washexp.errors.WashexpError` line naming what and where; nothing
else escapes (a random byte string yields a ``FixtureError``, never a ``UnicodeDecodeError``,
``RecursionError`` or a YAML timestamp's ``ValueError``).
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any

import yaml

from washexp.errors import ConfigError, FixtureError, first_line
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


def store_folder_problem(path: Path) -> str | None:
    """Why ``path`` is not a store folder (missing, or a file there), or None when it is a folder."""
    if path.is_dir():
        return None
    if os.path.lexists(path):
        return f"{path}: a file, not a store folder (a store is a folder of *.md files; name the folder)"
    return f"{path}: no such store folder"


LIMIT = 16 << 20
"""The most bytes read from one JSON file a store or a user hands us (a store's largest is KiB)."""


def read_untrusted(path: Path, *, inside: bool = True, limit: int = LIMIT) -> bytes | None:
    """The bytes of ``path``, read only when it is a regular file of at most ``limit`` bytes;
    ``None`` when it does not exist. ``inside`` (a file of a store): a symbolic link or a file with
    more than one hard link (another name for a file outside) is refused too. Opened without
    following a last symlink and without blocking, so a FIFO never hangs the read; one
    ``FixtureError`` line otherwise."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY | (os.O_NOFOLLOW if inside else 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise FixtureError(path, None, "a symlink: a store's file is read only as a regular file") from None
        raise FixtureError(path, None, f"cannot be read ({err.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FixtureError(path, None, "not a regular file (a FIFO, device or folder): refusing to read it")
        if inside and st.st_nlink != 1:
            raise FixtureError(path, None, f"a hard link ({st.st_nlink} names): it may be a file outside the store")
        if st.st_size > limit:
            raise FixtureError(path, None, f"larger than {limit} bytes ({st.st_size}): refusing to read it")
        chunks, size = [], 0
        while chunk := os.read(fd, min(1 << 20, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise FixtureError(path, None, f"larger than {limit} bytes: refusing to read it")
        return b"".join(chunks)
    finally:
        os.close(fd)


def parse_json(data: bytes, path: Path, *, max_depth: int | None = None) -> Any:
    """``data`` decoded as UTF-8 and parsed as JSON, or one ``FixtureError`` line saying why not
    (not UTF-8, not JSON, an integer too long to convert, nesting too deep: for the parser, or past
    ``max_depth`` levels, which code that walks the value recursively needs)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise FixtureError(path, None, f"not UTF-8 (byte 0x{data[err.start]:02x} at offset {err.start})") from None
    try:
        doc = json.loads(text)
        if max_depth is not None and _deeper(doc, max_depth):
            raise RecursionError
        return doc
    except json.JSONDecodeError as err:
        raise FixtureError(path, None, f"not valid JSON: {err.msg} at line {err.lineno} column {err.colno}") from None
    except ValueError as err:  # int() of more than sys.get_int_max_str_digits() digits
        raise FixtureError(path, None, f"not usable JSON: {str(err).split(';')[0]}") from None
    except RecursionError:
        raise FixtureError(path, None, "not usable JSON: nested too deeply") from None


def _deeper(doc: Any, levels: int) -> bool:
    """Whether ``doc`` nests more than ``levels`` lists or objects deep (walked level by level, not
    recursively)."""
    level = [doc]
    for _ in range(levels + 1):
        level = [v for c in level if isinstance(c, dict | list) for v in (c.values() if isinstance(c, dict) else c)]
        if not level:
            return False
    return True


def read_text(path: Path) -> str:
    """The file's text, decoded as UTF-8 (a BOM is kept: it is the file's content)."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise FixtureError(path, None, f"not UTF-8 (byte 0x{data[err.start]:02x} at offset {err.start})") from None


def load_json(path: Path, *, inside: bool = False) -> Any:
    """The file parsed as JSON (:func:`read_untrusted`, :func:`parse_json`), or one line saying
    why not. ``inside``: a file of a store (no symlink, no second hard link)."""
    data = read_untrusted(path, inside=inside)
    if data is None:
        raise FixtureError(path, None, "missing")
    return parse_json(data, path)


def load_yaml(path: Path) -> Any:
    """The file parsed with ``yaml.safe_load``, or one line saying where it breaks."""
    text = read_text(path)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or first_line(err)
        raise FixtureError(path, None, f"not valid YAML{where}: {problem}") from None
    except (ValueError, RecursionError) as err:  # e.g. a timestamp in year 0: valid YAML syntax, no value
        raise FixtureError(path, None, f"not usable YAML: {first_line(err)}") from None
    if expanded_size(data, YAML_NODES + 1) > YAML_NODES:
        raise FixtureError(path, None, f"not usable YAML: its aliases expand to more than {YAML_NODES} values")
    return data


YAML_NODES = 1_000_000
"""The most values a YAML file may expand to once its aliases are followed (an alias bomb, nine
aliases of nine aliases..., is a few lines that expand to billions: everything that walks it hangs)."""


def expanded_size(data: Any, stop: int) -> int:
    """How many values ``data`` holds once every shared (aliased) part is counted each time it is
    used; counting stops past ``stop``. Linear in the distinct values (a part's size is remembered)."""
    sizes: dict[int, int] = {}

    def size(node: Any, depth: int = 0) -> int:
        if not isinstance(node, dict | list):
            return 1
        if id(node) in sizes:
            return sizes[id(node)]
        if depth > 900:  # a self-referencing alias: it expands without end
            return stop
        children = [*node.keys(), *node.values()] if isinstance(node, dict) else node
        total = 1
        for child in children:
            total += size(child, depth + 1)
            if total >= stop:
                break
        sizes[id(node)] = total
        return total

    return size(data)


def check_config_tree(folder: Path) -> None:
    """Every ``*.yaml`` file under ``folder`` (Hydra's config folder) that holds an anchor, checked
    as :func:`load_yaml` checks one: Hydra would copy an alias bomb's billions of values into its
    config and hang. A file with no ``&`` has no anchor, so no alias: it is not parsed here."""
    for path in sorted(folder.rglob("*.yaml")):
        if path.is_file() and b"&" in path.read_bytes():
            load_yaml(path)
