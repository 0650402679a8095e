"""Where a result came from: the source that computed it, the git commit, the public config."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml
from omegaconf import OmegaConf

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


def code_digest(*modules: str) -> str:
    """One digest of the code that computes a family's results: its folder and the shared modules
    it names (e.g. ``tokens.py``), prompts included. It enters every condition's identity, so a
    changed rule or prompt is a new condition, never an old run shown as new."""
    files: dict[str, str] = {}
    for name in modules:
        target = PACKAGE / name
        if target.is_dir():
            files |= files_digest(target, ("**/*.py", "**/*.txt"), PACKAGE.parent)
        else:
            files[target.relative_to(PACKAGE.parent).as_posix()] = sha256_bytes(target.read_bytes())
    return tree_digest(files)


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
    """The resolved config as YAML, as a run artifact: without the tracking settings (where
    results go is not what they are) and without credentials in the endpoint URL."""
    data = OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True)
    data.pop("tracking", None)
    endpoint = data.get("endpoint") or {}
    if endpoint.get("base_url"):
        endpoint["base_url"] = safe_url(endpoint["base_url"])
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
