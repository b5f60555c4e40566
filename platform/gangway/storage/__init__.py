"""Object storage by URI: ``file://`` (the local default) and ``s3://`` (botocore).

Small objects are read and written whole (:func:`read_bytes`, :func:`write_bytes`; a write is
atomic). Directories are *published*: every file is copied first and a manifest
(``_manifest.json``: relative path → sha256 and size, a digest of the set, metadata) is written
last, so a reader that finds the manifest finds every file complete, and a reader that does not
find it treats the directory as absent. Locally a publish is a single rename of a finished
directory. :func:`fetch_dir` copies a published directory back, verifies every file against the
manifest and skips files that are already present and verified, so an interrupted fetch resumes.

Transfers run in parallel (on S3 one request per small object on worker threads and
s3transfer's TransferManager for large ones; a thread pool locally).

This module only re-exports the public API. Behind it:

* ``_uri``: parsing URIs (one rule for every scheme) and joining paths onto them;
* ``_backend``: the :class:`~gangway.storage._backend.Backend` protocol, and ``backend_for``,
  the one place that picks the backend for a URI;
* ``_local``, ``_s3``: the ``file://`` and ``s3://`` backends;
* ``_objects``: single objects by URI (read, write, list, copy, delete);
* ``_publish``: the publish / fetch protocol for directories (manifest last, verify on fetch);
* ``_types``, ``_digest``: the value types and the sha256 digests they share.
"""

from __future__ import annotations

from gangway.storage._digest import listing_digest, sha256_bytes, sha256_file
from gangway.storage._local import os_errors, write_atomic
from gangway.storage._objects import (
    check_location,
    delete,
    download_file,
    exists,
    list_objects,
    read_bytes,
    read_json,
    upload_file,
    write_bytes,
    write_json,
)
from gangway.storage._publish import (
    DEFAULT_WORKERS,
    MANIFEST_NAME,
    FetchResult,
    build_manifest,
    commit_manifest,
    fetch_dir,
    local_view,
    publish_dir,
    read_manifest,
    upload_parts,
)
from gangway.storage._types import Manifest, ObjectInfo
from gangway.storage._uri import Location, join, parse

__all__ = [
    "DEFAULT_WORKERS",
    "MANIFEST_NAME",
    "FetchResult",
    "Location",
    "Manifest",
    "ObjectInfo",
    "build_manifest",
    "check_location",
    "commit_manifest",
    "delete",
    "download_file",
    "exists",
    "fetch_dir",
    "join",
    "list_objects",
    "listing_digest",
    "local_view",
    "os_errors",
    "parse",
    "publish_dir",
    "read_bytes",
    "read_json",
    "read_manifest",
    "sha256_bytes",
    "sha256_file",
    "upload_file",
    "upload_parts",
    "write_atomic",
    "write_bytes",
    "write_json",
]
