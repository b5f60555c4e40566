"""Value types shared by the storage backends."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

__all__ = ["Manifest", "ObjectInfo", "OnDone", "TreeCommit"]

OnDone: TypeAlias = Callable[[int], None] | None
"""A progress callback: called with each file's size as its transfer completes."""


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


def _never_committed() -> bool:
    return False


@dataclass(frozen=True)
class TreeCommit:
    """A directory tree for a backend to place at its location, and the marker that commits it.

    The files ``rels`` of the local directory ``src`` go first, the bytes ``marker`` at
    ``marker_name`` last. ``move`` lets a backend on the local filesystem rename ``src`` into
    place instead of copying it. ``committed`` says whether another publisher has completed the
    same location meanwhile: a backend whose commit step can fail under such a race asks it
    before reporting the failure.
    """

    src: Path
    rels: Sequence[str]
    marker_name: str
    marker: bytes
    move: bool = False
    workers: int = 1
    on_done: OnDone = None
    committed: Callable[[], bool] = _never_committed
