"""Object storage by URI: ``file://`` (the local default) and ``s3://`` (boto3).

Small objects are read and written whole (:func:`read_bytes`, :func:`write_bytes`; a write is
atomic). Directories are *published*: every file is copied first and a manifest
(``_manifest.json``: relative path → sha256 and size, a digest of the set, metadata) is written
last, so a reader that finds the manifest finds every file complete, and a reader that does not
find it treats the directory as absent. Locally a publish is a single rename of a finished
directory. :func:`fetch_dir` copies a published directory back, verifies every file against the
manifest and skips files that are already present and verified, so an interrupted fetch resumes.

Transfers run in parallel (s3transfer's TransferManager for S3, a thread pool locally).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gangway.errors import NotFoundError, PermanentError
from gangway.storage._digest import listing_digest, sha256_bytes, sha256_file
from gangway.storage._local import (
    LocalBackend,
    is_temp_name,
    os_errors,
    temp_sibling,
    write_atomic,
)
from gangway.storage._types import Manifest, ObjectInfo
from gangway.storage._uri import Location, join, parse

__all__ = [
    "MANIFEST_NAME",
    "FetchResult",
    "Location",
    "Manifest",
    "ObjectInfo",
    "build_manifest",
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

MANIFEST_NAME = "_manifest.json"
DEFAULT_WORKERS = 32

_local = LocalBackend()


def _s3_backend(loc: Location) -> Any:
    from gangway.storage._s3 import S3Backend

    return S3Backend(loc.bucket)


def list_objects(uri: str) -> list[ObjectInfo]:
    """Every object under ``uri`` (recursively), keys relative to it, sorted."""
    loc = parse(uri)
    if loc.scheme == "file":
        return _local.list(loc.path)
    return list(_s3_backend(loc).list(loc.key))


def exists(uri: str) -> bool:
    """True when ``uri`` names an existing object (not a prefix)."""
    loc = parse(uri)
    return (
        _local.exists(loc.path) if loc.scheme == "file" else bool(_s3_backend(loc).exists(loc.key))
    )


def read_bytes(uri: str) -> bytes:
    loc = parse(uri)
    if loc.scheme == "file":
        return _local.read_bytes(loc.path)
    data: bytes = _s3_backend(loc).read_bytes(loc.key)
    return data


def write_bytes(uri: str, data: bytes) -> None:
    """Write an object atomically: readers see the old object, or the whole new one."""
    loc = parse(uri)
    if loc.scheme == "file":
        _local.write_bytes(loc.path, data)
    else:
        _s3_backend(loc).write_bytes(loc.key, data)


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
    loc = parse(uri)
    if loc.scheme == "file":
        _local.copy_files([(loc.path, path)], workers=1)
    else:
        _s3_backend(loc).download_files([(loc.key, path, None)], workers=1)


def upload_file(path: Path, uri: str) -> None:
    """Copy one local file to an object (atomically)."""
    loc = parse(uri)
    if loc.scheme == "file":
        _local.copy_files([(path, loc.path)], workers=1)
    else:
        _s3_backend(loc).upload_files([(path, loc.key)], workers=1)


def delete(uri: str) -> None:
    """Delete an object or everything under a prefix. Deleting nothing is not an error."""
    loc = parse(uri)
    if loc.scheme == "file":
        _local.delete([loc.path])
        return
    backend = _s3_backend(loc)
    keys = [loc.child(o.key).key for o in backend.list(loc.key)]
    if keys:
        backend.delete(keys)


def read_manifest(uri: str) -> Manifest | None:
    """The manifest of a published directory, or None when it is absent or not yet complete."""
    try:
        raw = read_json(join(uri, MANIFEST_NAME))
    except NotFoundError:
        return None
    try:
        return Manifest(
            files=dict(raw["files"]),
            digest=str(raw["digest"]),
            metadata=dict(raw.get("metadata", {})),
        )
    except (KeyError, TypeError, AttributeError) as e:
        raise PermanentError(
            f"{join(uri, MANIFEST_NAME)}: malformed manifest (missing {e}); republish the directory"
        ) from None


def build_manifest(
    local_dir: Path, metadata: dict[str, Any] | None = None, workers: int = 4
) -> Manifest:
    """Hash every file under ``local_dir`` (temporaries and an old manifest excluded)."""
    infos = [o for o in _local.list(local_dir) if o.key != MANIFEST_NAME]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        digests = list(pool.map(lambda o: sha256_file(local_dir / o.key), infos))
    files: dict[str, dict[str, Any]] = {
        o.key: {"sha256": d, "size": o.size} for o, d in zip(infos, digests, strict=True)
    }
    return Manifest(
        files=files,
        digest=listing_digest({k: v["sha256"] for k, v in files.items()}),
        metadata=dict(metadata or {}),
    )


def _manifest_bytes(m: Manifest) -> bytes:
    return (json.dumps(m.to_json(), indent=1, sort_keys=True) + "\n").encode()


def publish_dir(
    local_dir: Path,
    uri: str,
    *,
    metadata: dict[str, Any] | None = None,
    move: bool = False,
    workers: int = DEFAULT_WORKERS,
    on_done: Callable[[int], None] | None = None,
) -> Manifest:
    """Publish ``local_dir`` at ``uri``: files first, the manifest last.

    Publishing is write-once: if ``uri`` already holds a complete directory, it is kept and its
    manifest returned (a re-run after a crash converges on the first complete publish). A
    leftover partial directory is replaced. ``move=True`` lets a local publish rename
    ``local_dir`` into place instead of copying it (it must be on the same filesystem).
    """
    if not local_dir.is_dir():
        raise NotFoundError(f"{local_dir}: no such directory to publish")
    existing = read_manifest(uri)
    if existing is not None:
        return existing
    manifest = build_manifest(local_dir, metadata)
    loc = parse(uri)
    if loc.scheme == "file":
        _publish_local(local_dir, loc.path, manifest, move=move, workers=workers, on_done=on_done)
    else:
        _publish_s3(local_dir, loc, manifest, workers=workers, on_done=on_done)
    return manifest


def _publish_local(
    src: Path,
    dst: Path,
    manifest: Manifest,
    *,
    move: bool,
    workers: int,
    on_done: Callable[[int], None] | None,
) -> None:
    with os_errors("write", dst.parent):
        dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_sibling(dst)
    try:
        if move:
            os.replace(src, tmp)
        else:
            pairs = [(src / k, tmp / k) for k in manifest.files]
            _local.copy_files(pairs, workers=workers, on_done=on_done)
        (tmp / MANIFEST_NAME).write_bytes(_manifest_bytes(manifest))
        if dst.exists():  # a partial leftover (no manifest): replace it
            shutil.rmtree(dst)
        os.replace(tmp, dst)
    except OSError as e:
        if read_manifest(str(dst)) is not None:  # lost a race to an identical publisher
            return
        raise PermanentError(
            f"cannot publish {src} to file://{dst}: {e.strerror or e}; check the path and its "
            "permissions"
        ) from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _publish_s3(
    src: Path,
    loc: Location,
    manifest: Manifest,
    *,
    workers: int,
    on_done: Callable[[int], None] | None,
) -> None:
    backend = _s3_backend(loc)
    stale = [o.key for o in backend.list(loc.key + "/") if o.key not in manifest.files]
    if stale:  # leftovers of an earlier, interrupted publish
        backend.delete([loc.child(k).key for k in stale])
    pairs = [(src / k, loc.child(k).key) for k in manifest.files]
    backend.upload_files(pairs, workers=workers, on_done=on_done)
    backend.write_bytes(loc.child(MANIFEST_NAME).key, _manifest_bytes(manifest))


def upload_parts(
    local_dir: Path, uri: str, *, workers: int = DEFAULT_WORKERS, move: bool = False
) -> dict[str, dict[str, Any]]:
    """Copy one writer's share of a directory under ``uri`` without committing it.

    For directories written by several processes (one checkpoint from many ranks): each
    uploads its parts and returns their manifest entries; one process then gathers the entries
    and calls :func:`commit_manifest`. Until then readers treat the directory as absent.
    ``move=True`` renames local files into a ``file://`` destination on the same filesystem.
    """
    part = build_manifest(local_dir)
    loc = parse(uri)
    if loc.scheme == "file" and move:  # same filesystem: rename, don't copy
        for k in part.files:
            with os_errors("write", loc.path / k):
                (loc.path / k).parent.mkdir(parents=True, exist_ok=True)
                os.replace(local_dir / k, loc.path / k)
    elif loc.scheme == "file":
        _local.copy_files([(local_dir / k, loc.path / k) for k in part.files], workers)
    else:
        pairs = [(local_dir / k, loc.child(k).key) for k in part.files]
        _s3_backend(loc).upload_files(pairs, workers=workers)
    return part.files


def commit_manifest(
    uri: str, files: dict[str, dict[str, Any]], metadata: dict[str, Any] | None = None
) -> Manifest:
    """Write the manifest of a directory whose files are all in place: the commit point."""
    manifest = Manifest(
        files=dict(sorted(files.items())),
        digest=listing_digest({k: v["sha256"] for k, v in files.items()}),
        metadata=dict(metadata or {}),
    )
    write_bytes(join(uri, MANIFEST_NAME), _manifest_bytes(manifest))
    return manifest


def local_view(uri: str, cache_dir: Path, *, workers: int = DEFAULT_WORKERS) -> Path:
    """A verified local directory holding the published directory at ``uri``.

    A ``file://`` directory is verified in place (no copy); an ``s3://`` one is fetched into
    ``cache_dir`` (a directory of its own per URI), skipping files already verified there.
    """
    loc = parse(uri)
    if loc.scheme == "file":
        manifest = read_manifest(uri)
        if manifest is None:
            raise NotFoundError(f"{uri}: no complete published directory here ({MANIFEST_NAME})")
        _check_rel_paths(uri, manifest)
        _verify(uri, loc.path, manifest, list(manifest.files), remove_bad=False)
        return loc.path
    dest = cache_dir / sha256_bytes(uri.encode())[:16]
    fetch_dir(uri, dest, workers=workers)
    return dest


@dataclass(frozen=True)
class FetchResult:
    """What :func:`fetch_dir` did: ``copied`` files transferred, ``skipped`` already verified."""

    manifest: Manifest
    copied: int
    skipped: int
    bytes_copied: int


def fetch_dir(
    uri: str,
    dest: Path,
    *,
    workers: int = DEFAULT_WORKERS,
    on_done: Callable[[int], None] | None = None,
) -> FetchResult:
    """Copy a published directory to ``dest`` and verify every file against its manifest.

    Files already at ``dest`` with the right sha256 are not copied again, so a fetch interrupted
    at any point resumes where it stopped. A file whose bytes do not match the manifest is
    deleted locally and reported as a permanent error: corrupt data is never left for use.
    """
    manifest = read_manifest(uri)
    if manifest is None:
        if not list_objects(uri):
            raise NotFoundError(f"{uri}: nothing there; check the URI (is the data published?)")
        raise PermanentError(
            f"{uri}: no {MANIFEST_NAME}, so the directory is incomplete or was not published "
            "by Gangway; publish it with its manifest (see `python -m components.staging --help`)"
        )
    with os_errors("write", dest):
        dest.mkdir(parents=True, exist_ok=True)
    _check_rel_paths(uri, manifest)

    def verified(rel: str) -> bool:
        return _matches(dest / rel, manifest.files[rel])

    with ThreadPoolExecutor(max_workers=4) as pool:
        present = dict(zip(manifest.files, pool.map(verified, manifest.files), strict=True))
    todo = [rel for rel, ok in present.items() if not ok]
    skipped = len(manifest.files) - len(todo)
    if on_done is not None:
        for rel, ok in present.items():
            if ok:
                on_done(int(manifest.files[rel]["size"]))
    loc = parse(uri)
    if loc.scheme == "file":
        _local.copy_files([(loc.path / r, dest / r) for r in todo], workers, on_done)
    else:
        backend = _s3_backend(loc)
        listing = {o.key: o for o in backend.list(loc.key.rstrip("/") + "/")} if todo else {}
        items = [(loc.child(r).key, dest / r, listing.get(r)) for r in todo]
        backend.download_files(items, workers, on_done)
    _verify(uri, dest, manifest, todo, remove_bad=True)
    nbytes = sum(int(manifest.files[r]["size"]) for r in todo)
    return FetchResult(manifest=manifest, copied=len(todo), skipped=skipped, bytes_copied=nbytes)


def _check_rel_paths(uri: str, manifest: Manifest) -> None:
    for rel in manifest.files:
        parts = Path(rel).parts
        if Path(rel).is_absolute() or ".." in parts or any(is_temp_name(p) for p in parts):
            raise PermanentError(f"{uri}: manifest lists an unsafe path {rel!r}; fix the manifest")


def _verify(uri: str, root: Path, manifest: Manifest, rels: list[str], *, remove_bad: bool) -> None:
    """Check ``rels`` under ``root`` against the manifest; remove and report any bad file."""

    def good(rel: str) -> bool:
        return _matches(root / rel, manifest.files[rel])

    with ThreadPoolExecutor(max_workers=4) as pool:
        ok = dict(zip(rels, pool.map(good, rels), strict=True))
    bad = sorted(r for r, g in ok.items() if not g)
    if remove_bad:
        for rel in bad:
            (root / rel).unlink(missing_ok=True)
    if bad:
        raise PermanentError(
            f"{uri}: {len(bad)} file(s) missing or not matching the manifest's sha256 "
            f"(first: {bad[0]}); the stored data is corrupt and was not used. "
            "Republish it from the source"
        )


def _matches(path: Path, info: dict[str, Any]) -> bool:
    return (
        path.is_file()
        and path.stat().st_size == int(info["size"])
        and sha256_file(path) == info["sha256"]
    )
