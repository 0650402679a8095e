"""Scratch folders in the system temp folder that a killed wash does not leave behind.

Each is named ``washexp-<kind>-<pid>-<random>``; :func:`sweep_scratch` (run when ``washexp wash`` starts)
removes every such folder whose process is gone, so a SIGKILL mid-wash costs nothing once the
next wash has started.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

_NAME = re.compile(r"washexp-[a-z-]+?-(\d+)-[^/]+")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


@contextlib.contextmanager
def scratch_dir(kind: str) -> Iterator[Path]:
    """A fresh scratch folder, removed when the block ends."""
    path = Path(tempfile.mkdtemp(prefix=f"washexp-{kind}-{os.getpid()}-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def sweep_scratch() -> list[Path]:
    """Remove the scratch folders of processes that are gone; the ones removed."""
    base = Path(tempfile.gettempdir())
    gone = []
    with contextlib.suppress(OSError):
        for entry in base.iterdir():
            m = _NAME.fullmatch(entry.name)
            if not m or entry.is_symlink() or not entry.is_dir() or entry.lstat().st_uid != os.getuid():
                continue
            if not _alive(int(m[1])):
                shutil.rmtree(entry, ignore_errors=True)
                gone.append(entry)
    return gone
