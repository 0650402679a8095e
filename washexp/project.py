"""Which project a command works on: found from the working directory, as git finds ``.git``.

A project is a folder holding ``conf/`` and ``run.py``. Commands that read or write a store
(``run.py``, ``washexp export``, ``ui``, ``compare``, ``feed`` by name) resolve their paths from
it, so two clones sharing one virtual environment never read each other's runs. Commands that
take their paths as arguments (``score``, ``caliper``, ``gate``) work anywhere.
"""

from __future__ import annotations

import json
import os
from itertools import count
from pathlib import Path

from washexp.errors import ConfigError

CLAIMED_ENV = "WASHEXP_CLAIMED_DIRS"
"""The output folders this command claimed (base -> folder), for a re-resolution of the same
``hydra.sweep.dir`` in this process or a parallel launcher's worker: one command, one folder."""


def find_root(start: str | Path | None = None) -> Path:
    """The nearest folder at or above ``start`` (default: the working directory) that holds
    ``conf/`` and ``run.py``; a one-line error when there is none."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "conf").is_dir() and (folder / "run.py").is_file():
            return folder
    raise ConfigError(f"{here}: not inside a washexp project (no folder above holds conf/ and run.py)")


def new_dir(base: str) -> str:
    """``base``, or ``base-2``, ``base-3`` ...: the first of them this call creates. ``mkdir`` is
    atomic, so two sweeps started in the same second (Hydra's ``${now:%H-%M-%S}``) get a folder
    each instead of sharing one (the sweep id, its tag, is the folder). Asked again for the same
    base in the same command, it gives the folder it claimed. ``conf/config.yaml`` calls it as
    the ``washexp.new_dir`` resolver."""
    claimed = json.loads(os.environ.get(CLAIMED_ENV) or "{}")
    if base in claimed:
        return claimed[base]
    Path(base).parent.mkdir(parents=True, exist_ok=True)
    for n in count(1):
        folder = base if n == 1 else f"{base}-{n}"
        try:
            os.mkdir(folder)
        except FileExistsError:
            continue
        os.environ[CLAIMED_ENV] = json.dumps({**claimed, base: folder})
        return folder
    raise AssertionError("unreachable")


def new_command() -> None:
    """A command claims its own output folders (several commands may run in one process: tests)."""
    os.environ.pop(CLAIMED_ENV, None)
