"""sha256 digests of files and of file listings."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

__all__ = ["listing_digest", "sha256_bytes", "sha256_file"]

_CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks (hashlib releases the GIL)."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def listing_digest(files: Mapping[str, str]) -> str:
    """Digest of a set of files, from their relative paths and sha256s (order-free)."""
    canonical = json.dumps(sorted(files.items()), separators=(",", ":"))
    return "sha256:" + sha256_bytes(canonical.encode())
