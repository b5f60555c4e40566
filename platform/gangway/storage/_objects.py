"""Single objects by URI: list, test, read and write whole, copy to and from a local file, delete.

Each function picks the backend for its URI once (:func:`backend_for`) and makes one call on it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gangway.errors import PermanentError
from gangway.storage._backend import backend_for
from gangway.storage._types import ObjectInfo

__all__ = [
    "check_location",
    "delete",
    "download_file",
    "exists",
    "list_objects",
    "read_bytes",
    "read_json",
    "upload_file",
    "write_bytes",
    "write_json",
]


def list_objects(uri: str) -> list[ObjectInfo]:
    """Every object under ``uri`` (recursively), keys relative to it, sorted."""
    return backend_for(uri).list_objects()


def exists(uri: str) -> bool:
    """True when ``uri`` names an existing object (not a prefix)."""
    return backend_for(uri).exists()


def read_bytes(uri: str) -> bytes:
    return backend_for(uri).read_bytes()


def write_bytes(uri: str, data: bytes) -> None:
    """Write an object atomically: readers see the old object, or the whole new one."""
    backend_for(uri).write_bytes(data)


def read_json(uri: str) -> Any:
    data = read_bytes(uri)
    try:
        return json.loads(data)
    except ValueError as e:
        raise PermanentError(f"{uri}: not valid JSON ({e})") from None


def write_json(uri: str, obj: Any) -> None:
    write_bytes(uri, (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode())


def download_file(uri: str, path: Path) -> None:
    """Copy one object to a local path (atomically)."""
    backend_for(uri).download([("", path)], workers=1, on_done=None)


def upload_file(path: Path, uri: str) -> None:
    """Copy one local file to an object (atomically)."""
    backend_for(uri).upload([(path, "")], workers=1, move=False)


def delete(uri: str) -> None:
    """Delete an object or everything under a prefix. Deleting nothing is not an error."""
    backend_for(uri).delete()


def check_location(uri: str, *, write: bool) -> None:
    """Raise, naming what to fix, when ``uri`` cannot serve: with ``write``, a probe object is
    written under it and deleted (the directory or bucket is created or must exist, and be
    writable); else its ``s3://`` bucket must exist (a ``file://`` path is left to its
    reader, which says what is missing)."""
    from gangway.storage._uri import parse

    loc = parse(uri)
    if write:
        probe = loc.child(".gangway-write-check")
        backend_for(str(probe)).write_bytes(b"")
        backend_for(str(probe)).delete()
    elif loc.scheme == "s3":
        from gangway.storage._s3 import check_bucket

        check_bucket(loc)
