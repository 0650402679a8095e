"""sha256 and the one canonical JSON, shared by identities, recording keys and manifests."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical_json(obj: Any) -> str:
    """Sorted keys, no spaces, non-ASCII kept as is: the same value always gives the same text."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_hash(obj: Any) -> str:
    """sha256 of :func:`canonical_json` (UTF-8): a condition's identity, a recording's key."""
    return sha256_bytes(canonical_json(obj).encode("utf-8"))


def tree_digest(files: dict[str, str]) -> str:
    """One digest for a set of (path -> sha256) entries, as ``sha256sum`` would list them."""
    lines = "".join(f"{digest}  {name}\n" for name, digest in sorted(files.items()))
    return sha256_bytes(lines.encode())
