"""A memory store as score.mjs reads it: the top-level ``*.md`` files, by sorted name.

Only regular files directly in the folder whose names end in ``.md`` count (no recursion;
``expected.json`` and any other file are ignored). Names sort by UTF-16 code unit, as
JavaScript's default ``sort`` does; contents decode as UTF-8 with a BOM kept, never stripped.
"""

from __future__ import annotations

import os
from pathlib import Path


def md_names(folder: str | Path) -> list[str]:
    """The store's ``*.md`` file names, sorted."""
    with os.scandir(folder) as entries:  # a symlink is not a regular file: score.mjs does not follow it
        names = [e.name for e in entries if e.name.endswith(".md") and e.is_file(follow_symlinks=False)]
    return sorted(names, key=lambda n: n.encode("utf-16-be"))  # big-endian bytes order as code units


def read_md(folder: str | Path) -> dict[str, str]:
    """name -> text of every top-level ``*.md`` file, in sorted-name order."""
    folder = Path(folder)
    return {name: (folder / name).read_bytes().decode("utf-8") for name in md_names(folder)}


def joined(files: dict[str, str]) -> str:
    """The text the scorer searches: every file's text joined with a newline, in order."""
    return "\n".join(files.values())
