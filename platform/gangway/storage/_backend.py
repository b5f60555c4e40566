"""The storage backend protocol, and the one place that picks a backend for a URI.

A :class:`Backend` is bound to one parsed location (``file:///abs/path``, ``s3://bucket/key``)
and does everything the public functions need there. Where an operation moves several files,
each one is named by its path *relative to the location* (``""`` is the location itself), so
the code above the backends never builds a local path or an object key. A new scheme is one
module implementing this protocol, plus its line in :func:`backend_for` (and its parsing rule
in ``_uri``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from gangway.storage._local import LocalBackend
from gangway.storage._types import ObjectInfo, OnDone, TreeCommit
from gangway.storage._uri import Location, parse

__all__ = ["Backend", "backend_for"]


class Backend(Protocol):
    """What is stored at one location: an object, or a tree of objects below it.

    ``on_done`` callbacks receive the size of each file as its transfer completes. Failures
    follow the error contract of :mod:`gangway.errors` (not found / transient / permanent).
    """

    location: Location

    def list_objects(self) -> list[ObjectInfo]:
        """Every object at or below the location, keys relative to it, sorted; an object at
        the location itself is listed with the key ``""``; nothing there is an empty list."""
        ...

    def exists(self) -> bool:
        """True when the location names an existing object (not a prefix)."""
        ...

    def read_bytes(self) -> bytes:
        """The whole object at the location."""
        ...

    def write_bytes(self, data: bytes) -> None:
        """Write the object at the location: readers see the old one, or the whole new one."""
        ...

    def delete(self) -> None:
        """Delete the object, or everything below the location; deleting nothing is no error."""
        ...

    def download(self, pairs: Sequence[tuple[str, Path]], workers: int, on_done: OnDone) -> None:
        """Copy (relative path, local path) pairs in parallel; each local file lands whole."""
        ...

    def upload(self, pairs: Sequence[tuple[Path, str]], workers: int, *, move: bool) -> None:
        """Copy (local path, relative path) pairs in parallel; each object appears whole.

        ``move=True`` lets a backend on the local filesystem rename the files instead.
        """
        ...

    def publish_tree(self, tree: TreeCommit) -> None:
        """Place ``tree`` at the location, replacing any leftovers of an earlier attempt, its
        marker last: a reader that finds the marker finds every file complete."""
        ...

    def local_dir(self) -> Path | None:
        """The location as a local path, when it is one (a reader can use it without a copy)."""
        ...


def backend_for(uri: str) -> Backend:
    """Parse ``uri`` and return the backend bound to it: the only place that reads the scheme.

    boto3 is imported only when an ``s3://`` URI is used, so ``file://`` steps start fast.
    """
    loc = parse(uri)
    if loc.scheme == "s3":
        from gangway.storage._s3 import S3Backend

        return S3Backend(loc)
    return LocalBackend(loc)
