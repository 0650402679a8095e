"""sha256 helpers shared by fixtures, identities and the tracking manifest."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tree_digest(files: dict[str, str]) -> str:
    """One digest for a set of (path -> sha256) entries, as ``sha256sum`` would list them."""
    lines = "".join(f"{digest}  {name}\n" for name, digest in sorted(files.items()))
    return sha256_bytes(lines.encode())


def identity_hash(identity: dict[str, Any]) -> str:
    """Stable hash of a condition's identity (canonical JSON: sorted keys, no spaces)."""
    return sha256_bytes(json.dumps(identity, sort_keys=True, separators=(",", ":")).encode())
