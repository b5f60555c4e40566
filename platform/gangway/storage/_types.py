"""Value types shared by the storage backends."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Manifest", "ObjectInfo"]


@dataclass(frozen=True)
class ObjectInfo:
    """One object under a listed prefix: its key relative to the prefix and its size."""

    key: str
    size: int
    etag: str | None = None


@dataclass(frozen=True)
class Manifest:
    """The record written last when a directory is published.

    ``files`` maps each relative path to its sha256 and size; ``digest`` names the whole
    set (see :func:`gangway.storage.listing_digest`); ``metadata`` is free-form JSON.
    """

    files: dict[str, dict[str, Any]]
    digest: str
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"version": 1, "digest": self.digest, "files": self.files, "metadata": self.metadata}

    @property
    def total_bytes(self) -> int:
        return sum(int(f["size"]) for f in self.files.values())
