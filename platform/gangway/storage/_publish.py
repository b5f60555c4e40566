"""The publish / fetch protocol for directory trees: a manifest written last is the commit point.

Publishing copies every file first and writes ``_manifest.json`` (relative path → sha256 and
size, a digest of the set, metadata) last, so a reader that finds the manifest finds every file
complete, and a reader that does not find it treats the directory as absent. Fetching copies a
published directory back, verifies every file against the manifest and skips files already
present and verified, so an interrupted fetch resumes. How the files are placed is the
backend's business (:meth:`Backend.publish_tree <gangway.storage._backend.Backend.publish_tree>`):
locally a single rename of a finished directory, on S3 the manifest PUT last.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gangway.errors import NotFoundError, PermanentError
from gangway.storage._backend import backend_for
from gangway.storage._digest import listing_digest, sha256_bytes, sha256_file
from gangway.storage._local import is_temp_name, list_files, os_errors
from gangway.storage._objects import list_objects, read_json, write_bytes
from gangway.storage._types import Manifest, TreeCommit
from gangway.storage._uri import join

__all__ = [
    "DEFAULT_WORKERS",
    "MANIFEST_NAME",
    "FetchResult",
    "build_manifest",
    "commit_manifest",
    "fetch_dir",
    "local_view",
    "publish_dir",
    "read_manifest",
    "upload_parts",
]

MANIFEST_NAME = "_manifest.json"
DEFAULT_WORKERS = 32


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
    infos = [o for o in list_files(local_dir) if o.key != MANIFEST_NAME]
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
    tree = TreeCommit(
        src=local_dir,
        rels=list(manifest.files),
        marker_name=MANIFEST_NAME,
        marker=_manifest_bytes(manifest),
        move=move,
        workers=workers,
        on_done=on_done,
        committed=lambda: read_manifest(uri) is not None,
    )
    backend_for(uri).publish_tree(tree)
    return manifest


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
    pairs = [(local_dir / k, k) for k in part.files]
    backend_for(uri).upload(pairs, workers, move=move)
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
    root = backend_for(uri).local_dir()
    if root is None:
        dest = cache_dir / sha256_bytes(uri.encode())[:16]
        fetch_dir(uri, dest, workers=workers)
        return dest
    manifest = read_manifest(uri)
    if manifest is None:
        raise NotFoundError(f"{uri}: no complete published directory here ({MANIFEST_NAME})")
    _check_rel_paths(uri, manifest)
    _verify(uri, root, manifest, list(manifest.files), remove_bad=False)
    return root


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
    present = _present(dest, manifest)
    todo = [rel for rel in manifest.files if rel not in present]
    skipped = len(present)
    if on_done is not None:
        for rel in manifest.files:
            if rel in present:
                on_done(int(manifest.files[rel]["size"]))
    backend_for(uri).download([(r, dest / r) for r in todo], workers, on_done)
    _verify(uri, dest, manifest, todo, remove_bad=True)
    nbytes = sum(int(manifest.files[r]["size"]) for r in todo)
    return FetchResult(manifest=manifest, copied=len(todo), skipped=skipped, bytes_copied=nbytes)


def _check_rel_paths(uri: str, manifest: Manifest) -> None:
    for rel in manifest.files:
        parts = Path(rel).parts
        if Path(rel).is_absolute() or ".." in parts or any(is_temp_name(p) for p in parts):
            raise PermanentError(f"{uri}: manifest lists an unsafe path {rel!r}; fix the manifest")


def _present(dest: Path, manifest: Manifest) -> set[str]:
    """The files already at ``dest`` with the manifest's size and sha256 (a resumed fetch).

    Sizes are compared first: a fresh destination costs one ``stat`` per file, no hashing.
    """
    same_size = []
    for rel, info in manifest.files.items():
        try:
            st = (dest / rel).stat()
        except OSError:  # not there (or unreadable): fetched again
            continue
        if stat.S_ISREG(st.st_mode) and st.st_size == int(info["size"]):
            same_size.append(rel)
    return set(same_size) - set(_mismatches(dest, manifest, same_size))


def _verify(uri: str, root: Path, manifest: Manifest, rels: list[str], *, remove_bad: bool) -> None:
    """Check ``rels`` under ``root`` against the manifest; remove and report any bad file."""
    bad = _mismatches(root, manifest, rels)
    if remove_bad:
        for rel in bad:
            (root / rel).unlink(missing_ok=True)
    if bad:
        raise PermanentError(
            f"{uri}: {len(bad)} file(s) missing or not matching the manifest's sha256 "
            f"(first: {bad[0]}); the stored data is corrupt and was not used (publish it "
            "again from its source: stage the dataset again; a checkpoint is skipped on resume)"
        )


def _mismatches(root: Path, manifest: Manifest, rels: list[str], workers: int = 4) -> list[str]:
    """The ``rels`` missing under ``root`` or not matching the manifest, sorted. Hashed on
    ``workers`` threads (hashlib releases the GIL), each taking an even share of the files:
    a task per file would cost more than hashing a small one."""
    if not rels:
        return []

    def bad_in(share: list[str]) -> list[str]:
        return [rel for rel in share if not _matches(root / rel, manifest.files[rel])]

    shares = [rels[i::workers] for i in range(min(workers, len(rels)))]
    with ThreadPoolExecutor(max_workers=len(shares)) as pool:
        return sorted(rel for bad in pool.map(bad_in, shares) for rel in bad)


def _matches(path: Path, info: dict[str, Any]) -> bool:
    return (
        path.is_file()
        and path.stat().st_size == int(info["size"])
        and sha256_file(path) == info["sha256"]
    )
