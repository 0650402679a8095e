"""Where a result came from: the source that computed it, the git commit, the public config."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml
from omegaconf import OmegaConf

from washexp.config import NOT_PUBLISHED
from washexp.hashing import sha256_bytes, tree_digest
from washexp.models.base import safe_url

PACKAGE = Path(__file__).resolve().parent


def files_digest(folder: Path, patterns: tuple[str, ...], base: Path | None = None) -> dict[str, str]:
    """path (relative to ``base``, default ``folder``) -> sha256, for the files matching ``patterns``."""
    base = base or folder
    files = {}
    for pattern in patterns:
        for p in sorted(folder.glob(pattern)):
            if "__pycache__" not in p.parts and p.is_file():
                files[p.relative_to(base).as_posix()] = sha256_bytes(p.read_bytes())
    return files


def package_source() -> dict[str, str]:
    """sha256 of the whole package's source and prompts (what produced a run, for its manifest)."""
    return files_digest(PACKAGE, ("**/*.py", "**/*.txt"), PACKAGE.parent)


NOT_RESULTS = (
    "washexp.models",
    "washexp.tracking",
    "washexp.engine.runner",
    "washexp.engine.sweep",
    "washexp.provenance",
    "washexp.config",
    "washexp.errors",
    "washexp.registry",
    "washexp.plugins",
    "washexp.measurements",
)
"""Modules that never change a number: how a model is reached (a reply is what it is; its
recording key says which), where results go, the run lifecycle, config plumbing, errors, the
registries and the plug-in loader (a plug-in's own module enters through its spec)."""


def code_modules(entries: tuple[str, ...], stop: tuple[str, ...] = NOT_RESULTS) -> list[str]:
    """The washexp modules ``entries`` import, directly or not (read from their source, never
    imported), without the ``stop`` packages: the code that can run while a result is computed."""
    seen: dict[str, Path] = {}
    todo = list(entries)
    while todo:
        name = todo.pop()
        if name in seen or _stopped(name, stop):
            continue
        path = _module_path(name)
        if path is None:
            continue
        seen[name] = path
        todo += _imports(path)
    return sorted(seen)


def code_digest(entries: tuple[str, ...], data: tuple[str, ...] = ()) -> str:
    """One digest of the code that computes a family's results: the modules :func:`code_modules`
    finds from ``entries`` (the computing modules, never a record builder, a CLI or a note), and
    the files matching ``data`` (prompts; glob patterns under the package). It enters every
    condition's identity, so a changed rule or prompt is a new condition, never an old run
    shown as new, while an edited note or table leaves every run as it was."""
    files = {
        p.relative_to(PACKAGE.parent).as_posix(): sha256_bytes(p.read_bytes())
        for p in (_module_path(m) for m in code_modules(entries))
        if p is not None  # always: code_modules names only the modules it found a file for
    }
    files |= files_digest(PACKAGE, data, PACKAGE.parent)
    return tree_digest(files)


def _stopped(name: str, stop: tuple[str, ...]) -> bool:
    return any(name == s or name.startswith(s + ".") for s in stop)


def _module_path(name: str) -> Path | None:
    """The source file of washexp module ``name`` (None outside washexp)."""
    if name != "washexp" and not name.startswith("washexp."):
        return None
    base = PACKAGE.parent.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _imports(path: Path) -> list[str]:
    """The washexp modules a source file imports (``from washexp.x import y``: ``washexp.x.y``
    when y is a module, else ``washexp.x``), lazy imports inside functions included."""
    import ast

    out = []
    for node in ast.walk(ast.parse(path.read_bytes(), str(path))):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            subs = [f"{node.module}.{a.name}" for a in node.names if _module_path(f"{node.module}.{a.name}")]
            out += subs or [node.module]
    return out


def git_commit(root: Path) -> str | None:
    """The commit checked out at ``root`` (works in a git worktree too), or None outside git."""
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def public_config(cfg) -> str:
    """The resolved config as YAML, as a run artifact: without :data:`washexp.config.NOT_PUBLISHED`
    (the tracking settings: where results go is not what they are) and without credentials in the
    endpoint URL."""
    data = OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True)
    assert isinstance(data, dict)  # the run config is a structured config: a mapping
    for key in NOT_PUBLISHED:
        data.pop(key, None)
    endpoint = data.get("endpoint") or {}
    if endpoint.get("base_url"):
        endpoint["base_url"] = safe_url(endpoint["base_url"])
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
