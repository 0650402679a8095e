"""A memory store as score.mjs reads it: the top-level ``*.md`` files, by sorted name.

Only regular files directly in the folder whose names end in ``.md`` count (no recursion;
``expected.json`` and any other file are ignored). Names sort by UTF-16 code unit, as
JavaScript's default ``sort`` does; contents decode as UTF-8 with a BOM kept, never stripped.

A store is untrusted: :func:`read_md` refuses a file name that is not a plain ``NAME.md`` (a
newline or other control character, ``..md``, a hidden name) and names a file that is not UTF-8,
each as one :class:`~washexp.errors.FixtureError` line.
"""

from __future__ import annotations

import os
import stat
import unicodedata
from pathlib import Path
from typing import Any

from washexp.errors import FixtureError


def md_names(folder: str | Path) -> list[str]:
    """The store's ``*.md`` file names, sorted."""
    with os.scandir(folder) as entries:  # a symlink is not a regular file: score.mjs does not follow it
        names = [e.name for e in entries if e.name.endswith(".md") and e.is_file(follow_symlinks=False)]
    for name in names:
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:  # a byte that is not UTF-8, kept by the OS as a lone surrogate
            shown = os.fsencode(name).decode("utf-8", "backslashreplace")
            raise FixtureError(folder, None, f"refusing a store file name that is not UTF-8: {shown!r}") from None
    return sorted(names, key=lambda n: n.encode("utf-16-be"))  # big-endian bytes order as code units


def name_problem(name: Any) -> str | None:
    """Why ``name`` is not a plain file name of a store folder, or None. Plain: a non-empty string
    with no path separator, not hidden or ``.``/``..``, no control or format character."""
    if not isinstance(name, str) or not name:
        return f"{name!r} is not a file name"
    if "/" in name or "\\" in name:
        return f"{name!r} names a path, not a file of the store folder"
    if name.startswith("."):
        return f"{name!r} is hidden or leaves the folder"
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp") for ch in name):
        return f"{name!r} holds a control character"
    return None


def md_name_problem(name: Any) -> str | None:
    """Why ``name`` is not a plain ``*.md`` store file name (see :func:`name_problem`), or None."""
    problem = name_problem(name)
    if problem is None and (not name.endswith(".md") or not name[:-3].strip()):
        problem = f"{name!r} is not a NAME.md file name"
    return problem


def entry_problem(path: Path) -> str | None:
    """Why the entry at ``path`` may not be read, written or replaced, or None (absent is fine)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return f"{path.name} is a symlink"
    if not stat.S_ISREG(st.st_mode):
        return f"{path.name} is not a regular file"
    if st.st_nlink != 1:
        return f"{path.name} has {st.st_nlink} hard links"
    return None


MAX_STORE_BYTES = 16 << 20
"""The most ``*.md`` bytes a store may hold. A wash holds about 60 times its store in memory (a 1 MB
store of 2,000 notes peaked at 91 MiB at the full tier, 0.5 MB at 62 MiB), so 16 MiB stays near
1 GB; a 200 MB store ran out of memory (5.9 GB, then a MemoryError) and is refused before work."""


def read_md_bytes(folder: str | Path) -> dict[str, bytes]:
    """name -> bytes of every top-level ``*.md`` file, in sorted-name order; a name that is not a
    plain ``NAME.md``, or a store of more than :data:`MAX_STORE_BYTES`, is refused (``FixtureError``)
    before a byte is read."""
    folder = Path(folder)
    names = md_names(folder)
    for name in names:
        if problem := md_name_problem(name):
            raise FixtureError(folder, None, f"refusing a store file name: {problem}")
    total = sum(os.lstat(folder / name).st_size for name in names)
    if total > MAX_STORE_BYTES:
        raise FixtureError(folder, None, _too_large(total))
    raw, left = {}, MAX_STORE_BYTES
    for name in names:
        with open(folder / name, "rb") as fh:
            raw[name] = fh.read(left + 1)  # a file that grew since it was measured is still capped
        left -= len(raw[name])
        if left < 0:
            raise FixtureError(folder, None, _too_large(MAX_STORE_BYTES - left))
    return raw


def _too_large(size: int) -> str:
    return (
        f"a store of {size / (1 << 20):.1f} MiB of *.md files, over the {MAX_STORE_BYTES >> 20} MiB washexp "
        "reads (a wash holds about 60 times its store in memory): split it into smaller stores"
    )


def decode(folder: str | Path, raw: dict[str, bytes]) -> dict[str, str]:
    """name -> text; a file that is not UTF-8 is named with the first bad byte (``FixtureError``)."""
    files = {}
    for name, data in raw.items():
        try:
            files[name] = data.decode("utf-8")
        except UnicodeDecodeError as err:
            problem = f"not UTF-8 (byte 0x{err.object[err.start]:02x} at offset {err.start})"
            raise FixtureError(Path(folder) / name, None, problem) from None
    return files


def read_md(folder: str | Path) -> dict[str, str]:
    """name -> text of every top-level ``*.md`` file, in sorted-name order (names and encoding checked)."""
    return decode(folder, read_md_bytes(folder))


def joined(files: dict[str, str]) -> str:
    """The text the scorer searches: every file's text joined with a newline, in order."""
    return "\n".join(files.values())
