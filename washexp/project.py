"""Which project a command works on: found from the working directory, as git finds ``.git``.

A project is a folder holding ``conf/`` and ``run.py``. Commands that read or write a store
(``run.py``, ``washexp export``, ``ui``, ``compare``, ``feed`` by name) resolve their paths from
it, so two clones sharing one virtual environment never read each other's runs. Commands that
take their paths as arguments (``score``, ``caliper``, ``gate``) work anywhere.
"""

from __future__ import annotations

from pathlib import Path

from washexp.errors import ConfigError


def find_root(start: str | Path | None = None) -> Path:
    """The nearest folder at or above ``start`` (default: the working directory) that holds
    ``conf/`` and ``run.py``; a one-line error when there is none."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "conf").is_dir() and (folder / "run.py").is_file():
            return folder
    raise ConfigError(f"{here}: not inside a washexp project (no folder above holds conf/ and run.py)")
