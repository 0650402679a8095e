"""A task set's manifest: what it is, checkable by anyone once the set is published.

``manifest.json`` at the set's root holds the generator and its version, the parameters, the
sha256 of each task (its folder's files, as ``Task.digest`` computes it) and of the set (of that
listing). Never the seed and nothing that changes between two generations (no time stamp): the
same seed gives the same bytes. A record made on the set names :func:`digest` of this file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from washexp.compaction.inputs.fixtures import load_task
from washexp.errors import FixtureError
from washexp.hashing import canonical_hash, sha256_bytes
from washexp.inputs import load_json

NAME = "manifest.json"
_KEYS = {"generator", "version", "parameters", "tasks", "set"}


def build(generator: str, version: str, parameters: dict[str, Any], tasks: dict[str, str]) -> dict[str, Any]:
    return {
        "generator": generator,
        "version": version,
        "parameters": parameters,
        "tasks": dict(sorted(tasks.items())),
        "set": canonical_hash(dict(sorted(tasks.items()))),
    }


def dumps(manifest: dict[str, Any]) -> str:
    return json.dumps(manifest, indent=1, sort_keys=True) + "\n"


def digest(path: Path) -> str:
    """The manifest's own sha256 (of its bytes): the set's name in a record."""
    return sha256_bytes(path.read_bytes())


def read(path: Path) -> dict[str, Any]:
    """A manifest, checked for shape and for its set digest; raises FixtureError naming it."""
    raw = load_json(path)
    if not isinstance(raw, dict) or set(raw) != _KEYS:
        raise FixtureError(path, None, f"not a task set manifest (needs exactly {', '.join(sorted(_KEYS))})")
    tasks = raw["tasks"]
    if not isinstance(tasks, dict) or not all(isinstance(v, str) for v in tasks.values()):
        raise FixtureError(path, "tasks", "must map each task id to its sha256")
    if raw["set"] != canonical_hash(dict(sorted(tasks.items()))):
        raise FixtureError(path, "set", "does not match its own task listing")
    return raw


def folder_digests(folder: Path) -> dict[str, str]:
    """Each task folder's sha256; a task that does not parse raises FixtureError naming it."""
    if not folder.is_dir():
        raise FixtureError(folder, None, "not a folder")
    return {p.name: load_task(p).digest for p in sorted(folder.iterdir()) if p.is_dir()}


def named_by(folder: Path, digests: dict[str, str]) -> str | None:
    """The digest of ``folder``'s manifest when it has one (None when not a listed set), after
    checking that each task loaded (id -> sha256) is the one it lists: a run on a set that is not
    its manifest's fails before any work."""
    path = folder / NAME
    if not path.is_file():
        return None
    listed = read(path)["tasks"]
    for name, sha in sorted(digests.items()):
        if listed.get(name) != sha:
            raise FixtureError(folder / name, None, f"is not the task {path} lists (run washexp tasks verify)")
    return digest(path)


def check(manifest: dict[str, Any], path: Path, folder: Path) -> None:
    """Raise FixtureError naming the first difference between ``folder`` and the manifest."""
    found = folder_digests(folder)
    want = manifest["tasks"]
    missing, extra = sorted(want.keys() - found.keys()), sorted(found.keys() - want.keys())
    if missing or extra:
        what = f"missing {', '.join(missing)}" if missing else f"not in the manifest: {', '.join(extra)}"
        raise FixtureError(folder, None, f"is not the set of {path}: {what}")
    for name in sorted(want):
        if found[name] != want[name]:
            raise FixtureError(
                folder / name, None, f"differs from {path} ({found[name][:12]}, listed {want[name][:12]})"
            )
